"""State that no longer matches what it describes, found before a run reads or copies anything.

* **The state topics as created** (`check_state_topics`, at every run under the flow's lease,
  right after `state_topics.ensure_state_topics`): the settings the state's correctness rests on,
  read in one DescribeConfigs request for all the flow's state topics, and the partition count of
  the keyed ones (from the metadata the run has listed anyway). A progress or snapshot topic that
  is no longer compacted loses an idle partition's progress, which would then count as fresh and be
  copied again from `initial.position` (duplicates, or skips with `latest`); a finite retention on
  the offset map loses ledger entries; a lease topic without `LogAppendTime` loses the broker's
  clock; partitions added to a keyed topic (progress, offset map, snapshots: a key lives in
  partition crc32(key) % partitions) send every reader to partitions its state is not in. Any of
  these stops the run with one StateError naming each topic and setting, what it should be, what it
  is, and what to do. The single-partition topics (lease, runs, results, operations) are read and
  written at partition 0 only, so partitions added there change nothing and are not checked.
  The partition counts as created are a control record in the progress topic (`STATE_TOPICS_KEY`),
  written twice: at its key's partition, so the run's one read of its control records (the flow
  state's, in `ReplicationRun.begin`) brings it at no extra cost, and in partition 0, which exists
  whatever was added (read only when the first copy was not found: the first run, or partitions
  added). A count is compared with the CREATED one, not with `state.topic.partitions` (changing that
  setting later changes nothing, as before). A flow whose state topics predate the record adopts
  the counts it finds at its first run, after its plan.
* **An empty progress beside a non-empty remote partition** (`first_committed` reads, the planner
  judges with `unexplained_remote`): a source partition without progress whose remote partition
  holds committed records was not filled by this flow's copies (they commit records and progress
  together): its state was lost (a state topic deleted or not compacted, another `state.namespace`)
  or another replicator wrote there (MirrorMaker 2 before a `mirrorflow takeover`). Copying it from
  the initial position would write its records again, or skip some: the partition stops, named.
  A takeover, a failback's seeds and a re-seed write the progress of the partitions they fill, and
  an aborted copy or a fencing abort leaves no committed record, so none of them trips it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, OffsetSpec, ResourceType

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.errors import ClusterError, StateError
from mirrorflow.kafka.connection import kafka_error
from mirrorflow.kafka.retry import retry_call, transient_error
from mirrorflow.kafka.topic_admin import list_offsets
from mirrorflow.state.flow_state import control_key
from mirrorflow.state.kept_apart import kept_on_target
from mirrorflow.state.names import STATE_READER, offset_map_topic, progress_topic, reader_group, snapshot_topic
from mirrorflow.state.records import Progress
from mirrorflow.state.state_topics import state_topic_configs
from mirrorflow.state.state_writer import write_acknowledged
from mirrorflow.state.task_slots import key_partition

Key = tuple[str, int]
# the record of the keyed state topics' partition counts as created, a control record (progress readers
# skip its key) written twice: at its key's partition, where the run's read of the control records finds
# it, and in partition 0 of the progress topic, which exists whatever was added
STATE_TOPICS_CONTROL = "state-topics"
STATE_TOPICS_KEY = control_key(STATE_TOPICS_CONTROL)
STATE_TOPICS_PARTITION = 0
FORMAT_VERSION = 1
EXACT = ("cleanup.policy", "message.timestamp.type")  # as created, exactly
AT_LEAST = ("retention.ms", "retention.bytes")  # as created or longer (-1: forever)


def keyed_topics(flow: FlowConfig) -> tuple[str, ...]:
    """The state topics whose records are placed by key (crc32(key) % partitions)."""
    return progress_topic(flow), offset_map_topic(flow), snapshot_topic(flow)


@dataclass(frozen=True)
class Drift:
    """One setting of one state topic that is not as the flow created it."""

    topic: str
    setting: str  # a topic config name, or "partitions"
    expected: str
    actual: str

    def line(self, flow: FlowConfig) -> str:
        if self.setting == "partitions":
            return (
                f"state topic {self.topic!r} has {self.actual} partitions, it was created with {self.expected}: "
                "partitions were added, so its keys now hash to partitions that do not hold their state. Kafka "
                f"cannot remove partitions: put the records of its first {self.expected} partitions back into a "
                f"topic of that name with {self.expected} partitions (docs/state.md, 'State topics are checked at "
                "every run')"
            )
        wanted = f"{self.expected} or longer (-1: forever)" if self.setting in AT_LEAST else self.expected
        return (
            f"state topic {self.topic!r} has {self.setting}={self.actual}, it must be {wanted} as the flow created "
            f"it: set it back (kafka-configs.sh --bootstrap-server <{flow.target}> --alter --entity-type topics "
            f"--entity-name {self.topic} --add-config {self.setting}={self.expected}) and keep it out of any topic "
            "policy that changed it"
        )


def _policies(value: str | None) -> set[str]:
    return {v.strip() for v in (value or "").split(",") if v.strip()}


def _longer_or_equal(actual: str | None, expected: str) -> bool:
    try:
        a, e = int(actual if actual is not None else "-1"), int(expected)
    except ValueError:
        return False
    return a < 0 or (0 <= e <= a)


def config_drift(topic: str, created: Mapping[str, str], actual: Mapping[str, str | None]) -> list[Drift]:
    """What of the settings `topic` was created with (`created`, state_topics.state_topic_configs)
    that its correctness rests on differs in `actual` (its configs now). Pure."""
    out = []
    compact_only = _policies(created.get("cleanup.policy")) == {"compact"}
    for name in (*EXACT, *AT_LEAST):
        if name not in created:
            continue
        want, have = created[name], actual.get(name)
        if name == "cleanup.policy":
            same = _policies(have) == _policies(want)
        elif name in AT_LEAST:  # retention matters only where the policy deletes
            same = compact_only or _longer_or_equal(have, want)
        else:
            same = have == want
        if not same:
            out.append(Drift(topic, name, want, "(none)" if have is None else str(have)))
    return out


def partition_drift(recorded: Mapping[str, int], actual: Mapping[str, int]) -> list[Drift]:
    """Keyed state topics whose partition count is not the one recorded when they were created. Pure."""
    return [
        Drift(t, "partitions", str(n), str(actual[t]))
        for t, n in sorted(recorded.items())
        if t in actual and actual[t] and actual[t] != n
    ]


def drift_error(flow: FlowConfig, drifts: Sequence[Drift]) -> StateError:
    """The one error of a run stopped by state topics that drifted: every drift, and what to do."""
    lines = "\n".join(f"  - {d.line(flow)}" for d in drifts)
    return StateError(
        f"flow {flow.name}: {len(drifts)} setting(s) of its state topics on cluster {flow.target!r} are not as "
        f"created; the run stops before reading any state (nothing was read or written):\n{lines}\n"
        "Then run the flow again. A progress topic that was not compacted for a while may have lost the "
        "progress of idle partitions: the run stops each of those, naming it, instead of copying it again."
    )


def describe_state_configs(clients: FlowClients, topics: Iterable[str]) -> dict[str, dict[str, str | None]]:
    """The current configs of `topics` on the target, in one DescribeConfigs request (retried
    through a broker restart up to broker.outage.max.seconds)."""
    names = sorted(set(topics))
    if not names:
        return {}
    admin, conn, timeout = clients.admin("target"), clients.connection("target"), clients.step_timeout

    def describe() -> dict[str, dict[str, str | None]]:
        futures = admin.describe_configs(
            [ConfigResource(ResourceType.TOPIC, t) for t in names], request_timeout=timeout
        )
        out: dict[str, dict[str, str | None]] = {}
        for res, fut in futures.items():
            try:
                out[res.name] = {k: e.value for k, e in fut.result(timeout).items()}
            except KafkaException as exc:
                err = kafka_error(exc)
                if transient_error(err):
                    raise
                raise ClusterError(
                    conn.alias, f"cannot describe the configs of state topic {res.name!r}: {err.str() if err else exc}"
                ) from None
        return out

    return retry_call(
        describe, conn.alias, f"describing the configs of {len(names)} state topics", clients.outage_timeout
    )


def _parse_record(flow: FlowConfig, d: Mapping[str, Any]) -> dict[str, int]:
    try:
        if int(d.get("v", 1)) > FORMAT_VERSION:
            raise StateError(
                f"flow {flow.name}: the record of its state topics was written by a newer mirrorflow "
                f"(format {d['v']}); upgrade mirrorflow"
            )
        return {str(t): int(n) for t, n in d["partitions"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StateError(f"flow {flow.name}: unreadable record of its state topics: {exc}") from None


def read_recorded_partitions(
    clients: FlowClients, controls: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, int] | None:
    """The keyed state topics' partition counts as created (None: never recorded). `controls`: the
    control records the run read already (flow_state.read_controls with STATE_TOPICS_CONTROL among
    the names): the record's copy at its control key's partition, found there unless partitions
    were added; otherwise its copy in partition 0 is read."""
    flow = clients.flow
    if controls is not None and controls.get(STATE_TOPICS_CONTROL) is not None:
        return _parse_record(flow, controls[STATE_TOPICS_CONTROL])
    topic = progress_topic(flow)
    if not clients.partitions("target", topic):
        return None
    # read_uncommitted, as the control records: an open copy transaction must not hold this read back
    reader = clients.reader("target", group=reader_group(flow, STATE_READER), committed=False)
    value: bytes | None = None
    try:
        for m in reader.read(topic, [STATE_TOPICS_PARTITION], timeout=60, keys={STATE_TOPICS_KEY}):
            value = m.value()
    finally:
        clients.release(reader.consumer)
    if value is None:
        return None
    try:
        d = json.loads(value)
    except ValueError as exc:
        raise StateError(f"flow {flow.name}: unreadable record of its state topics: {exc}") from None
    return _parse_record(flow, d)


def record_partitions(clients: FlowClients, counts: Mapping[str, int]) -> None:
    """Record the keyed state topics' partition counts as created (idempotent, acknowledged): in
    partition 0 of the progress topic and at the control key's own partition (where the run's read
    of the control records finds it)."""
    topic = progress_topic(clients.flow)
    value = json.dumps({"v": FORMAT_VERSION, "partitions": dict(sorted(counts.items()))}, separators=(",", ":"))
    record = (STATE_TOPICS_KEY, value.encode(), int(time.time() * 1000))
    at_key = key_partition(STATE_TOPICS_KEY, clients.partitions("target", topic))
    for partition in sorted({STATE_TOPICS_PARTITION, at_key}):
        write_acknowledged(
            clients, topic, [record], partition, f"recording the state topics of flow {clients.flow.name}"
        )


@dataclass(frozen=True)
class StateTopicsCheck:
    """What `check_state_topics` found: the counts recorded, and those to record."""

    recorded: Mapping[str, int]  # keyed topic -> partitions as created, as recorded
    unrecorded: Mapping[str, int]  # keyed topic -> partitions now, for the topics the record lacks

    def record(self, clients: FlowClients) -> None:
        """Record the counts of the topics the record lacked (after the run's plan: a flow whose
        progress topic holds a record counts as having run before, state.fencing.ensure_layout)."""
        if self.unrecorded:
            record_partitions(clients, {**self.recorded, **self.unrecorded})


def check_state_topics(
    clients: FlowClients, controls: Mapping[str, Mapping[str, Any]] | None = None
) -> StateTopicsCheck:
    """Check the flow's state topics as created (module docstring): StateError naming every drift.
    One DescribeConfigs request and the partition counts from the run's metadata; the record of
    the counts from `controls` (the control records the run read already, see
    `read_recorded_partitions`), else read."""
    flow = clients.flow
    created = state_topic_configs(flow)
    counts = {t: clients.partitions("target", t) for t in created}
    present = [t for t, n in counts.items() if n]
    configs = describe_state_configs(clients, present)
    drifts = [d for t in present for d in config_drift(t, created[t], configs.get(t, {}))]
    keyed = {t: counts[t] for t in keyed_topics(flow) if counts.get(t)}
    recorded = read_recorded_partitions(clients, controls) or {}
    drifts += partition_drift(recorded, keyed)
    if drifts:
        raise drift_error(flow, drifts)
    return StateTopicsCheck(recorded, {t: n for t, n in keyed.items() if t not in recorded})


# -- an empty progress beside a non-empty remote partition ---------------------------------------------
def first_committed(clients: FlowClients, remotes: Sequence[Key]) -> dict[Key, int]:
    """The offset of the first committed record of each remote partition of `remotes` that holds
    one (partitions without a committed record are left out). Two batched ListOffsets requests;
    only a partition whose log start is below its last stable offset is read, read_committed up to
    that offset (an open transaction never holds the read back) and only to its first record."""
    remotes = sorted(set(remotes))
    if not remotes:
        return {}
    admin, conn, bound = clients.admin("target"), clients.connection("target"), clients.outage_timeout
    starts = list_offsets(admin, conn, remotes, OffsetSpec.earliest(), committed=False, timeout=bound)
    stable = list_offsets(admin, conn, remotes, OffsetSpec.latest(), committed=True, timeout=bound)
    todo: dict[str, dict[int, tuple[int, int]]] = {}
    for t, p in remotes:
        if starts[(t, p)] < stable[(t, p)]:
            todo.setdefault(t, {})[p] = (starts[(t, p)], stable[(t, p)])
    found: dict[Key, int] = {}
    for topic, spans in todo.items():
        reader = clients.reader("target")
        try:
            starts_at = {p: lo for p, (lo, _) in spans.items()}
            stops = {p: hi for p, (_, hi) in spans.items()}
            for m in reader.read(topic, starts_at, timeout=bound, stops=stops):
                found.setdefault((topic, m.partition()), m.offset())
                if all((topic, p) in found for p in spans):
                    break
        finally:
            clients.release(reader.consumer)
    return found


def only_kept(clients: FlowClients, firsts: Mapping[Key, int]) -> set[Key]:
    """The remote partitions of `firsts` (first_committed) that hold only records a failback kept apart
    on this flow's target (state.kept_apart): the first committed record inside a kept range, none at or
    after the end of the last one (the last stable offset there). A partition or topic the failed-over
    flow's source had and its target did not, which the target (this flow's source) gets after the
    failback: this flow copies it from its beginning, after them."""
    kept = kept_on_target(clients) if firsts else {}
    inside = [k for k, first in firsts.items() if any(a <= first < b for a, b in kept.get(k, ()))]
    if not inside:
        return set()
    admin, conn = clients.admin("target"), clients.connection("target")
    stable = list_offsets(admin, conn, inside, OffsetSpec.latest(), committed=True, timeout=clients.outage_timeout)
    return {k for k in inside if stable[k] <= kept[k][-1][1]}


def unexplained_remote(
    topic: str, partition: int, target_topic: str, progress: Progress | None, first: int
) -> str | None:
    """Why a source partition without progress must not be copied: its remote partition holds a
    committed record (`first`: its offset, -1: none or not asked) that no copy of this flow wrote
    (copies commit records and progress together). None: it may be copied. Pure: what
    planner.identity_problem asks of a partition without progress (the planner's stopped message
    adds the re-seed that copies it again on purpose)."""
    if (progress is not None and progress.next >= 0) or first < 0:
        return None
    return (
        f"target partition {target_topic}[{partition}] holds records (the first committed one at offset {first}) "
        f"but the flow has no progress for source partition {topic}[{partition}]: its state was lost (a state "
        "topic deleted or not compacted, another state.namespace) or another replicator wrote there (MirrorMaker 2: "
        "`mirrorflow takeover` continues where it stopped); copying it from initial.position would write its "
        "records again or skip some"
    )


def fresh_remotes(
    partitions: Iterable[tuple[str, int, str]], progress: Mapping[Key, Any], target_partitions: Mapping[str, int]
) -> list[Key]:
    """The remote partitions `first_committed` must look at: those of source partitions without
    progress whose remote partition exists (a run over partitions that all have progress reads
    nothing). Pure."""
    return [
        (remote, p)
        for t, p, remote in partitions
        if ((t, p) not in progress or progress[(t, p)].next < 0) and p < target_partitions.get(remote, 0)
    ]
