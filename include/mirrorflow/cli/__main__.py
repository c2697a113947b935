"""`python -m mirrorflow.cli`."""

from mirrorflow.cli import run

run()
