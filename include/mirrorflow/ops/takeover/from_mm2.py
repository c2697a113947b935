"""Taking a flow over from MirrorMaker 2: every partition continues exactly where MM2 stopped.

MM2 keeps, per source partition, the upstream offset of the last record it replicated in its
Connect offsets topic on the target (key `[connector, {"cluster", "topic", "partition"}]`, value
`{"offset": N}`); a restarted MM2 task seeks to N + 1. Which topic and connector name depends on the
deployment (mm2.connect_offsets: dedicated mode, a Kafka Connect cluster, Strimzi); the takeover
uses the named connector or the only one with offsets for the source, never a guess between several.
A takeover writes mirrorflow's progress at that point, so the next run copies from N + 1 into the
same remote topics (the same replication policy names them).

MM2 at-least-once flushes its offsets every few seconds, so the target may already hold copies of
records after N. Nothing is guessed: the takeover finds MM2's copy of source record N among the
last records of the remote partition (same key, value, headers and timestamp; see _is_copy) and
checks that the records after it are copies of the source records after N, in order; progress
starts after the last of them. A partition whose target content cannot be explained that way is refused with the
reason (the operator decides), and MM2 must be stopped first: no heartbeat of its herder for this
flow in the target's `heartbeats` for 30 s (an MM2 with emit.heartbeats.enabled=false cannot be
checked: stopping it is then the operator's word). Group offsets need nothing: MM2's checkpoints
(`<source>.checkpoints.internal`) are read by mirrorflow's checkpoint step as its own, so a group's
checkpoint never moves backwards.
Translation is exact from the takeover point on; offsets MM2 copied translate through MM2's
checkpoints as before.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.errors import MirrorflowError, StateError
from mirrorflow.kafka.log_reader import read_partition
from mirrorflow.kafka.topic_admin import list_offsets, topic_ids
from mirrorflow.mm2.connect_offsets import STRIMZI_OFFSETS_TOPIC, decode_source_offset, dedicated_offsets_topic
from mirrorflow.mm2.formats import FormatError, Heartbeat
from mirrorflow.ops.takeover.inputs import QUIET_S, TAKEOVER
from mirrorflow.params import checked
from mirrorflow.replication.plan.planner import source_offsets, source_partitions
from mirrorflow.reporting import Report
from mirrorflow.state.flow_state import write_control
from mirrorflow.state.history import record_operation
from mirrorflow.state.lease import local_owner, whoami
from mirrorflow.state.names import offset_map_topic, progress_topic
from mirrorflow.state.offset_map import MapEntry
from mirrorflow.state.records import Progress
from mirrorflow.state.run_lease import take_lease
from mirrorflow.state.state_topics import ensure_state_topics
from mirrorflow.state.state_writer import StateWriter, write_partition_state
from mirrorflow.state.store import StateStore

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
class TakeoverReport(Report):
    flow: str
    offsets_topic: str
    dry_run: bool
    partitions: list[TakeoverPartition]
    connector: str | None = None  # whose offsets were continued (None: no MM2 offsets for this source)

    DERIVED = ("taken_over",)

    @property
    def taken_over(self) -> int:
        return sum(p.action == "take-over" for p in self.partitions)

    def lines(self) -> list[str]:
        n = self.taken_over
        head = "would take over" if self.dry_run else "took over"
        whose = f"connector {self.connector!r} in {self.offsets_topic}" if self.connector else self.offsets_topic
        out = [f"flow {self.flow}: {head} {n} partition(s) from MirrorMaker 2 ({whose})"]
        out += [f"  {p.line()}" for p in self.partitions]
        return out


def read_mm2_offsets(clients: FlowClients, topic: str) -> dict[tuple[str, str], dict[tuple[str, int], int]]:
    """Every MirrorSourceConnector offset in Connect's offsets topic `topic` on the target, by
    (connector name, source alias): the last stored upstream offset per source partition."""
    if not clients.partitions("target", topic, refresh=True):
        raise TakeoverError(
            f"MirrorMaker 2's offsets topic {topic!r} does not exist on cluster {clients.flow.target!r}: "
            "name it with --mm2-offsets-topic (the Connect worker's offset.storage.topic: "
            f"mm2-offsets.<source>.internal in dedicated mode, {STRIMZI_OFFSETS_TOPIC} with Strimzi)"
            + _offsets_topics_hint(clients)
        )
    reader = clients.reader("target")
    out: dict[tuple[str, str], dict[tuple[str, int], int]] = {}
    try:
        n = clients.partitions("target", topic)
        for m in reader.read(topic, range(n), timeout=clients.admin_timeout):
            e = decode_source_offset(m.key(), m.value())
            if e is None:
                continue
            stored = out.setdefault((e.connector, e.cluster), {})
            if e.offset is None:
                stored.pop((e.topic, e.partition), None)  # a tombstone: Connect forgot the partition
            else:
                stored[(e.topic, e.partition)] = e.offset
    finally:
        clients.release(reader.consumer)
    return out


def _offsets_topics_hint(clients: FlowClients) -> str:
    try:
        names = clients.admin("target").list_topics(timeout=clients.admin_timeout).topics
    except Exception:  # only a hint: the error above stands on its own
        return ""
    found = sorted(
        t for t in names if t != "__consumer_offsets" and ("offsets" in t and not t.startswith("mm2-offset-syncs"))
    )
    return f"; offsets topics there: {', '.join(found)}" if found else ""


def _connectors(found: dict[tuple[str, str], dict[tuple[str, int], int]]) -> str:
    if not found:
        return "none"
    return ", ".join(
        f"{name!r} (source alias {alias!r}, {len(parts)} partition(s))"
        for (name, alias), parts in sorted(found.items())
    )


def choose_connector(
    found: dict[tuple[str, str], dict[tuple[str, int], int]], topic: str, mm2_source: str, connector: str | None
) -> str | None:
    """The connector whose offsets the takeover continues from: the named one, else the only
    MirrorSourceConnector with offsets for `mm2_source` (None: none has any). Never a guess
    between several: TakeoverError lists what the offsets topic holds."""
    if connector is not None:
        if (connector, mm2_source) in found:
            return connector
        raise TakeoverError(
            f"connector {connector!r} stored no offsets for source alias {mm2_source!r} in {topic!r}; "
            f"MirrorSourceConnector offsets found there: {_connectors(found)} (name one with --mm2-connector, "
            "the source alias with --mm2-source)"
        )
    names = sorted(name for name, alias in found if alias == mm2_source)
    if len(names) > 1:
        raise TakeoverError(
            f"{len(names)} connectors stored offsets for source alias {mm2_source!r} in {topic!r}: "
            f"{_connectors({k: v for k, v in found.items() if k[1] == mm2_source})}; name the one that "
            "replicated this flow with --mm2-connector"
        )
    return names[0] if names else None


def mm2_offsets(
    clients: FlowClients, topic: str, mm2_source: str, connector: str | None = None
) -> dict[tuple[str, int], int]:
    """MM2's stored upstream offset per source partition (the last record it replicated), from
    `connector` (default: the only MirrorSourceConnector with offsets for `mm2_source`)."""
    found = read_mm2_offsets(clients, topic)
    name = choose_connector(found, topic, mm2_source, connector)
    return found.get((name, mm2_source), {}) if name is not None else {}


def mm2_last_heartbeat(clients: FlowClients, mm2_source: str) -> int | None:
    """When MM2's herder for this flow last wrote its heartbeat into the target's `heartbeats`
    (ms; None: no heartbeat from it). Only the source alias is compared: a Connect or Strimzi
    deployment may call the target by another name than the flow does. A running MM2 writes one
    every second by default; its Connect worker group cannot tell (librdkafka neither lists nor
    describes Connect groups)."""
    if not clients.partitions("target", "heartbeats", refresh=True):
        return None
    last = None
    for r in read_partition(clients.connection("target"), "heartbeats", last=2000, timeout=clients.admin_timeout):
        try:
            hb = Heartbeat.decode(r.key, r.value)
        except FormatError:
            continue
        if hb.source == mm2_source:  # any target alias: this is the target's own `heartbeats`
            last = max(last or 0, hb.timestamp)
    return last


def _content(m: Any) -> tuple:
    return (m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1])


def _is_copy(target: tuple, source: tuple) -> bool:
    """Whether a target record is MM2's copy of a source record: the same key, value, timestamp and
    headers, a header's value either as is or Base64 text. A Connect worker whose header.converter
    is not ByteArrayConverter (the DR guide's sets only the key and value converters) writes the
    header bytes MM2 hands it through SimpleHeaderConverter, which turns bytes into Base64."""
    if target == source:
        return True
    (key, value, headers, ts), (skey, svalue, sheaders, sts) = target, source
    if (key, value, ts, len(headers)) != (skey, svalue, sts, len(sheaders)):
        return False
    return all(
        k == sk and (v == sv or (v is not None and sv is not None and v == base64.b64encode(sv)))
        for (k, v), (sk, sv) in zip(headers, sheaders, strict=True)
    )


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
        at = [i for i, (_, c) in enumerate(tail) if _is_copy(c, rec[0])]
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
        if len(nxt) < len(after) or not all(_is_copy(c, s) for (_, c), s in zip(after, nxt, strict=False)):
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
    clients: FlowClients, offsets_topic: str, mm2_source: str, quiet_s: float = QUIET_S, connector: str | None = None
) -> tuple[str | None, list[TakeoverPartition]]:
    """The connector whose offsets apply (see choose_connector) and what happens to each partition."""
    flow = clients.flow
    beat = mm2_last_heartbeat(clients, mm2_source)
    if beat is not None and time.time() * 1000 - beat < quiet_s * 1000:
        raise TakeoverError(
            f"MirrorMaker 2 still runs: its last heartbeat from {mm2_source!r} reached 'heartbeats' on "
            f"cluster {flow.target!r} {(time.time() * 1000 - beat) / 1000:.0f} s ago (less than {quiet_s:g} s); "
            "stop MM2 first (two replicators on one flow copy records twice)"
        )
    found = read_mm2_offsets(clients, offsets_topic)
    name = choose_connector(found, offsets_topic, mm2_source, connector)
    stored = found.get((name, mm2_source), {}) if name is not None else {}
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
                whose = f"connector {name!r}" if name else f"any connector for source alias {mm2_source!r}"
                raise TakeoverError(
                    f"{t}[{p}]: MM2 stored no offset for it ({whose} in {offsets_topic!r}) but {r!r}[{p}] on "
                    f"cluster {flow.target!r} holds {hi - lo} record(s): not explained by MM2's state; nothing "
                    f"was taken over (MirrorSourceConnector offsets there: {_connectors(found)})"
                )
            out.append(TakeoverPartition(t, p, r, -1, 0, -1, ends[(t, p)], hi, "fresh"))
            continue
        k = _after_mm2(clients, t, p, r, n, lo, hi)
        nxt = n + 1 if k == 0 else _offset_after(clients, t, p, n, k)
        out.append(TakeoverPartition(t, p, r, n, k, nxt, ends[(t, p)], hi, "take-over"))
    return name, out


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


def takeover_given(clients: FlowClients, values: Mapping[str, Any], dry_run: bool, via: str = "cli") -> TakeoverReport:
    """`takeover` with its inputs as a door handed them (ops.takeover.inputs.TAKEOVER: the CLI's flags,
    the DAG's Params), checked first: a value that breaks its rule is named as the door calls it."""
    given = checked(TAKEOVER, values, via)
    return takeover(
        clients,
        given["mm2_offsets_topic"],
        given["mm2_source"],
        dry_run=dry_run,
        quiet_s=float(given["mm2_quiet_seconds"]),
        connector=given["mm2_connector"],
    )


def takeover(
    clients: FlowClients,
    offsets_topic: str | None = None,
    mm2_source: str | None = None,
    dry_run: bool = False,
    quiet_s: float = QUIET_S,
    connector: str | None = None,
) -> TakeoverReport:
    """Take the flow over from MM2 (see the module docstring), under the flow's lease; with `dry_run`
    only report. `offsets_topic` defaults to dedicated mode's, `connector` to the only
    MirrorSourceConnector with offsets for the source there. Raises TakeoverError (nothing
    written) when any partition cannot be explained."""
    flow = clients.flow
    alias = mm2_source or flow.source
    topic = offsets_topic or dedicated_offsets_topic(alias)
    ensure_state_topics(clients)
    lease = take_lease(clients, *local_owner("mirrorflow takeover"))
    try:
        name, plan = plan_takeover(clients, topic, alias, quiet_s, connector)
        taken = [x for x in plan if x.action == "take-over"]
        if not dry_run and taken:
            _write(clients, taken)
            by = whoami()
            record = {
                "at": int(time.time() * 1000),
                "by": by,
                "partitions": len(taken),
                "mm2_offsets": topic,
                "mm2_connector": name,
            }
            write_control(clients, "takeover", record)  # the status shows it
            record_operation(
                clients,
                "takeover",
                by,
                summary=f"took over from MirrorMaker 2 (connector {name}, offsets in {topic})",
                figures={"partitions": len(taken)},
            )
        return TakeoverReport(flow.name, topic, dry_run, plan, name)
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
