"""Where a committed source group offset resumes on the target: exact translation through the offset map.

A committed offset `g` means "the next record this group reads is at offset `g` or later". The
offset map on the target (state.offset_map) says where every copied record landed; a translation
is the target offset of the first copied record at or after `g`, or, where the map forgot
(bounded by `offset.map.max.runs`) or a backfill reordered the partition, an earlier position
(`reread`), never a later one. Pure, apart from `load_maps`, which reads the map.

The same translation serves consumers outside consumer groups (Spark Structured Streaming, Flink,
any `assign()` consumer keeping its own positions): `translate_offsets` takes their positions in
Spark's `startingOffsets` JSON form, keyed by source topic, and answers the same form keyed by the
target topic (`OffsetsTranslation.starting_offsets()`), through `translate_committed` as for a group.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from mirrorflow.clients import FlowClients, flow_clients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ConfigError
from mirrorflow.groups.group_offsets import CommittedOffset
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.mm2.formats import Checkpoint
from mirrorflow.mm2.policy import DefaultReplicationPolicy
from mirrorflow.reporting import Report, table
from mirrorflow.state.store import StateStore

# Translation statuses that come from the offset map, plus ours for topics the flow skips.
NOT_REPLICATED = "not-replicated"


class Translator(Protocol):
    """What checkpointing needs of offset_map.PartitionMap."""

    def translate(self, source_offset: int) -> Any: ...

    def rereads(self, source_offset: int, target_offset: int) -> int: ...


@dataclass(frozen=True, slots=True)  # slots: a pass builds 100,000s of them
class TranslatedOffset:
    """A committed source offset and where the same position is on the target."""

    group: str
    source_topic: str
    partition: int
    source_offset: int
    target_topic: str
    target_offset: int | None  # None: no translation (nothing copied, topic not replicated, forgotten)
    # exact | end | ahead | before | gap | reread | pruned | none | not-replicated; for `translate_offsets`
    # also earliest | latest (Spark's -2 and -1, passed on as they are)
    status: str
    missing: int = 0  # offsets the target consumer will never see (before/gap) or not yet (ahead)
    metadata: str = ""
    reordered: bool = False  # the partition's map places records out of source order (a backfill)
    reread: int = 0  # at most this many records already read are read again from target_offset

    def checkpoint(self) -> Checkpoint | None:
        """The MM2 checkpoint for this offset, None when there is no translation (no checkpoint,
        as MM2 since 3.3 emits none for a partition without offset syncs)."""
        if self.target_offset is None or self.target_offset < 0 or self.status == NOT_REPLICATED:
            return None
        return Checkpoint(
            self.group, self.target_topic, self.partition, self.source_offset, self.target_offset, self.metadata
        )


def rename_topic(policy: DefaultReplicationPolicy, source: str, target: str, topic: str) -> str:
    """MirrorCheckpointTask.renameTopicPartition: the downstream name of a source topic."""
    if policy.topic_source(topic) == target:
        return policy.original_topic(topic)
    return policy.format_remote_topic(source, topic)


class TopicRules:
    """The flow's per-topic decisions (replicated? downstream name?), each worked out once per
    topic: a pass over 1,000 groups x 100 partitions asks them 100,000 times of a few topics."""

    def __init__(self, filters: FlowFilters) -> None:
        self.filters = filters
        self._replicated: dict[str, bool] = {}
        self._renamed: dict[str, str] = {}

    def replicated(self, topic: str) -> bool:
        r = self._replicated.get(topic)
        if r is None:
            r = self._replicated[topic] = self.filters.should_replicate_topic(topic)
        return r

    def renamed(self, topic: str) -> str:
        r = self._renamed.get(topic)
        if r is None:
            f = self.filters
            r = self._renamed[topic] = rename_topic(f.policy, f.source, f.target, topic)
        return r


def upstream_of(policy: DefaultReplicationPolicy, source: str, downstream: str) -> str | None:
    """The source topic a checkpoint's downstream topic was renamed from, None if not from `source`."""
    if policy.topic_source(downstream) != source:
        return None
    return policy.upstream_topic(downstream)


def translate_committed(
    filters: FlowFilters, offsets: Iterable[CommittedOffset], maps: Mapping[tuple[str, int], Translator]
) -> list[TranslatedOffset]:
    """Translate committed source offsets through the offset map (pure).

    `maps` is keyed by (SOURCE topic, partition). Offsets on topics the flow does not replicate
    get status `not-replicated`; partitions without any copied data get `none`.
    """
    out: list[TranslatedOffset] = []
    rules = TopicRules(filters)
    # groups that consume the same partitions often sit at the same offset: translate each once
    done: dict[tuple[str, int, int], Any] = {}
    for o in sorted(offsets, key=lambda o: (o.group, o.topic, o.partition)):
        if o.offset < 0:
            continue  # no committed position (librdkafka's OFFSET_INVALID)
        target_topic = rules.renamed(o.topic)
        if not rules.replicated(o.topic):
            out.append(
                TranslatedOffset(
                    o.group, o.topic, o.partition, o.offset, target_topic, None, NOT_REPLICATED, 0, o.metadata
                )
            )
            continue
        pm = maps.get((o.topic, o.partition))
        if pm is None:
            out.append(
                TranslatedOffset(o.group, o.topic, o.partition, o.offset, target_topic, None, "none", 0, o.metadata)
            )
            continue
        t = done.get((o.topic, o.partition, o.offset))
        if t is None:
            t = done[(o.topic, o.partition, o.offset)] = pm.translate(o.offset)
        out.append(
            TranslatedOffset(
                o.group,
                o.topic,
                o.partition,
                o.offset,
                target_topic,
                t.target_offset,
                t.status,
                t.missing,
                o.metadata,
                bool(getattr(pm, "reordered", False)),
                getattr(t, "reread", 0),
            )
        )
    return out


def load_maps(clients: FlowClients, partitions: Iterable[tuple[str, int]]) -> Mapping[tuple[str, int], Translator]:
    """The offset map of the given SOURCE partitions (read from the target's state)."""
    parts = sorted(set(partitions))
    return StateStore(clients).offset_map(parts) if parts else {}


# -- how translations read ----------------------------------------------------------------------------
STATUS_NOTES = {
    "exact": "resumes at the next unread record",
    "end": "caught up: resumes at the end of the copied data",
    "ahead": "not yet replicated: the target has not received the missing records yet",
    "before": "the missing records were never replicated (source retention / initial position)",
    "gap": "the missing offsets were never copied (deleted before copy)",
    "reread": "the offset map no longer knows (or cannot express in one target offset) where the next record "
    "is: resumes earlier, re-reading at most `reread` records, never skipping one",
    "pruned": "below the source's log start and every group (moved there by hand): resumes at the nearest "
    "known position at or before it, re-reading at most `reread` records (no target: forgotten by an older "
    "mirrorflow, no checkpoint)",
    "none": "nothing copied yet for this partition: no checkpoint",
    "not-replicated": "the flow does not replicate this topic",
}
TRANSLATION_HEADERS = (
    "source topic",
    "partition",
    "source offset",
    "target topic",
    "target offset",
    "status",
    "missing",
    "reread",
)


def translation_table(rows: Iterable[TranslatedOffset], actions: Sequence[str] | None = None) -> str:
    """One line per partition: where the group is on the source and where it resumes on the target
    (with `actions`: what the checkpoint pass did with each)."""
    rows = list(rows)
    headers = list(TRANSLATION_HEADERS) + (["checkpoint"] if actions is not None else [])
    body = []
    for i, r in enumerate(rows):
        line: list[object] = [
            r.source_topic,
            r.partition,
            r.source_offset,
            r.target_topic,
            r.target_offset,
            r.status,
            r.missing,
            r.reread,
        ]
        if actions is not None:
            line.append(actions[i])
        body.append(line)
    return "\n".join(table(headers, body))


def status_notes(rows: Iterable[TranslatedOffset]) -> list[str]:
    """A short explanation of every non-exact status that occurs, in table order."""
    seen: list[str] = []
    for r in rows:
        if r.status != "exact" and r.status not in seen:
            seen.append(r.status)
    return [f"{s}: {STATUS_NOTES.get(s, s)}" for s in seen]


@dataclass(frozen=True)
class Translation(Report):
    """Where `group` resumes on the target, per partition (`mirrorflow translate`); its JSON is the rows."""

    group: str
    flow: str
    rows: Sequence[TranslatedOffset]

    def lines(self) -> list[str]:
        out = [f"group {self.group}, flow {self.flow}", *translation_table(self.rows).split("\n")]
        return out + [f"  {note}" for note in status_notes(self.rows)]

    def to_json(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.rows]


# -- consumers outside groups: Spark's startingOffsets ---------------------------------------------
# Spark's startingOffsets values that name a position instead of an offset; passed on to the target as
# they are: -2 is the earliest offset of the target partition, -1 its latest (its end when the query starts).
EARLIEST = -2
LATEST = -1
SPECIAL = {EARLIEST: "earliest", LATEST: "latest"}
OFFSETS_NOTES = {
    "earliest": "given as -2 (earliest): starts at the earliest offset of the target partition (-2)",
    "latest": "given as -1 (latest): starts at the end of the target partition (-1) when the query starts, "
    "skipping whatever the target holds then, as -1 does on the source",
    "none": "nothing copied yet for this partition: starts at the earliest offset of the target partition (-2), "
    "never past a record copied later",
    "pruned": STATUS_NOTES["pruned"].replace("no checkpoint", "starts at the earliest offset, -2"),
}
# a row of `translate --offsets --json`: the group's columns, without the group's own fields
OFFSETS_FIELDS = (*(h.replace(" ", "_") for h in TRANSLATION_HEADERS), "reordered")
EXAMPLE = '{"orders": {"0": 42, "1": 17}}'
ARG = "--offsets"  # the key every input error names (the CLI's option; the Python argument is `offsets`)


def parse_starting_offsets(offsets: str | Mapping[str, Any]) -> dict[str, dict[int, int]]:
    """Spark's `startingOffsets` JSON (`{"orders": {"0": 42, "1": 17}}`: topic -> partition -> offset,
    -2 earliest, -1 latest), as text or already parsed, checked: topic -> {partition: offset}. Every
    problem is named (topic, partition, value) in one ConfigError (exit 2)."""
    if isinstance(offsets, str):
        try:
            offsets = json.loads(offsets)
        except ValueError as exc:
            raise ConfigError([(ARG, f"not valid JSON ({exc}): {_clip(offsets)}")]) from None
    if not isinstance(offsets, Mapping) or not offsets:
        raise ConfigError([(ARG, f"expected Spark's startingOffsets form, e.g. {EXAMPLE}, got {_clip(offsets)}")])
    problems: list[tuple[str, str]] = []
    out: dict[str, dict[int, int]] = {}
    for topic, parts in offsets.items():
        if not isinstance(topic, str) or not topic:
            problems.append((ARG, f"a topic name must be a non-empty string, got {topic!r}"))
            continue
        if not isinstance(parts, Mapping) or not parts:
            problems.append(
                (
                    ARG,
                    f'topic {topic!r}: expected an object of partition -> offset, e.g. {{"0": 42}}, got {_clip(parts)}',
                )
            )
            continue
        mine = out[topic] = {}
        for key, value in parts.items():
            k = str(key).strip()
            if not k.isdigit():
                problems.append((ARG, f"topic {topic!r}: partition {key!r} is not a partition number"))
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < EARLIEST:
                problems.append(
                    (
                        ARG,
                        f"topic {topic!r} partition {int(k)}: offset {value!r} is not an offset "
                        "(an integer >= 0, or -2 for earliest, -1 for latest)",
                    )
                )
                continue
            if int(k) in mine:
                problems.append((ARG, f"topic {topic!r}: partition {int(k)} is given twice"))
                continue
            mine[int(k)] = value
    if problems:
        raise ConfigError(problems)
    return out


def _clip(value: Any, n: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return repr(text if len(text) <= n else text[: n - 3] + "...")


def translate_offsets(
    cfg: Config,
    flow: FlowConfig,
    offsets: str | Mapping[str, Any],
    maps: Mapping[tuple[str, int], Translator] | None = None,
    clients: FlowClients | None = None,
) -> OffsetsTranslation:
    """Where a consumer outside consumer groups resumes on the target (`mirrorflow translate --offsets`).

    `offsets` is Spark's `startingOffsets` form keyed by SOURCE topic (a JSON text or the parsed
    mapping): the next offset the consumer reads in each partition, as a Spark query's checkpoint
    (`offsets/<batchId>`), a Flink source's state or an `assign()` consumer's own store keeps it.
    Each offset is translated through the offset map on the target by `translate_committed`, exactly as
    a group's committed offset is (exact, or an earlier position, never past an unread record); -2
    (earliest) and -1 (latest) become earliest and latest on the target. Only the target is read (the
    map and its topics), so this works when the source is lost. `.starting_offsets()` is the answer in
    the same form keyed by the target topic.

    Raises ConfigError (exit 2) naming the topic or partition for bad input, a topic the flow does not
    replicate (or whose remote topic is not on the target) and a partition the target topic does not
    have."""
    parsed = parse_starting_offsets(offsets)
    filters = FlowFilters.for_flow(flow)
    rules = TopicRules(filters)
    with flow_clients(cfg, flow, clients) as c:
        problems = []
        for topic, parts in parsed.items():
            remote = rules.renamed(topic)
            if not rules.replicated(topic):
                problems.append((ARG, f"topic {topic!r} is not replicated by flow {flow.name} (its topic filters)"))
                continue
            have = c.partitions("target", remote)
            if not have:
                problems.append(
                    (
                        ARG,
                        f"topic {topic!r} is not replicated by flow {flow.name}: its remote topic {remote!r} does not "
                        f"exist on cluster {flow.target!r}",
                    )
                )
                continue
            problems += [
                (ARG, f"topic {topic!r} has no partition {p}: {remote!r} on cluster {flow.target!r} has {have}")
                for p in sorted(parts)
                if p >= have
            ]
        if problems:
            raise ConfigError(problems)
        given = [CommittedOffset("", t, p, o) for t, parts in parsed.items() for p, o in parts.items()]
        if maps is None:
            maps = load_maps(c, {(o.topic, o.partition) for o in given if o.offset >= 0})
    rows = translate_committed(filters, [o for o in given if o.offset >= 0], maps)
    rows += [
        TranslatedOffset("", o.topic, o.partition, o.offset, rules.renamed(o.topic), o.offset, SPECIAL[o.offset])
        for o in given
        if o.offset < 0
    ]
    return OffsetsTranslation(flow.name, flow.target, sorted(rows, key=lambda r: (r.source_topic, r.partition)))


@dataclass(frozen=True)
class OffsetsTranslation(Report):
    """Where a consumer outside groups resumes on the target, per partition (`translate --offsets`).

    `starting_offsets()` is the answer for Spark's `startingOffsets` (and any consumer that seeks):
    target topic -> partition -> offset, -2 where there is no target offset (nothing copied yet)."""

    flow: str
    target: str
    rows: Sequence[TranslatedOffset]

    def starting_offsets(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for r in self.rows:
            out.setdefault(r.target_topic, {})[str(r.partition)] = (
                EARLIEST if r.target_offset is None else r.target_offset
            )
        return out

    def starting_offsets_json(self) -> str:
        """`starting_offsets()` as the one-line JSON Spark's option takes."""
        return json.dumps(self.starting_offsets(), separators=(",", ":"))

    def lines(self) -> list[str]:
        seen = [s for s in dict.fromkeys(r.status for r in self.rows) if s != "exact"]
        notes = [f"{s}: {OFFSETS_NOTES.get(s) or STATUS_NOTES.get(s, s)}" for s in seen]
        return [
            f"offsets on cluster {self.target!r}, flow {self.flow}",
            *translation_table(self.rows).split("\n"),
            *(f"  {note}" for note in notes),
            f"startingOffsets on {self.target}: {self.starting_offsets_json()}",
        ]

    def to_dict(self) -> dict[str, Any]:
        partitions = [{k: v for k, v in asdict(r).items() if k in OFFSETS_FIELDS} for r in self.rows]
        return {
            "flow": self.flow,
            "target": self.target,
            "starting_offsets": self.starting_offsets(),
            "partitions": partitions,
        }


def record_translation(cfg: Config, flow: FlowConfig, report: OffsetsTranslation, by: str, via: str) -> None:
    """A `translate` line in the flow's operations history (state.history), what the status page shows
    of a translation of positions kept outside groups: who asked, through which door, how many
    partitions and their statuses. StateError when the target does not take it."""
    from mirrorflow.state.history import record_operation

    counts: dict[str, int] = {}
    for r in report.rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    with FlowClients(cfg, flow) as clients:
        record_operation(
            clients,
            "translate",
            by,
            via=via,
            summary=f"offsets outside consumer groups translated for startingOffsets on {report.target!r}: "
            + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())),
            figures={"partitions": len(report.rows), **counts},
        )
