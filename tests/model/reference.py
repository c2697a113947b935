"""The reference model of the model-based tests: where every record is and where every group must resume.

It knows nothing of mirrorflow's state. It knows what the producers wrote (every record carries a
`uid` header), which transactions aborted, what each group read and committed, what the failbacks
kept apart, and it reads both clusters (`Snapshot`: every committed record per partition,
read_committed). From these alone it says what must hold after each step:

* a drained copy of flow S->T: every record on S that a failback did not keep apart is on T, once,
  unchanged (key, value, headers, timestamp), in the order its producer wrote it; nothing aborted,
  nothing nobody wrote (`copy_problems`);
* a group's committed offset on T (group sync, failover): never past a record the group has not
  read (`skipped_by`), and exactly at the first record it had not read when it was checkpointed,
  where the product promises exactness (`resume_problems`).

Records the log cleaner (a compacted topic) or delete-records removed from a cluster are simply
not in its snapshot: a copy need not bring what was gone before it ran, and a group could not read
what was gone before it got there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tests.support import Rec

TP = tuple[str, int]
Snapshot = dict[TP, list[Rec]]


def uid_of(r: Rec) -> str:
    return dict(r.headers)["uid"].decode()


@dataclass(frozen=True)
class Written:
    """A committed record as its producer wrote it."""

    uid: str
    side: str  # "A" or "B": the cluster it was produced to
    topic: str
    partition: int
    offset: int  # on its own cluster
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    ts: int
    step: int  # the model step that wrote it (failovers split divergence and split brain by it)

    def content(self) -> tuple:
        return (self.partition, self.key, self.value, self.headers, self.ts)


@dataclass
class Group:
    """A consumer group of the applications: the side it reads on, its committed offsets there,
    and every record it ever read (on any side)."""

    name: str
    tps: tuple[TP, ...]
    side: str = "A"
    committed: dict[TP, int] = field(default_factory=dict)
    read: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class ModelCheckpoint:
    """The model's checkpoint of a group partition: the source offset it translated, the target
    position the model derives for it, and the product's translation status then."""

    source_offset: int
    position: int
    status: str


def first_at(records: list[Rec], offset: int | None) -> str | None:
    """The uid of the first record at or after `offset` (None: none there, or no offset)."""
    if offset is None:
        return None
    return next((uid_of(r) for r in records if r.offset >= offset), None)


def translate(src: list[Rec], offset: int, dst: list[Rec]) -> int:
    """Where a group at `offset` of a source partition resumes on the target partition: at the copy
    of the first record at or after `offset` that is on the target; when none is, after the last
    record there."""
    on_dst = {uid_of(r): r.offset for r in dst}
    for r in src:
        if r.offset >= offset and uid_of(r) in on_dst:
            return on_dst[uid_of(r)]
    return dst[-1].offset + 1 if dst else 0


class Model:
    """The ledger of records, the groups and the checkpoints (module docstring)."""

    def __init__(self) -> None:
        self.acked: dict[str, Written] = {}
        self.aborted: set[str] = set()
        self.kept: set[str] = set()  # divergence and split brain of every failback: on their side only
        # records on A before the first flow's first run with initial.position latest: the flow does not
        # own them (never required on B; a backfill may still copy them, once)
        self.unowned: set[str] = set()
        # partitions a backfill above the progress copied out of source order (documented: Kafka
        # appends, so the holes below the island land after it on the target)
        self.unordered: set[TP] = set()
        self.groups: dict[str, Group] = {}
        self.ckpt: dict[str, dict[tuple[str, str, int], ModelCheckpoint]] = {}
        self.seen: dict[str, dict[str, int]] = {"A": {}, "B": {}}  # side -> uid -> offset there
        self.ever: dict[str, dict[TP, dict[int, Rec]]] = {"A": {}, "B": {}}  # side -> partition -> offset -> record
        self.step = 0

    # -- what happened -----------------------------------------------------------------------
    def wrote(self, w: Written) -> None:
        assert w.uid not in self.acked, f"{w.uid} acknowledged twice"
        self.acked[w.uid] = w

    def look(self, side: str, snap: Snapshot) -> None:
        """Remember where each record is on `side` (a record keeps its offset on a cluster)."""
        for tp, recs in snap.items():
            ever = self.ever[side].setdefault(tp, {})
            for r in recs:
                self.seen[side].setdefault(uid_of(r), r.offset)
                ever.setdefault(r.offset, r)

    def with_deleted(self, side: str, tp: TP, now: list[Rec]) -> list[Rec]:
        """`now` (a partition's records on `side`) and before them the records that were there below its
        first record now: deleted since (delete-records, retention, the log cleaner), also those written
        there and gone before any snapshot saw them (a compacted topic's superseded values, after the copy
        took them). A group's committed offset still names such a record, and its copy on the target is
        where the group resumes exactly."""
        start = now[0].offset if now else None
        was = dict(self.ever[side].get(tp, {}))
        for w in self.acked.values():
            if w.side == side and (w.topic, w.partition) == tp and w.offset not in was:
                was[w.offset] = Rec(w.partition, w.offset, w.key, w.value, w.headers, w.ts)
        gone = [r for o, r in sorted(was.items()) if start is None or o < start]
        return gone + list(now)

    # -- a drained copy ------------------------------------------------------------------------
    def copy_problems(self, src_side: str, src: Snapshot, dst_side: str, dst: Snapshot) -> dict[str, list[str]]:
        """After a copy S->T that left nothing to copy: what is wrong on T (empty: nothing)."""
        on_src = {uid_of(r) for recs in src.values() for r in recs}
        problems: dict[str, list[str]] = {}

        def bad(kind: str, what: str) -> None:
            problems.setdefault(kind, []).append(what)

        seen: set[str] = set()
        for (t, p), recs in dst.items():
            order: dict[str, list[int]] = {}
            for r in recs:
                u = uid_of(r)
                w = self.acked.get(u)
                if u in seen:
                    bad("duplicated", f"{u} again at {t}[{p}]@{r.offset}")
                elif w is None:
                    bad("not written by any producer (or aborted)", f"{u} at {t}[{p}]@{r.offset}")
                elif (w.topic, w.partition) != (t, p):
                    bad("in another partition", f"{u} at {t}[{p}], written to {w.topic}[{w.partition}]")
                elif r.content() != w.content():
                    bad("changed", f"{u} at {t}[{p}]@{r.offset}: {r.content()} != {w.content()}")
                seen.add(u)
                if w is not None:
                    order.setdefault(w.side, []).append(w.offset)
            for origin, offs in order.items():
                if offs != sorted(offs) and (t, p) not in self.unordered:
                    bad("out of order", f"{t}[{p}]: the records written on {origin}")
        for u in sorted(on_src - seen - self.kept - self.unowned):
            w = self.acked.get(u)
            if w is not None and w.side == dst_side:
                continue  # T's own record, gone from T (compaction, delete-records): never copied back
            if u in self.seen[dst_side]:
                continue  # copied to T once, delete-records took it from T since (T was the applications')
            where = f"{w.topic}[{w.partition}]@{w.offset} on {w.side}" if w else "?"
            bad(f"missing on {dst_side} (on {src_side}, not kept apart by a failback)", f"{u} ({where})")
        for u in sorted(seen & self.kept):
            if self.acked[u].side != dst_side:  # on its own side it was written, not copied
                bad("kept apart by a failback, yet copied", u)
        return problems

    # -- groups --------------------------------------------------------------------------------
    def read(self, g: Group, recs: list[Rec], next_offset: int, tp: TP) -> None:
        g.read |= {uid_of(r) for r in recs}
        g.committed[tp] = next_offset

    def model_checkpoint(
        self, flow: str, side: str, src: Snapshot, dst: Snapshot, statuses: Mapping[tuple[str, str, int], str]
    ) -> None:
        """The checkpoints of a pass of `flow` while the groups read on its source (`side`): each group's
        committed offset translated by the model (the records delete-records took from the source since
        still count: their copies are where the offset resumes), kept by MM2's guard (never back unless
        the group rewound). `statuses`: the product's translation status per (group, topic, partition)."""
        store = self.ckpt.setdefault(flow, {})
        for g in self.groups.values():
            for tp, off in g.committed.items():
                pos = translate(self.with_deleted(side, tp, src[tp]), off, dst[tp])
                key = (g.name, *tp)
                prev = store.get(key)
                status = statuses.get(key, "?")
                if prev is None or off < prev.source_offset or pos > prev.position:
                    store[key] = ModelCheckpoint(off, pos, status)
                elif off > prev.source_offset and status in ("reread", "pruned"):
                    store[key] = ModelCheckpoint(prev.source_offset, prev.position, status)

    @staticmethod
    def skipped_by(g: Group, dst: list[Rec], offset: int | None, on_src: set[str]) -> list[str]:
        """Records of `dst` below `offset` that group `g` never read and could have read: those still
        on the side it read on (`on_src`: its records now). One the log cleaner or a delete-records
        removed there before the group got to it, or one that never was there (a failback's kept
        records), it could not read."""
        if offset is None:
            return []
        out = []
        for r in dst:
            if r.offset >= offset:
                break
            u = uid_of(r)
            if u not in g.read and u in on_src:
                out.append(f"{u}@{r.offset}")
        return out

    def resume_problems(
        self,
        flow: str,
        side: str,
        src_side: str,
        snap: Snapshot,
        on_src: set[str],
        now: Mapping[str, Mapping[TP, int | None]],
        before: Mapping[str, Mapping[TP, int | None]],
    ) -> tuple[list[str], list[str]]:
        """Each group's committed offset on `side` (the target of `flow`) after group sync or a
        failover: (skips, inexact). A skip: a record below it the group never read. Inexact: not at
        the first record at or after its latest checkpoint (never behind where it was before:
        `before`), where the checkpoint's translation promised exactness (not `reread` or `pruned`:
        an earlier position, which re-reads)."""
        skips, inexact = [], []
        for g in self.groups.values():
            for tp in g.tps:
                got = now[g.name].get(tp)
                cp = self.ckpt.get(flow, {}).get((g.name, *tp))
                prev = before[g.name].get(tp)
                skipped = self.skipped_by(g, snap[tp], got, on_src)
                if skipped:
                    skips.append(
                        f"{g.name} {tp[0]}[{tp[1]}] committed at {got} on {side}, past {len(skipped)} record(s) "
                        f"it never read: {skipped[:8]} (checkpoint {cp}, offset before {prev})"
                    )
                if cp is not None and cp.status in ("reread", "pruned"):
                    continue  # an earlier position, which re-reads: exactness not promised
                if cp is not None and cp.status == "none" and got is None and prev is None:
                    continue  # nothing copied yet: no checkpoint, the group starts at the target's earliest
                pos = max([p for p in (cp.position if cp else None, prev) if p is not None], default=None)
                want, actual = first_at(snap[tp], pos), first_at(snap[tp], got)
                if self.before_kept_only(g, snap[tp], got, pos, src_side):
                    continue
                if self.at_first_unread(g, tp, snap[tp], got, pos):
                    continue
                if actual != want or (pos is None) != (got is None):
                    inexact.append(
                        f"{g.name} {tp[0]}[{tp[1]}] on {side}: committed {got} (first record {actual}), expected "
                        f"{pos} (first record {want}; checkpoint {cp}, offset before {prev})"
                    )
        return skips, inexact

    def at_first_unread(self, g: Group, tp: TP, recs: list[Rec], got: int | None, pos: int | None) -> bool:
        """In a partition a backfill copied out of source order (`unordered`), `got` below `pos` at the
        lowest offset of a record the group has not read: what docs/guarantees.md promises there (one
        target offset cannot say "the rest of the records"; the group re-reads, never skips)."""
        if tp not in self.unordered or got is None or pos is None or got >= pos:
            return False
        unread = [r.offset for r in recs if got <= r.offset < pos and uid_of(r) not in g.read]
        return bool(unread) and min(unread) == got

    def before_kept_only(self, g: Group, recs: list[Rec], got: int | None, pos: int | None, src_side: str) -> bool:
        """`got` is below `pos` by records that never reached the side the group read on (`src_side`) and
        that the group never read: those a failback kept apart on this side (its divergence and split brain)
        and those no flow owned (written before a `latest` first run, not backfilled). At the end of what a
        flow copied, the product resumes a group before them (the flow's map ends where the failback seeded
        it, at the side's end when the failover's plan was made; a group no copy moved stays where it was),
        so it reads them once and re-reads nothing; the model's translation puts it after them."""
        if got is None or pos is None or got >= pos:
            return False
        between = [uid_of(r) for r in recs if got <= r.offset < pos]
        apart = self.kept | (self.unowned - set(self.seen[src_side]))
        return bool(between) and all(u in apart and u not in g.read for u in between)

    # -- failback ----------------------------------------------------------------------------------
    def kept_now(self, side: str, on_side: Snapshot, other: Snapshot, failover_step: int) -> dict[str, list[Written]]:
        """`side`'s records (the failed-over flow's source) that the other side does not have and no
        earlier failback kept: divergence (written before the failover) and split brain (after). Only
        records produced on `side`: one the other side's producers wrote, copied here, and then removed
        there by its own log cleaner (a compacted topic keeps the latest value of a key) is that side's
        own business, not a record the failback keeps apart. A record that reached the other side once
        counts as there, also when delete-records took it from there since (it was copied: no divergence)."""
        there = {uid_of(r) for recs in other.values() for r in recs} | set(self.seen["B" if side == "A" else "A"])
        mine = [self.acked[uid_of(r)] for recs in on_side.values() for r in recs if uid_of(r) in self.acked]
        kept = [
            w for w in mine if w.side == side and w.uid not in there and w.uid not in self.kept | self.unowned
        ]
        return {
            "divergence": [w for w in kept if w.step < failover_step],
            "split brain": [w for w in kept if w.step >= failover_step],
        }
