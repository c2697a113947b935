"""The one rendering of each consumer-group result, shared by the CLI and the checkpoint DAG tasks.

`mirrorflow checkpoint|translate|heartbeat` print `Rendered.lines` (or `data` with --json); the
DAG tasks log the same lines and return `summary` to XCom, so both always say the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from mirrorflow.groups.checkpoint import CheckpointRun
from mirrorflow.groups.heartbeat import HeartbeatRun
from mirrorflow.groups.offset_sync import GroupSyncRun, PartitionSync
from mirrorflow.groups.translation import TranslatedOffset
from mirrorflow.mm2.remote_cluster import OffsetAndMetadata, TopicPartitionKey

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


# a checkpoint whose upstream offset the offset map on the target cannot place
UNPLACED = (
    "the offset map does not place this checkpoint "
    "(MirrorMaker 2 wrote it, or an older mirrorflow pruned the map there)"
)


@dataclass(frozen=True)
class Rendered:
    """A result for people (`lines`, `render()`), for `--json` (`data`, JSON-able) and for XCom
    (`summary`, small). Not a `reporting.Report`: its JSON may be a list (a translation's rows)."""

    lines: list[str]
    data: Any
    summary: dict[str, Any] = field(default_factory=dict)

    def render(self) -> str:
        return "\n".join(self.lines)


def render_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Left-aligned columns, numbers right-aligned, '-' for None."""
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [
        all(r[i].lstrip("-").isdigit() or r[i] == "-" for r in cells) and bool(cells) for i in range(len(headers))
    ]

    def fmt(row: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w) for v, w, num in zip(row, widths, numeric, strict=False)
        ).rstrip()

    lines = [fmt(list(headers)), fmt(["-" * w for w in widths])]
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)


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
    """One line per partition: where the group is on the source and where it resumes on the target."""
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
    return render_table(headers, body)


def status_notes(rows: Iterable[TranslatedOffset]) -> list[str]:
    """A short explanation of every non-exact status that occurs, in table order."""
    seen: list[str] = []
    for r in rows:
        if r.status != "exact" and r.status not in seen:
            seen.append(r.status)
    return [f"{s}: {STATUS_NOTES.get(s, s)}" for s in seen]


def render_translation(group: str, flow: str, rows: Sequence[TranslatedOffset]) -> Rendered:
    """Where `group` resumes on the target, per partition, with a note on every non-exact status."""
    lines = [f"group {group}, flow {flow}", *translation_table(rows).split("\n")]
    lines += [f"  {note}" for note in status_notes(rows)]
    return Rendered(lines, [asdict(r) for r in rows])


def resume_note(x: PartitionSync) -> str:
    """How a group resumes at its checkpoint, for the plans people approve (failover, drill) and the
    status page: empty when exactly at its next unread record (or kept at its offset on the target,
    which is ahead)."""
    if x.target_offset is not None and x.target_offset > x.checkpoint_offset:
        return ""
    if x.reread is None:
        return f" (unchecked: {UNPLACED})"
    if x.reread:
        return f" (earlier: re-reads at most {x.reread:,} record(s) it had read, skips none)"
    return ""


def render_checkpointed_offsets(
    offsets: Mapping[TopicPartitionKey, OffsetAndMetadata], rereads: Mapping[tuple[str, int], int | None] | None = None
) -> Rendered:
    """Where a group resumes on the target according to the checkpoints there alone, and at most how
    many records it reads again there (`rereads`, from the offset map on the target; '?': unknown)."""
    ordered = sorted(offsets.items())
    again = rereads or {}

    def reread(tp: TopicPartitionKey) -> int | None:
        return again.get((tp.topic, tp.partition), 0)

    table = render_table(
        ("target topic", "partition", "target offset", "reread"),
        [(tp.topic, tp.partition, om.offset, "?" if reread(tp) is None else reread(tp)) for tp, om in ordered],
    )
    lines = table.split("\n")
    if any(reread(tp) for tp, _ in ordered):
        lines.append(f"  reread: {STATUS_NOTES['reread']}")
    if any(reread(tp) is None for tp, _ in ordered):
        lines.append(f"  ?: {UNPLACED}: what it reads again is not known")
    return Rendered(
        lines,
        [
            {
                "target_topic": tp.topic,
                "partition": tp.partition,
                "target_offset": om.offset,
                "metadata": om.metadata,
                "reread": reread(tp),
            }
            for tp, om in ordered
        ],
    )


def render_checkpoints(run: CheckpointRun, target: str) -> Rendered:
    """One checkpoint pass: the headline, then per group its translation and checkpoint decision."""
    if run.skipped_reason:
        lines = [f"{run.flow}: checkpoints skipped: {run.skipped_reason}"]
    else:
        lines = [
            f"{run.flow}: {len(run.groups)} group(s), {len(run.emitted)} checkpoint(s) written to "
            f"{run.topic} on {target}" + (" (topic created)" if run.created_topic else "")
        ]
        for g in run.groups:
            mine = [(r, a) for r, a in run.rows if r.group == g]
            lines += ["", f"group {g}", *translation_table([r for r, _ in mine], [a for _, a in mine]).split("\n")]
    if run.offset_map is not None:  # the fold that keeps the offset map bounded (map_upkeep)
        lines += ["", run.offset_map.line()]
    return Rendered(lines, run.to_dict(), {"groups": len(run.groups), "emitted": len(run.emitted), "topic": run.topic})


def render_group_sync(run: GroupSyncRun) -> Rendered:
    """One group offset sync pass: what was committed on the target, per group, and what was kept."""
    left_alone = [p.group for p in run.plans if p.action == "left-alone"]
    summary = {"committed": run.committed, "left_alone": left_alone}
    if run.skipped_reason:
        return Rendered([f"{run.flow}: group offset sync skipped: {run.skipped_reason}"], run.to_dict(), summary)
    lines = [
        f"{run.flow}: group offset sync on the target: {sum(run.committed.values())} offset(s) committed "
        f"for {len(run.committed)} group(s)"
    ]
    for p in run.plans:
        if p.action == "left-alone":
            lines.append(f"  {p.group}: left alone ({p.reason})")
            continue
        line = f"  {p.group}: {len(p.writes)} partition(s) committed" if p.writes else f"  {p.group}: up to date"
        ahead = [x for x in p.partitions if x.action == "skip-ahead"]
        if ahead:
            line += f"; kept {len(ahead)} target offset(s) that are ahead: " + ", ".join(
                f"{x.topic}[{x.partition}] {x.target_offset} > {x.checkpoint_offset}" for x in ahead
            )
        no_topic = [x for x in p.partitions if x.action == "skip-no-topic"]
        if no_topic:
            line += "; not on the target (run `mirrorflow sync`): " + ", ".join(
                f"{x.topic}[{x.partition}]" for x in no_topic
            )
        lines.append(line)
    return Rendered(lines, run.to_dict(), summary)


def render_heartbeats(run: HeartbeatRun) -> Rendered:
    """The heartbeats written, the replication latency they show and, when looked up, the upstream clusters."""
    lines = [] if run.emitted else [f"{run.flow}: heartbeats disabled (emit.heartbeats.enabled=false)"]
    lines += [f"{run.flow}: heartbeat ({e.source},{e.target}) written to {e.topic} on {e.cluster}" for e in run.emitted]
    lat = run.latency
    if lat.latency_ms is None:
        lines.append(f"{run.flow}: no replicated heartbeat in {lat.topic} on {run.target} yet")
    else:
        lines.append(f"{run.flow}: replication latency {lat.latency_ms} ms (newest heartbeat in {lat.topic})")
    if run.upstream_clusters is not None:
        lines.append(f"{run.target}: upstream clusters: {', '.join(run.upstream_clusters) or 'none'}")
    data = {
        "flow": run.flow,
        "emitted": [asdict(e) for e in run.emitted],
        "latency": lat.to_dict(),
        "upstream_clusters": run.upstream_clusters,
    }
    return Rendered(lines, data, {"emitted": len(run.emitted), "latency_ms": lat.latency_ms})
