"""The inputs of the failover, the failback (ops.dr.gated) and the drill, declared once for the CLI's flags, the
DAG's trigger form and the check of a value (mirrorflow.params). A module of its own, with no import
beyond `params`: the DAG files read it when they are parsed, which must not load the operations."""

from __future__ import annotations

from mirrorflow.params import Field

FAILOVER = (
    Field(
        "mode",
        "Mode",
        "unplanned (default): the source is lost, everything comes from the target; planned: the source is up "
        "(stop its producers first): drain it, then switch",
        "choice",
        default="unplanned",
        choices=("unplanned", "planned"),
    ),
    Field(
        "groups",
        "Groups (regex)",
        "only the groups matching this regex (empty: every group the flow checkpoints); on a flow already failed "
        "over: move the groups it left alone (or did not choose) that match",
        "regex",
    ),
    Field(
        "max_lag",
        "Max lag (planned)",
        "planned mode: go on when the drain leaves at most this many offsets not replicated in all (empty: the "
        "drain must reach lag 0, else nothing changes)",
        "count",
        minimum=0,
    ),
    Field(
        "take_over",
        "Take over",
        "take the flow over from a run that holds its lease (e.g. a continuous run riding out the outage, a run of "
        "the other site's Airflow) or from another deployment (deployment.id) that owns its state: the commit "
        "(planned: the drain) takes the lease from it, fences the flow's copy transactions on the target so that "
        "run can never write there again, makes this deployment the flow's owner, and records who took the flow "
        "from whom in the operations history. Without it such a failover stops, naming the holder",
        "flag",
    ),
)

FAILBACK = (
    Field(
        "reseed",
        "Source rebuilt (reseed)",
        "the source was rebuilt empty: the reverse flow copies all of the target's topics from their start "
        "(refused if the source's topics hold records)",
        "flag",
    ),
    Field(
        "accept_loss",
        "Accept what the target lost",
        "start even though the target no longer holds records the failback would copy (deleted by retention, "
        "removed by compaction) or cannot tell them from the failed-over flow's (a topic recreated, a partition "
        "truncated): the plan counts and names them; without this such a plan is not started",
        "flag",
    ),
)

DRILL = (
    Field(
        "groups",
        "Groups (regex)",
        "only the groups matching this regex (empty: every group the flow checkpoints)",
        "regex",
    ),
    Field(
        "verify_from",
        "Verify from",
        "verify the records from here on: a duration back from now (90s, 15m, 1h, 2d), earliest, offset:N or an "
        "ISO-8601 time with a zone; latest: no verify (empty: the last hour)",
        "text",
    ),
    Field(
        "shadow_suffix",
        "Shadow group suffix",
        "commit where each group would resume to the shadow group <group><suffix> on the target (never the real "
        "groups), so an application can be started against the target (empty: no shadow groups)",
        "text",
        blank="the shadow groups would be the real groups",
    ),
)
