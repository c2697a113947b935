"""Records a failback kept apart on its reverse flow's target: the divergence and split brain of the
failed-over flow's source (ops.dr.failback), never copied, never deleted. The latest failback record
carries the earlier ones' (`kept_earlier`), so it alone says every range kept on the flow's target.
Verify counts them as kept (not `extra`); the planner copies a partition the reverse flow's source gets
only after the failback (no progress yet) after them, instead of stopping it as state lost."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.state.flow_state import read_control
from mirrorflow.state.offset_map import merge_ranges

Key = tuple[str, int]


KINDS = ("kept_earlier", "divergence", "split_brain")


def kept_ranges(record: Mapping[str, Any] | None, kinds: tuple[str, ...] = KINDS) -> dict[Key, list[tuple[int, int]]]:
    """Per (topic, partition) of the flow's target, the merged offset ranges a failback record says
    are kept there: of `kinds`, by default all (its divergence and split brain, and the earlier
    failbacks' `kept_earlier`)."""
    rec = record or {}
    out: dict[Key, list[tuple[int, int]]] = {}
    for d in [x for kind in kinds for x in rec.get(kind) or []]:
        out.setdefault((str(d["topic"]), int(d["partition"])), []).extend((int(a), int(b)) for a, b in d["ranges"])
    return {k: merge_ranges(v) for k, v in out.items()}


def kept_on_target(clients: FlowClients) -> dict[Key, list[tuple[int, int]]]:
    """The ranges the failback that started `clients`' flow (and those before it) kept on its target."""
    return kept_ranges(read_control(clients, "failback"))
