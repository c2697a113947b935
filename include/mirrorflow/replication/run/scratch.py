"""The scratch directory of a run: where a process keeps its copy of a run's plan, results and report.

One policy for the CLI and the Airflow copy task: a run's files live under the runs base --
$MIRRORFLOW_RUN_DIR, else a base private to this user (<tmp>/mirrorflow-runs-<uid>, mode 0700: in a
shared base another local user could plant a plan or a config for the copy job to read) -- in
`<base>/<flow id>/<run>`. They are only this process's copy: plan and results travel without a
shared disk (replication.executors.handoff). They are kept when asked for (an explicit directory,
$MIRRORFLOW_RUN_DIR, $MIRRORFLOW_KEEP_RUNS) or when the run failed, else removed at its end.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from mirrorflow.config import FlowConfig
from mirrorflow.errors import MirrorflowError


def runs_base() -> Path:
    """$MIRRORFLOW_RUN_DIR, else this user's private base (created; refused when not private)."""
    explicit = os.environ.get("MIRRORFLOW_RUN_DIR")
    if explicit:
        Path(explicit).mkdir(parents=True, exist_ok=True)
        return Path(explicit)
    base = Path(tempfile.gettempdir()) / f"mirrorflow-runs-{os.getuid()}"
    base.mkdir(mode=0o700, exist_ok=True)
    st = base.lstat()
    if base.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise MirrorflowError(
            f"the run directory {base} is not private to this user (owner uid {st.st_uid}, mode "
            f"{oct(st.st_mode & 0o777)}): remove it, or set MIRRORFLOW_RUN_DIR"
        )
    return base


def run_dir(flow: FlowConfig, run_id: str | None = None) -> Path:
    """A new directory for one run of `flow` under the runs base."""
    d = runs_base() / flow.id / (run_id or time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}")
    d.mkdir(parents=True, exist_ok=True)
    return d


@dataclass(frozen=True)
class Scratch:
    """A run's scratch directory and whether its files are kept after a run that went well."""

    path: Path
    keep: bool

    @classmethod
    def of(cls, flow: FlowConfig, directory: Path | None = None) -> Scratch:
        keep = directory is not None or bool(
            os.environ.get("MIRRORFLOW_RUN_DIR") or os.environ.get("MIRRORFLOW_KEEP_RUNS")
        )
        path = directory or run_dir(flow)
        path.mkdir(parents=True, exist_ok=True)
        return cls(path, keep)

    @classmethod
    def for_task(cls, purpose: str) -> Scratch:
        """A new directory private to one Airflow task (mode 0700) under the runs base; removed at
        the task's end unless $MIRRORFLOW_KEEP_RUNS (a task's files never serve another task)."""
        return cls(
            Path(tempfile.mkdtemp(prefix=f"mirrorflow-{purpose}-", dir=runs_base())),
            bool(os.environ.get("MIRRORFLOW_KEEP_RUNS")),
        )

    def done(self, ok: bool = True) -> None:
        """The run ended: its files go unless kept (or the run failed)."""
        if ok and not self.keep:
            shutil.rmtree(self.path, ignore_errors=True)
