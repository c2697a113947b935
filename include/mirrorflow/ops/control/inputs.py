"""The inputs of a flow's pause, resume and stop, declared once for the CLI (`mirrorflow flow ACTION`), the
control DAG's trigger form and the check of a value (mirrorflow.params). A module of its own, with no import
beyond `params`: the DAG file reads it when it is parsed, which must not load the operation."""

from __future__ import annotations

from mirrorflow.params import Field

ACTION = Field(
    "action",
    "Action",
    "pause: no copy or topic sync (checkpoints go on); stop: nothing runs; resume: run again",
    "choice",
    default="pause",
    choices=("pause", "resume", "stop"),
)
REASON = Field("reason", "Reason", "why (recorded in the flow's history, shown by status and in skipped runs)", "text")
FORCE = Field(
    "force",
    "Force a resume after a failover",
    "resume also a flow its failover stopped, when its applications never moved (otherwise its failback is the "
    "way back: a resume copies what the source accepted since the failover)",
    "flag",
)
CONTROL = (ACTION, REASON, FORCE)
