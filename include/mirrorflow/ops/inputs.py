"""The inputs of the operations of this package's own modules (`reseed`), declared once for the CLI's
flags, the DAG's trigger form and the check of a value (mirrorflow.params). A module of its own, with no
import beyond `params`: the DAG files read it when they are parsed, which must not load the operations."""

from __future__ import annotations

from mirrorflow.params import Field

RESEED = (Field("topic", "Source topic", "the SOURCE topic to re-seed", "text", required=True),)
