"""The take-over's inputs, declared once for the CLI's flags, the DAG's trigger form and the check of a
value (mirrorflow.params). A module of its own, with no import beyond `params`: the DAG files read it
when they are parsed, which must not load the operation."""

from __future__ import annotations

from mirrorflow.params import Field

QUIET_S = 30.0  # no heartbeat from MM2 for this long: it is stopped (it beats every second by default)

TAKEOVER = (
    Field(
        "mm2_offsets_topic",
        "MM2 offsets topic",
        "MM2's Connect offsets topic on the target: the worker's offset.storage.topic (empty: dedicated mode's "
        "mm2-offsets.<source>.internal; Strimzi: mirrormaker2-cluster-offsets)",
        "text",
        aliases=("--offsets-topic",),
    ),
    Field(
        "mm2_connector",
        "MM2 source connector",
        "the MirrorSourceConnector's name in Connect (e.g. A-to-B-MirrorSourceConnector; Strimzi: "
        "A->B.MirrorSourceConnector; empty: the only one with offsets for the source in the offsets topic)",
        "text",
        aliases=("--connector",),
    ),
    Field(
        "mm2_source",
        "MM2 source alias",
        "the source cluster's alias in MM2's config (empty: the flow's source)",
        "text",
    ),
    Field(
        "mm2_quiet_seconds",
        "MM2 quiet seconds",
        "MM2 counts as stopped when its heartbeat into the target is older than this many seconds (default 30)",
        "number",
        default=QUIET_S,
        minimum=0,
    ),
)
