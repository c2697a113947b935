"""A run's plan, typed from the planner to the copy task: its units, grouped into tasks, and what
every task needs besides them (`TaskHead`).

It changes form once, where it leaves a process: `encode()` / `decode()` (the DAG's XCom, the
plan file spark-submit ships; replication.executors.handoff), and a Spark Connect job's input column
(one JSON row per task). Nothing in it is a secret: tasks load the config themselves.
"""

from __future__ import annotations

import base64
import json
import time
import zlib
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from mirrorflow.errors import MirrorflowError
from mirrorflow.state.task_slots import TaskLayout

PLAN_PREFIX = "mfplan1:"  # zlib + base64 of the plan's JSON


@dataclass(frozen=True)
class Unit:
    """Copy source offsets [start, end) of one partition into the same partition of target_topic."""

    topic: str
    partition: int
    target_topic: str
    start: int
    end: int
    log_start: int = 0  # source log start at planning time (start < log_start: offsets were lost)
    topic_id: str = ""  # the topics' IDs when planned: the copy refuses state written for others
    target_topic_id: str = ""
    # a backfill unit (replication.plan.backfill_plan) copies [start, end) minus the ledger wherever the
    # progress stands; a normal unit copies from the committed progress onwards
    backfill: bool = False

    @property
    def records(self) -> int:
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        # its fields are strings, numbers and a flag: no deep copy (asdict's took 7.5 us a unit, this 0.6 us;
        # a first run over 2,000 partitions encodes 2,000 units twice: the job's rows and the plan file)
        return {k: getattr(self, k) for k in UNIT_FIELDS}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Unit:
        return cls(**{k: d[k] for k in UNIT_FIELDS if k in d})


UNIT_FIELDS = tuple(f.name for f in fields(Unit))


@dataclass(frozen=True)
class FollowSpec:
    """What a continuous run tells its copy tasks (replication.task.follow; never secrets).

    The run follows for `seconds` from when its copy starts (`started`, called as the driver hands
    out the tasks), not from its plan: a DAG's copy task queued behind others, or a Spark job slow to
    start, still follows for its whole window instead of waking past a deadline with nothing copied."""

    seconds: float  # continuous.run.seconds (or --seconds)
    batch_ms: int  # continuous.poll.ms: a transaction commits at least this often while records come
    check_s: float  # continuous.state.check.seconds: how often a task reads the flow's state
    stop_file: str | None = None  # its existence stops the run (SIGTERM of the driver)
    deadline: float | None = None  # wall clock (time.time()) at which every partition stops, once started

    def started(self, now: float) -> FollowSpec:
        """This spec with its deadline, counted from `now` (kept if it has one: every task of a run
        stops together, whenever each began)."""
        return self if self.deadline is not None else replace(self, deadline=now + self.seconds)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FollowSpec:
        deadline = d.get("deadline")  # a plan written by an earlier release has a deadline and no seconds
        return cls(
            float(d.get("seconds", 0.0)),
            int(d["batch_ms"]),
            float(d["check_s"]),
            d.get("stop_file"),
            None if deadline is None else float(deadline),
        )


@dataclass(frozen=True)
class TaskHead:
    """What every copy task of a plan needs besides its units (small: each Spark task carries it)."""

    flow: str
    layout: TaskLayout | None
    slots: tuple[int, ...]  # each task's slot in `layout`
    owner: str | None = None  # the run's lease owner (state.lease): a task of a run taken over copies nothing
    follow: FollowSpec | None = None  # a continuous run: when its partitions stop

    def slot(self, index: int) -> tuple[TaskLayout, int]:
        """Task `index`'s layout and slot (MirrorflowError for a plan without them)."""
        if self.layout is None or index >= len(self.slots):
            raise MirrorflowError(
                f"the plan of flow {self.flow} has no task layout (planned by an older mirrorflow?): plan again"
            )
        return self.layout, self.slots[index]


@dataclass
class Plan:
    flow: str
    config_path: str | None
    tasks: list[list[Unit]]
    partitions: list[dict[str, Any]] = field(default_factory=list)  # per-partition summary for the report
    planned_at: float = field(default_factory=time.time)
    lease: dict[str, str] | None = None  # {"owner", "who"} of the run's lease (state.lease), kept by the copy job
    layout: TaskLayout | None = None  # the generation of task slots the tasks copy with (state.task_slots)
    slots: list[int] = field(default_factory=list)  # each task's slot in `layout`
    run: str = ""  # the run's id (replication.executors.handoff.new_run_id): its results are kept under it
    follow: FollowSpec | None = None  # a continuous run's: when its partitions stop

    @property
    def units(self) -> list[Unit]:
        return [u for t in self.tasks for u in t]

    def head(self) -> TaskHead:
        owner = (self.lease or {}).get("owner")
        follow = self.follow.started(time.time()) if self.follow is not None else None  # the copy starts now
        return TaskHead(self.flow, self.layout, tuple(self.slots), owner, follow)

    def narrowed(self, tasks: list[list[Unit]]) -> None:
        """Keep only `tasks` (some of this plan's, or none: a dry run), with their slots."""
        slot_of = dict(zip((id(t) for t in self.tasks), self.slots, strict=False))
        self.slots = [slot_of[id(t)] for t in tasks if id(t) in slot_of]
        self.tasks = tasks

    def to_dict(self) -> dict[str, Any]:
        """What the plan file holds: flow name, config path and units -- never secrets."""
        d: dict[str, Any] = {
            "flow": self.flow,
            "config": self.config_path,
            "planned_at": self.planned_at,
            "tasks": [[u.to_dict() for u in t] for t in self.tasks],
            "partitions": self.partitions,
            "lease": self.lease,
            "run": self.run,
        }
        if self.layout is not None:
            d["layout"] = {**self.layout.to_dict(), "task_slots": list(self.slots)}
        if self.follow is not None:
            d["continuous"] = self.follow.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        layout, follow = d.get("layout"), d.get("continuous")
        return cls(
            d["flow"],
            d.get("config"),
            [[Unit.from_dict(u) for u in t] for t in d["tasks"]],
            d.get("partitions", []),
            d.get("planned_at", time.time()),
            d.get("lease"),
            TaskLayout.from_dict(layout) if layout else None,
            list(layout.get("task_slots", [])) if layout else [],
            str(d.get("run") or ""),
            FollowSpec.from_dict(follow) if follow else None,
        )

    def encode(self) -> str:
        """The plan as XCom carries it: one short string (2,000 units: ~60 KB instead of ~770 KB of JSON)."""
        raw = json.dumps(self.to_dict(), separators=(",", ":")).encode()
        return PLAN_PREFIX + base64.b64encode(zlib.compress(raw, 6)).decode("ascii")

    @classmethod
    def decode(cls, text: str) -> Plan:
        if not isinstance(text, str) or not text.startswith(PLAN_PREFIX):
            raise MirrorflowError(f"not a mirrorflow plan (expected text starting {PLAN_PREFIX!r}): {str(text)[:60]!r}")
        try:
            d = json.loads(zlib.decompress(base64.b64decode(text[len(PLAN_PREFIX) :])))
        except (ValueError, zlib.error) as exc:
            raise MirrorflowError(f"the plan handed over is damaged: {exc}") from None
        return cls.from_dict(d)
