"""Taking a flow over from MirrorMaker 2: every partition continues exactly where MM2 stopped.

MM2 (dedicated mode) keeps, per source partition, the upstream offset of the last record it
replicated in its Connect offsets topic on the target (`mm2-offsets.<source>.internal`, key
`["MirrorSourceConnector", {"cluster", "topic", "partition"}]`, value `{"offset": N}`); a restarted
MM2 task seeks to N + 1. A takeover writes mirrorflow's progress at that point, so the next run
copies from N + 1 into the same remote topics (the same replication policy names them).

MM2 at-least-once flushes its offsets every few seconds, so the target may already hold copies of
records after N. Nothing is guessed: the takeover finds MM2's copy of source record N among the
last records of the remote partition (same key, value, headers and timestamp) and checks that the
records after it are copies of the source records after N, in order; progress starts after the
last of them. A partition whose target content cannot be explained that way is refused with the
reason (the operator decides), and MM2 must be stopped first: no heartbeat of its herder for this
flow in the target's `heartbeats` for 30 s (an MM2 with emit.heartbeats.enabled=false cannot be
checked: stopping it is then the operator's word). Group offsets need nothing: MM2's checkpoints
(`<source>.checkpoints.internal`) are read by mirrorflow's checkpoint step as its own, so a group's
checkpoint never moves backwards.
Translation is exact from the takeover point on; offsets MM2 copied translate through MM2's
checkpoints as before.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.errors import MirrorflowError, StateError
from mirrorflow.kafka.log_reader import read_partition
from mirrorflow.kafka.topics import list_offsets, topic_ids
from mirrorflow.mm2.formats import FormatError, Heartbeat
from mirrorflow.replication.planner import source_offsets, source_partitions
from mirrorflow.replication.reseed import write_partition_state
from mirrorflow.state.flow_state import write_control
from mirrorflow.state.lease import FlowLease, local_owner, whoami
from mirrorflow.state.offset_map import MapEntry
from mirrorflow.state.records import Progress
from mirrorflow.state.store import StateStore
from mirrorflow.state.topics import ensure_state_topics, offset_map_topic, progress_topic
from mirrorflow.state.writer import StateWriter

QUIET_S = 30.0  # no heartbeat from MM2 for this long: it is stopped (it beats every second by default)
TAIL_WINDOW = 10_000  # how far back in a remote partition MM2's copy of its last record is looked for


class TakeoverError(StateError):
    """A takeover that would copy a record twice or skip one: nothing was written."""


@dataclass(frozen=True)
class TakeoverPartition:
    topic: str
    partition: int
    target_topic: str
    mm2_offset: int  # MM2's stored offset (last record it replicated); -1: none stored
    already_copied: int  # records after it that MM2 had copied without storing its offset
    next: int  # where mirrorflow's first run continues
    source_end: int
    target_end: int
    action: str  # take-over | fresh (MM2 never copied it: the initial position applies) | skip (progress exists)

    def line(self) -> str:
        if self.action == "fresh":
            return f"{self.topic}[{self.partition}]: MM2 never copied it; the flow's initial.position applies"
        if self.action == "skip":
            return f"{self.topic}[{self.partition}]: mirrorflow already has progress (next {self.next}); left alone"
        extra = f" (+{self.already_copied} copied after MM2's last stored offset)" if self.already_copied else ""
        return (
            f"{self.topic}[{self.partition}] -> {self.target_topic}[{self.partition}]: MM2 stopped at "
            f"{self.mm2_offset}{extra}; mirrorflow continues at {self.next} "
            f"({max(0, self.source_end - self.next):,} offsets to copy), target end {self.target_end}"
        )


@dataclass
class TakeoverReport:
    flow: str
    offsets_topic: str
    dry_run: bool
    partitions: list[TakeoverPartition]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "taken_over": sum(p.action == "take-over" for p in self.partitions)}

    def lines(self) -> list[str]:
        n = sum(p.action == "take-over" for p in self.partitions)
        head = "would take over" if self.dry_run else "took over"
        out = [f"flow {self.flow}: {head} {n} partition(s) from MirrorMaker 2 ({self.offsets_topic})"]
        out += [f"  {p.line()}" for p in self.partitions]
        return out


def mm2_offsets(clients: FlowClients, topic: str, mm2_source: str) -> dict[tuple[str, int], int]:
    """MM2's stored upstream offset per source partition (the last record it replicated)."""
    if not clients.partitions("target", topic, refresh=True):
        raise TakeoverError(
            f"MirrorMaker 2's offsets topic {topic!r} does not exist on cluster {clients.flow.target!r}: "
            "name it with --mm2-offsets-topic (MM2's offset.storage.topic of the target cluster)"
        )
    reader = clients.reader("target")
    out: dict[tuple[str, int], int] = {}
    try:
        n = clients.partitions("target", topic)
        for m in reader.read(topic, range(n), timeout=clients.admin_timeout):
            try:
                connector, part = json.loads(m.key() or b"null")
            except (TypeError, ValueError):
                continue
            if connector != "MirrorSourceConnector" or not isinstance(part, dict) or part.get("cluster") != mm2_source:
                continue
            key = (str(part["topic"]), int(part["partition"]))
            value = json.loads(m.value()) if m.value() else None
            if value is None:
                out.pop(key, None)  # a tombstone: Connect forgot the partition
            else:
                out[key] = int(value["offset"])
    finally:
        clients.release(reader.consumer)
    return out


def mm2_last_heartbeat(clients: FlowClients, mm2_source: str) -> int | None:
    """When MM2's herder for this flow last wrote its heartbeat into the target's `heartbeats`
    (ms; None: no heartbeat from it). A running MM2 writes one every second by default; its Connect
    worker group cannot tell (librdkafka neither lists nor describes Connect groups)."""
    if not clients.partitions("target", "heartbeats", refresh=True):
        return None
    last = None
    for r in read_partition(clients.connection("target"), "heartbeats", last=2000, timeout=clients.admin_timeout):
        try:
            hb = Heartbeat.decode(r.key, r.value)
        except FormatError:
            continue
        if hb.source == mm2_source and hb.target == clients.flow.target:
            last = max(last or 0, hb.timestamp)
    return last


def _content(m: Any) -> tuple:
    return (m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1])


def _after_mm2(clients: FlowClients, topic: str, p: int, remote: str, n: int, tgt_lo: int, tgt_hi: int) -> int:
    """How many records after source offset `n` MM2 had already copied into `remote` (see the module
    docstring); TakeoverError when the target's tail is not explained by the source."""
    where = f"{topic}[{p}]"
    src = clients.reader("source")
    tgt = clients.reader("target")
    try:
        rec = [_content(m) for m in src.read(topic, {p: n}, stops={p: n + 1}, timeout=clients.admin_timeout)]
        if not rec:
            raise TakeoverError(
                f"{where}: source record {n} (MM2's last stored offset) is gone (retention or compaction), so "
                "where MM2 stopped on the target cannot be confirmed; take this topic over with "
                "`mirrorflow reseed` instead, or resume MM2 until it has copied newer records"
            )
        tail = [(m.offset(), _content(m)) for m in tgt.read(remote, {p: max(tgt_lo, tgt_hi - TAIL_WINDOW)})]
        at = [i for i, (_, c) in enumerate(tail) if c == rec[0]]
        if not at:
            raise TakeoverError(
                f"{where}: MM2's copy of source record {n} is not among the last {TAIL_WINDOW:,} records of "
                f"{remote!r}[{p}] on cluster {clients.flow.target!r}: the target does not match what MM2 "
                "recorded (another writer, a recreated topic?); nothing was taken over"
            )
        after = tail[at[-1] + 1 :]
        if not after:
            return 0
        nxt = [_content(m) for m in src.read(topic, {p: n + 1}, timeout=clients.admin_timeout)][: len(after)]
        if [c for _, c in after] != nxt:
            raise TakeoverError(
                f"{where}: the {len(after)} record(s) after MM2's copy of source record {n} on {remote!r}[{p}] "
                "are not the source's next records in order: the target holds records the takeover cannot "
                "explain; nothing was taken over"
            )
        return len(after)
    finally:
        clients.release(src.consumer)
        clients.release(tgt.consumer)


def plan_takeover(
    clients: FlowClients, offsets_topic: str, mm2_source: str, quiet_s: float = QUIET_S
) -> list[TakeoverPartition]:
    flow = clients.flow
    beat = mm2_last_heartbeat(clients, mm2_source)
    if beat is not None and time.time() * 1000 - beat < quiet_s * 1000:
        raise TakeoverError(
            f"MirrorMaker 2 still runs: its last heartbeat ({mm2_source}->{flow.target}) reached 'heartbeats' on "
            f"cluster {flow.target!r} {(time.time() * 1000 - beat) / 1000:.0f} s ago (less than {quiet_s:g} s); "
            "stop MM2 first (two replicators on one flow copy records twice)"
        )
    stored = mm2_offsets(clients, offsets_topic, mm2_source)
    parts = source_partitions(flow, clients.admin("source"))
    keys = [(t, p) for t, p, _ in parts]
    ends = source_offsets(clients, keys, OffsetSpec.latest()) if keys else {}
    remotes = [(r, p) for _, p, r in parts]
    conn, admin = clients.connection("target"), clients.admin("target")
    missing = sorted({r for r, _ in remotes if clients.partitions("target", r) == 0})
    if missing:
        raise TakeoverError(
            f"remote topic(s) {', '.join(missing)} missing on cluster {flow.target!r}: run `mirrorflow sync` first"
        )
    his = list_offsets(admin, conn, remotes, OffsetSpec.latest(), committed=False) if remotes else {}
    los = list_offsets(admin, conn, remotes, OffsetSpec.earliest(), committed=False) if remotes else {}
    progress = StateStore(clients).progress(keys)
    out = []
    for t, p, r in parts:
        hi, lo = his[(r, p)], los[(r, p)]
        old = progress.get((t, p))
        if old is not None and old.next >= 0:
            out.append(TakeoverPartition(t, p, r, stored.get((t, p), -1), 0, old.next, ends[(t, p)], hi, "skip"))
            continue
        n = stored.get((t, p), -1)
        if n < 0:
            if hi > lo:
                raise TakeoverError(
                    f"{t}[{p}]: MM2 stored no offset for it but {r!r}[{p}] on cluster {flow.target!r} holds "
                    f"{hi - lo} record(s): not explained by MM2's state; nothing was taken over"
                )
            out.append(TakeoverPartition(t, p, r, -1, 0, -1, ends[(t, p)], hi, "fresh"))
            continue
        k = _after_mm2(clients, t, p, r, n, lo, hi)
        nxt = n + 1 if k == 0 else _offset_after(clients, t, p, n, k)
        out.append(TakeoverPartition(t, p, r, n, k, nxt, ends[(t, p)], hi, "take-over"))
    return out


def _offset_after(clients: FlowClients, topic: str, p: int, n: int, k: int) -> int:
    """The source offset right after the k-th record following offset n (offsets may have holes)."""
    src = clients.reader("source")
    try:
        last = n
        for i, m in enumerate(src.read(topic, {p: n + 1}, timeout=clients.admin_timeout)):
            last = m.offset()
            if i + 1 == k:
                break
        return last + 1
    finally:
        clients.release(src.consumer)


def takeover(
    clients: FlowClients,
    offsets_topic: str | None = None,
    mm2_source: str | None = None,
    dry_run: bool = False,
    quiet_s: float = QUIET_S,
) -> TakeoverReport:
    """Take the flow over from MM2 (see the module docstring), under the flow's lease; with `dry_run`
    only report. Raises TakeoverError (nothing written) when any partition cannot be explained."""
    flow = clients.flow
    alias = mm2_source or flow.source
    topic = offsets_topic or f"mm2-offsets.{alias}.internal"
    ensure_state_topics(clients)
    lease = FlowLease(clients, *local_owner("mirrorflow takeover")).acquire()
    try:
        plan = plan_takeover(clients, topic, alias, quiet_s)
        taken = [x for x in plan if x.action == "take-over"]
        if not dry_run and taken:
            _write(clients, taken)
            record = {"at": int(time.time() * 1000), "by": whoami(), "partitions": len(taken), "mm2_offsets": topic}
            write_control(clients, "takeover", record)  # the status shows it
        return TakeoverReport(flow.name, topic, dry_run, plan)
    finally:
        lease.release()


def _write(clients: FlowClients, plan: list[TakeoverPartition]) -> None:
    flow = clients.flow
    if not plan:
        return
    writer = StateWriter(
        flow, clients.partitions("target", progress_topic(flow)), clients.partitions("target", offset_map_topic(flow))
    )
    src_ids = topic_ids(clients.admin("source"), clients.connection("source"), {x.topic for x in plan})
    tgt_ids = topic_ids(clients.admin("target"), clients.connection("target"), {x.target_topic for x in plan})
    starts = source_offsets(clients, [(x.topic, x.partition) for x in plan], OffsetSpec.earliest())
    now = int(time.time() * 1000)
    for x in plan:
        start = min(starts[(x.topic, x.partition)], x.next)
        progress = Progress(
            x.topic,
            x.partition,
            x.next,
            ((start, x.next),) if start < x.next else (),  # MM2 copied these: backfill leaves them alone
            x.target_end,
            updated=now,
            topic_id=src_ids.get(x.topic, ""),
            target_topic=x.target_topic,
            target_topic_id=tgt_ids.get(x.target_topic, ""),
            epoch=1,
        )
        # the map starts at the takeover point: source offset `next` is the target's end now
        marker = MapEntry(x.topic, x.partition, x.next, x.next, (), x.target_end, 0, 1)
        try:
            write_partition_state(clients, writer, progress, marker)
        except MirrorflowError as exc:
            raise TakeoverError(f"taking over {x.topic}[{x.partition}] failed: {exc}") from None
