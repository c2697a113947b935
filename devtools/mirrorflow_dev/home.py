"""The harness's home folder: every local server's data, logs and state file live under it."""

from __future__ import annotations

import os
from pathlib import Path

from mirrorflow.config import project_dir


def dev_home(home: Path | str | None = None) -> Path:
    """`home`, else $MIRRORFLOW_DEV_HOME, else `.mirrorflow/dev` of the project."""
    return Path(home or os.environ.get("MIRRORFLOW_DEV_HOME") or project_dir() / ".mirrorflow" / "dev")
