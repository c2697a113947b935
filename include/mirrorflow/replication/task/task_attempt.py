"""One attempt of a copy task: who runs it and how much it takes at once.

What a task copies is (layout, slot, units); this is everything else a caller decides about the
attempt, in one value instead of six optional parameters that every caller passed through by
position (`copy_task`, `TaskCopier`, `copy_planned`)."""

from __future__ import annotations

from dataclasses import dataclass

from mirrorflow.replication.task.faults import NO_FAULTS, Faults
from mirrorflow.replication.task.reader import Follow


@dataclass(frozen=True)
class TaskAttempt:
    owner: str | None = None  # the run's lease owner: the task stops when its run no longer holds the lease
    number: int = 0  # Spark's attempt number of the task (0 elsewhere): a retried attempt wins over its zombie
    follow: Follow | None = None  # a continuous run's following; None: copy the units and end
    in_flight: int | None = None  # partitions read at once (None: task.partitions.in.flight)
    # lanes reading at once in this process, which share its memory budget (None: this task's own)
    budget_lanes: int | None = None
    faults: Faults = NO_FAULTS  # the tests' seam for crashes and pauses at named points


ONE_SHOT = TaskAttempt()  # a run's task outside Spark's retries and outside any lease: tests, tools
