"""The one error of the development harness (a MirrorflowError: the CLI prints it as one message)."""

from __future__ import annotations

from mirrorflow.errors import MirrorflowError


class DevClusterError(MirrorflowError):
    """A local cluster or server could not be set up, started or stopped."""
