"""A failback's writes to the reverse flow's state: its progress (the ledger) and, with the
identity policy, the inverse offset-map entries, per partition in one transaction (`write_seeds`);
for a source rebuilt empty, a new map epoch for both flows (`write_reseed`)."""

from __future__ import annotations

import time
from dataclasses import replace

from mirrorflow.clients import FlowClients
from mirrorflow.ops.dr.failback_plan import Inverse, Key, Seed
from mirrorflow.state.lease import FlowLease, local_owner
from mirrorflow.state.names import offset_map_topic, progress_topic
from mirrorflow.state.offset_map import MapEntry, merge_ranges
from mirrorflow.state.records import Progress
from mirrorflow.state.state_writer import StateWriter, write_partition_state
from mirrorflow.state.store import StateStore

RUNS_PER_ENTRY = 5_000  # inverse runs per seeded offset-map entry (records stay small)


def write_reseed(fc: FlowClients, rc: FlowClients, seeds: list[Seed], fwd_keys: list[Key]) -> None:
    """--reseed: the reverse flow starts each partition at its log start in a new map epoch (as
    `mirrorflow reseed` does); the failed-over flow's state described the old source, so each of
    its partitions gets a new epoch without progress: a failback back then starts it from the
    rebuilt source's log start with what the reverse flow wrote there as its ledger."""
    now = int(time.time() * 1000)
    for clients, keys, starts in (
        (rc, [(s.topic, s.partition) for s in seeds], {(s.topic, s.partition): (s.start, s.target_end) for s in seeds}),
        (fc, fwd_keys, {}),
    ):
        flow = clients.flow
        old = StateStore(clients).progress(keys)
        writer = StateWriter(
            flow,
            clients.partitions("target", progress_topic(flow)),
            clients.partitions("target", offset_map_topic(flow)),
        )
        lease = FlowLease(clients, *local_owner("mirrorflow failback")).acquire() if clients is fc else None
        try:
            for t, p in keys:
                prev = old.get((t, p))
                epoch = prev.epoch + 1 if prev is not None else 1
                start, tgt_end = starts.get((t, p), (-1, -1))
                prog = Progress(t, p, start, (), tgt_end, updated=now, epoch=epoch)
                marker = MapEntry(t, p, max(start, 0), max(start, 0), (), max(tgt_end, 0), 0, epoch)
                write_partition_state(clients, writer, prog, marker)
        finally:
            if lease is not None:
                lease.release()


def write_seeds(rc: FlowClients, seeds: list[Seed], inverse: dict[Key, Inverse]) -> None:
    """Per partition, the reverse flow's progress (its ledger) and (identity) offset-map entries
    with the inverse runs, in one transaction (write_partition_state); a failback re-run writes the
    same again. The map entries cover what the forward flow wrote and the empty stretches between,
    never a range still to copy nor one kept out (verify reports those as not copied)."""
    rev = rc.flow
    old = StateStore(rc).progress([(s.topic, s.partition) for s in seeds])
    writer = StateWriter(
        rev, rc.partitions("target", progress_topic(rev)), rc.partitions("target", offset_map_topic(rev))
    )
    now = int(time.time() * 1000)
    for s in seeds:
        if s.absent:  # nothing to write: the planner tells its records apart (state_drift.only_kept)
            continue
        prev = old.get((s.topic, s.partition))
        epoch = prev.epoch if prev is not None else 0
        runs, ranges, spans = inverse.get((s.topic, s.partition), Inverse([], []))
        entries = []
        for a, b in ranges if runs or spans else ():
            inside = [r for r in runs if a <= r.src < b]
            for i in range(0, max(len(inside), 1), RUNS_PER_ENTRY):
                chunk = tuple(inside[i : i + RUNS_PER_ENTRY])
                lo = a if i == 0 else chunk[0].src
                hi = inside[i + RUNS_PER_ENTRY].src if i + RUNS_PER_ENTRY < len(inside) else b
                there = tuple(x for x in spans if a <= x.src < b) if i == 0 else ()
                entries.append(MapEntry(s.topic, s.partition, lo, hi, chunk, s.target_end, epoch=epoch, spans=there))
        if prev is None or prev.next < 0:
            prog = Progress(
                s.topic, s.partition, s.start, s.covered, s.target_end, updated=now, epoch=epoch, origin=s.start
            ).settled()
        else:
            prog = replace(
                prev,
                next=max(prev.next, s.start),
                covered=tuple(merge_ranges([*prev.covered, *s.covered])),
                tgt_end=max(prev.tgt_end, s.target_end),
                updated=now,
            ).settled()
        write_partition_state(rc, writer, prog, entries)
