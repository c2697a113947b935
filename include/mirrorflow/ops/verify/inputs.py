"""The inputs of verify, declared once for the CLI's flags, the DAG's trigger form and the check of a value
(mirrorflow.params). A module of its own, with no import beyond `params` and the pure WHEN of a range: the
DAG file reads it when it is parsed, which must not load the operation."""

from __future__ import annotations

from mirrorflow.params import Field
from mirrorflow.replication.plan.when import WHEN_HELP, WHEN_PATTERN

VERIFY = (
    Field(
        "topics", "Topics (regex)", "only SOURCE topics matching this regex (empty: every topic of the flow)", "regex"
    ),
    Field("from", "From", f"window start: {WHEN_HELP}", "text", default="earliest", pattern=WHEN_PATTERN),
    Field("to", "To", f"window end, exclusive: {WHEN_HELP}", "text", default="latest", pattern=WHEN_PATTERN),
    Field(
        "since_last",
        "Since the last verify",
        "check each partition only from where the last verify that passed got to (its stored 'verified up to'; "
        "from the start where there is none or it no longer describes the partition; not with a window start), "
        "and record how far this one gets",
        "flag",
    ),
    Field(
        "record",
        "Record",
        "record on the target, per partition that matches, how far it is verified, so that a later verify since "
        "the last one (or a planned failover) starts there",
        "flag",
    ),
)
