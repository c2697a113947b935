"""The inputs of the operations of this package's own modules (`replicate` and `backfill`, the runs of a
flow; `reseed`), declared once for the CLI's flags, the DAG's trigger form and the check of a value
(mirrorflow.params). A module of its own, with no import beyond `params` and the pure parts of a run's
options (a WHEN, `RunOptions`): the DAG files read it when they are parsed, which must not load the
operations."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mirrorflow.params import Field, checked, named
from mirrorflow.replication.plan.run_options import RunOptions
from mirrorflow.replication.plan.when import WHEN_HELP, WHEN_PATTERN, When, check_range

TOPICS = Field(
    "topics",
    "Topics (regex)",
    "only the flow's SOURCE topics this regex fully matches (empty: every topic of the flow)",
    "regex",
)

REPLICATE = (
    TOPICS,
    Field(
        "max_records_per_partition",
        "Max records per partition",
        "copy at most this many offsets of each partition in this run (the next run continues from there; not "
        "in a continuous run); empty: no limit beyond the flow's own",
        "count",
        minimum=1,
    ),
    Field(
        "dry_run",
        "Dry run",
        "plan and report what would be copied; copy nothing (a continuous run then ends)",
        "flag",
    ),
)

# the CLI must be told the range; the form suggests one (`default`)
BACKFILL = (
    TOPICS,
    Field("from", "From", f"range start: {WHEN_HELP}", "text", default="earliest", required=True, pattern=WHEN_PATTERN),
    Field(
        "to", "To", f"range end, exclusive: {WHEN_HELP}", "text", default="start", required=True, pattern=WHEN_PATTERN
    ),
    Field("dry_run", "Dry run", "only report per partition the range and records it would copy; copy nothing", "flag"),
)

RESEED = (
    Field("topic", "Source topic", "the SOURCE topic to re-seed", "text", required=True),
    Field(
        "force",
        "Force",
        "re-seed although no partition of the topic needs it (its state still describes the topic): the records "
        "the flow copied are copied again, after what the target holds (duplicates there)",
        "flag",
    ),
)


def run_options(
    values: Mapping[str, Any] | None, via: str = "cli", on_plan: Callable[[Any], None] | None = None
) -> RunOptions:
    """A replicate run's options from what a door handed over (the CLI's flags, the DAG's Params), checked:
    ConfigError naming each bad value as the door calls it."""
    v = checked(REPLICATE, values or {}, via)
    return RunOptions(v["topics"], v["max_records_per_partition"], bool(v["dry_run"]), on_plan)


def backfill_inputs(values: Mapping[str, Any] | None, via: str = "cli") -> tuple[When, When, RunOptions]:
    """A backfill's range [from, to) and options from what a door handed over, checked (ConfigError
    naming each bad value as the door calls it, before any cluster is asked)."""
    v = checked(BACKFILL, values or {}, via)
    lo, hi = When.parse(v["from"], named("from", via)), When.parse(v["to"], named("to", via))
    check_range(lo, hi, named("from", via), named("to", via))
    return lo, hi, RunOptions(v["topics"], None, bool(v["dry_run"]))
