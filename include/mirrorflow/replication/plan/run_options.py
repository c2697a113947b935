"""What one run may be narrowed to: the CLI's flags, the replicate DAG's Params."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunOptions:
    """What one run may be narrowed to (CLI flags, the replicate DAG's Params)."""

    topics: str | None = None  # only the flow's source topics this regex fully matches
    partition_limit: int | None = None  # at most this many offsets per partition in this run
    dry_run: bool = False  # plan and report what would be copied; copy nothing
    on_plan: Callable[[Any], None] | None = None  # told the plan before the copy (the CLI's progress bar)
