"""A flow's recovery point objective (`rpo.seconds`): is any source record older than that not yet
on the target?

The measure, per source partition the flow has progress for: 0 when the partition has nothing
left to copy (its progress has reached the source's end, the last stable offset, read now); else
the age (now minus its source timestamp) of the oldest record not replicated yet: the first
committed record at or after the partition's progress, read from the source (one read of each
lagging partition, stopped at its first record). A lag made only of transaction markers and aborted
records holds no record and counts 0. The flow's figure is its worst partition's. With CreateTime
timestamps the age is the producer's clock, as MirrorMaker 2's record-age-ms is.

Cheaper figures already measured are not enough: the status's `lag_seconds` (age of the newest
COPIED record) is an upper bound that a quiet partition inflates (one new record after an hour
reads "3600 s"), and the run report's latency is what was copied, not what waits. A partition
whose age cannot be measured (source unreachable, a stopped partition) makes the verdict
`unknown` unless another partition already misses the objective; nothing is guessed. Topics the
flow has not started copying yet (no progress) are not counted.

`evaluate` is pure (tests, the status page, the metrics); `measure` reads the source; the alert
record (`rpo-alert`, a control record on the target) remembers the last verdict a notifier was told,
so it is told when the objective is first missed and when it is met again, not on every check.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from mirrorflow.errors import MirrorflowError
from mirrorflow.kafka.log_reader import READER_SETTINGS, LogReader

if TYPE_CHECKING:
    from mirrorflow.clients import FlowClients
    from mirrorflow.config import FlowConfig


class PartitionStatus(Protocol):
    """What the measure needs of a partition's status (observe.status.PartitionStatus)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def next(self) -> int: ...  # next source offset to copy (-1: nothing copied yet)
    @property
    def end(self) -> int: ...  # source end (last stable offset)
    @property
    def stopped(self) -> bool: ...
    @property
    def lag(self) -> int | None: ...


MISSED, MET, UNKNOWN = "missed", "met", "unknown"
NOTHING_PENDING = -1  # oldest_pending: read to the end, only markers or aborted records were there
ALERT = "rpo-alert"  # the control record of the last verdict a notifier was told
# a read of one record per lagging partition: small fetches, however large the backlog
PENDING_READ = {"max.partition.fetch.bytes": 65536, "fetch.max.bytes": 4 * 1024**2, "queued.max.messages.kbytes": 4096}


def objective_s(flow: FlowConfig) -> int:
    """The flow's `rpo.seconds` (0: it has no objective)."""
    return int(flow.props.get("rpo.seconds") or 0)


@dataclass(frozen=True)
class RpoVerdict:
    flow: str
    objective_s: int
    at_ms: int  # when it was measured
    state: str  # missed | met | unknown
    age_s: float | None  # the oldest unreplicated record's age (worst partition); None: unknown
    worst: str | None = None  # "topic[partition]" holding it
    unknown: tuple[str, ...] = field(default_factory=tuple)  # "topic[partition]: why" not measured

    @property
    def missed(self) -> bool:
        return self.state == MISSED

    def line(self) -> str:
        """One line for people: the status page, `mirrorflow status`, the alert."""
        head = f"RPO {self.objective_s} s"
        if self.state == UNKNOWN:
            why = "; ".join(self.unknown[:3]) + (f" (+{len(self.unknown) - 3} more)" if len(self.unknown) > 3 else "")
            return f"{head} unknown: {why}"
        if not self.age_s:
            return f"{head} {self.state}: nothing waits to be replicated"
        return f"{head} {self.state}: oldest unreplicated record {self.age_s:.0f} s old ({self.worst})"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "unknown": list(self.unknown), "line": self.line()}


def evaluate(
    flow: str,
    objective: int,
    partitions: Iterable[PartitionStatus],
    pending: Mapping[tuple[str, int], int | None],
    now_ms: int,
    why_unread: str | None = None,
) -> RpoVerdict:
    """The verdict from the partitions' progress and lag (observe.status) and, for each lagging one,
    the source timestamp of its oldest unreplicated record (`pending`: NOTHING_PENDING when there is
    none, None when it has no timestamp; absent when it was not read, `why_unread` says why)."""
    worst: tuple[float, str] | None = None
    unknown: list[str] = []
    for p in partitions:
        where = f"{p.topic}[{p.partition}]"
        if p.stopped or p.lag is None:
            unknown.append(f"{where}: {'stopped' if p.stopped else 'its source end is unknown'}")
            continue
        if p.lag == 0:
            age = 0.0
        elif (p.topic, p.partition) not in pending:
            unknown.append(f"{where}: its oldest unreplicated record could not be read ({why_unread or 'not read'})")
            continue
        else:
            ts = pending[(p.topic, p.partition)]
            if ts is None:
                unknown.append(f"{where}: its oldest unreplicated record has no timestamp")
                continue
            age = 0.0 if ts == NOTHING_PENDING else max(0.0, (now_ms - ts) / 1000)
        if worst is None or age > worst[0]:
            worst = (age, where)
    if worst is not None and worst[0] > objective:
        state = MISSED
    elif unknown:
        state = UNKNOWN
    else:
        state = MET
    if worst is None:  # no partition measured (none has progress, or none could be measured)
        return RpoVerdict(flow, objective, now_ms, state, None if unknown else 0.0, None, tuple(unknown))
    age, where = worst
    return RpoVerdict(flow, objective, now_ms, state, age, where if age else None, tuple(unknown))


def oldest_pending(
    clients: FlowClients, behind: Iterable[PartitionStatus], timeout: float = 30.0
) -> dict[tuple[str, int], int | None]:
    """Per lagging partition, the source timestamp (ms) of the first committed record at or after
    its progress, read up to its source end (NOTHING_PENDING: none there; None: no timestamp).
    One small-fetch consumer; each topic's read stops at the first record of each partition."""
    by_topic: dict[str, dict[int, tuple[int | None, int]]] = {}
    for p in behind:
        by_topic.setdefault(p.topic, {})[p.partition] = (p.next if p.next >= 0 else None, p.end)
    out: dict[tuple[str, int], int | None] = {}
    if not by_topic:
        return out
    consumer = clients.consumer("source", defaults=PENDING_READ, required=READER_SETTINGS)
    reader = LogReader(clients.connection("source"), consumer)
    deadline = time.monotonic() + timeout
    try:
        for topic, parts in sorted(by_topic.items()):
            want = set(parts)
            starts, stops = {p: s for p, (s, _) in parts.items()}, {p: e for p, (_, e) in parts.items()}
            left = max(1.0, deadline - time.monotonic())
            # closed when left early: the reader unassigns its partitions
            with contextlib.closing(
                cast(Generator[Any, None, None], reader.read(topic, starts, left, stops=stops))
            ) as records:
                for m in records:
                    if m.partition() in want:
                        ts = m.timestamp()[1]
                        out[(topic, m.partition())] = ts if ts >= 0 else None
                        want.discard(m.partition())
                        if not want:
                            break
            out.update({(topic, p): NOTHING_PENDING for p in want})
    finally:
        reader.close()
        clients.release(consumer)
    return out


def measure(clients: FlowClients, partitions: Sequence[PartitionStatus], timeout: float = 30.0) -> RpoVerdict:
    """The flow's verdict now: reads the oldest unreplicated record of each lagging partition."""
    flow = clients.flow
    behind = [p for p in partitions if not p.stopped and p.lag]
    why = None
    try:
        pending = oldest_pending(clients, behind, timeout)
    except MirrorflowError as exc:
        pending, why = {}, str(exc)
    return evaluate(flow.name, objective_s(flow), partitions, pending, int(time.time() * 1000), why)


def notify_due(last: Mapping[str, Any] | None, verdict: RpoVerdict) -> bool:
    """Whether a notifier is told of `verdict`: the objective is missed and the last told verdict
    was not a miss, or it is met again after a told miss (an unknown verdict tells nothing)."""
    was_missed = bool(last and last.get("state") == MISSED)
    return verdict.missed != was_missed and verdict.state != UNKNOWN


def last_alert(clients: FlowClients) -> dict[str, Any] | None:
    from mirrorflow.state.flow_state import read_control

    return read_control(clients, ALERT)


def record_alert(clients: FlowClients, verdict: RpoVerdict, by: str) -> None:
    """Remember (on the target) that a notifier was told `verdict`."""
    from mirrorflow.state.flow_state import write_control

    write_control(clients, ALERT, {"state": verdict.state, "at": verdict.at_ms, "line": verdict.line(), "by": by})
