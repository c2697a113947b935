"""Plain-text tables for translated group offsets (`mirrorflow translate`, `mirrorflow checkpoint`)."""
from __future__ import annotations

from typing import Iterable, Sequence

from mirrorflow.groups.checkpoint import TranslatedOffset

STATUS_NOTES = {
    "exact": "resumes at the next unread record",
    "end": "caught up: resumes at the end of the copied data",
    "ahead": "not yet replicated: the target has not received the missing records yet",
    "before": "the missing records were never replicated (source retention / initial position)",
    "gap": "the missing offsets were never copied (deleted before copy)",
    "none": "nothing copied yet for this partition: no checkpoint",
    "not-replicated": "the flow does not replicate this topic",
}


def render_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Left-aligned columns, numbers right-aligned, '-' for None."""
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [all(r[i].lstrip("-").isdigit() or r[i] == "-" for r in cells) and bool(cells) for i in range(len(headers))]

    def fmt(row: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(row, widths, numeric)).rstrip()

    lines = [fmt(list(headers)), fmt(["-" * w for w in widths])]
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)


TRANSLATION_HEADERS = ("source topic", "partition", "source offset", "target topic", "target offset",
                       "status", "missing")


def translation_table(rows: Iterable[TranslatedOffset], actions: Sequence[str] | None = None) -> str:
    """One line per partition: where the group is on the source and where it resumes on the target."""
    rows = list(rows)
    headers = list(TRANSLATION_HEADERS) + (["checkpoint"] if actions is not None else [])
    body = []
    for i, r in enumerate(rows):
        line: list[object] = [r.source_topic, r.partition, r.source_offset, r.target_topic, r.target_offset,
                              r.status, r.missing]
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
