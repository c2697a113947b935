"""The 'verified up to' marks a verify trusts and records (state.verified stores them): whether a
stored mark still describes the partition as it is now (`mark_problem`), and how far a verify that
passed reaches from the partition's start or from a trusted mark (`next_mark`). Pure."""

from __future__ import annotations

from mirrorflow.state.records import Progress, VerifiedMark


def mark_problem(
    mark: VerifiedMark, prog: Progress, src_id: str, remote: str, tgt_id: str, target_end: int | None
) -> str | None:
    """Why `mark` must not be trusted for the partition as it is now (None: it may): it must name
    the same topics (IDs, remote name) and map epoch, not be ahead of what is copied, have nothing
    copied below it since it was written, and the target must still hold what it verified."""
    if mark.epoch != prog.epoch:
        return f"the partition was re-seeded since (map epoch {mark.epoch} -> {prog.epoch})"
    if mark.topic_id != src_id:
        return f"the source topic was recreated since (topic ID {mark.topic_id or 'unknown'} -> {src_id or 'unknown'})"
    if mark.target_topic != remote:
        return f"the remote topic is {remote!r} now, the mark was written for {mark.target_topic!r}"
    if mark.target_topic_id != tgt_id:
        return (
            f"the target topic was recreated since (topic ID {mark.target_topic_id or 'unknown'} -> "
            f"{tgt_id or 'none: the topic is gone'})"
        )
    if mark.to > prog.next:
        return f"it is ahead of what is copied (the flow's progress is at {prog.next})"
    below = [(a, min(b, mark.to)) for a, b in prog.covered if a < mark.to]
    if below != [(mark.src_from, mark.to)]:
        return (
            f"what is copied below it changed since (copied: {_ranges(below)}; verified: "
            f"{mark.src_from}..{mark.to}; a backfill?)"
        )
    if target_end is not None and mark.tgt_end > target_end:
        return f"the target partition ends at {target_end}, below the verified copies' end {mark.tgt_end} (truncated?)"
    return None


def next_mark(covered: list[tuple[int, int]], lo: int, hi: int, base: VerifiedMark | None) -> tuple[int, int] | None:
    """The stretch [from, to) a verify that passed over [lo, hi) of a partition with ledger `covered`
    has verified from the partition's start (or from the trusted `base`), or None when it does not
    reach past what was recorded: only a stretch contiguous from the first copied offset counts (an
    offset copied later below it, in a hole, would never be checked)."""
    if not covered:
        return None
    if base is None:
        first = covered[0]
        if lo > first[0]:
            return None
        frm, end = first[0], first[1]
    else:
        if lo > base.to:
            return None
        frm = base.src_from
        end = next((b for a, b in covered if a <= base.src_from and base.to <= b), base.to)
    to = min(end, hi)
    return (frm, to) if to > (base.to if base is not None else frm) else None


def _ranges(ranges: list[tuple[int, int]]) -> str:
    return ", ".join(f"{a}..{b}" for a, b in ranges) or "nothing"
