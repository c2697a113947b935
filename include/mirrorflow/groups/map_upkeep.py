"""Keeping the offset map bounded: the floors no translation can go below, and a fold per checkpoint.

A translation is asked for a committed source group offset. Below the smaller of

* the source partition's log start (records below it can no longer be read on the source: a
  consumer positioned there gets an out-of-range error and is reset), and
* the lowest offset ANY consumer group on the source has committed on that partition (not only
  the groups the flow checkpoints: `mirrorflow translate` takes any group, and a filter may change),

no group can still ask (a group can only commit below its partition's log start by hand, and then
the source would not give it those records either). That is the partition's floor: the fold
(state.compaction) keeps only landmarks below it. Every group's committed offset is a pin: the run
it sits in stays exact when `offset.map.max.runs` raises the map's floor past it, so an idle group
resumes exactly however long it idles. When the source or any group's offsets cannot be read, the
fold still runs, prunes nothing by floor, keeps the pins of the last fold, and says why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from confluent_kafka import KafkaException
from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.errors import MirrorflowError
from mirrorflow.groups.group_offsets import CommittedOffset, fetch_group_offsets, list_groups
from mirrorflow.kafka.topic_admin import list_offsets
from mirrorflow.state.compaction import FoldReport, MapLook, MapNeeds, fold_offset_map

Key = tuple[str, int]


class FloorUnknown(MirrorflowError):
    """The floors cannot be known this time (the source, or some group's offsets, unreadable)."""


def map_floors(
    clients: FlowClients, keys: Iterable[Key], known: Mapping[str, list[CommittedOffset]] | None = None
) -> dict[Key, MapNeeds]:
    """Per source partition of `keys` that still exists: its floor, min(log start, every group's
    committed offset there), and those offsets as pins. `known`: offsets already fetched (group ->
    offsets), not asked again."""
    keys = list(keys)
    admin, conn, timeout = clients.admin("source"), clients.connection("source"), clients.admin_timeout
    counts = {t: clients.partitions("source", t) for t in {t for t, _ in keys}}
    live = [(t, p) for t, p in keys if p < counts[t]]
    if not live:
        return {}
    starts = dict(list_offsets(admin, conn, live, OffsetSpec.earliest(), committed=False, timeout=timeout))
    groups = [g for g in list_groups(admin, conn, timeout) if known is None or g not in known]
    fetched, errors = fetch_group_offsets(admin, conn, groups, timeout)
    if errors:
        g, e = sorted(errors.items())[0]
        raise FloorUnknown(f"the committed offsets of group {g!r} on cluster {clients.flow.source!r}: {e}")
    pins: dict[Key, set[int]] = {k: set() for k in starts}
    for offsets in [*(known or {}).values(), *fetched.values()]:
        for o in offsets:
            k = (o.topic, o.partition)
            if o.offset >= 0 and k in pins:
                pins[k].add(o.offset)
    return {k: MapNeeds(min([start, *pins[k]]), tuple(sorted(pins[k]))) for k, start in starts.items()}


def fold_after_checkpoint(
    clients: FlowClients, known: Mapping[str, list[CommittedOffset]] | None = None, look: MapLook | None = None
) -> FoldReport:
    """Fold the flow's offset map with the floors above; never raises (a failed fold changes
    nothing and is reported in `error`; the next checkpoint pass folds again). `look`: the pass's
    own read of the whole map (compaction.look_at_map), so the fold need not read it again to see
    whether there is anything to fold."""
    notes: list[str] = []

    def floors(keys: list[Key]) -> Mapping[Key, MapNeeds]:
        try:
            return map_floors(clients, keys, known)
        except (MirrorflowError, KafkaException) as exc:
            notes.append(f"nothing pruned by floor, the groups' positions of the last fold kept: {exc}")
            return {}

    try:
        report = fold_offset_map(clients, floors, look=look)
    except (MirrorflowError, KafkaException) as exc:
        report = FoldReport(clients.flow.name, error=str(exc))
    if notes:
        report.skipped_reason = notes[0]
    return report
