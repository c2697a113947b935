"""The harness's command groups for the `mirrorflow` CLI (`dev`, `demo`), registered through the
`mirrorflow.commands` entry point group: loading a module registers its commands."""
