"""The CLI refuses a flag that cannot apply (replicate, acls, reseed, flow) with one error naming it, before any
config is read or cluster reached (the config file here does not exist: reading it would fail
differently)."""
from __future__ import annotations

import pytest

from mirrorflow.cli import main


@pytest.mark.parametrize("flags,error", [
    (["--seconds", "5"], "--seconds: how long a continuous run copies: only with --continuous"),
    (["--once", "--seconds", "5"], "--seconds: how long a continuous run copies: only with --continuous"),
    (["--once", "--continuous"], "--once: one run or a continuous run: give --once or --continuous, not both"),
    (["--continuous", "--max-records-per-partition", "10"],
     "--max-records-per-partition: caps a one-shot run; a continuous run follows every partition until its "
     "deadline"),
])
def test_replicate_refuses_flags_that_cannot_apply(flags, error, tmp_path, capsys):
    missing = tmp_path / "no-such-config.yaml"
    assert main(["--config", str(missing), "replicate", "--flow", "A->B", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mirrorflow: error: {error}"), err
    assert str(missing) not in err


@pytest.mark.parametrize("argv,error", [
    (["acls", "--flow", "A->B", "--offline", "--apply"],
     "--offline: prints what is needed without asking the clusters: not with --apply"),
    (["acls", "--flow", "A->B", "--offline", "--target-admin", "Badmin"],
     "--offline: prints what is needed without asking the clusters: not with --target-admin"),
    (["reseed", "--flow", "A->B", "--topic", "t", "--dry-run", "--yes"],
     "--yes: writes the re-seed; --dry-run writes nothing: give one of them"),
    (["flow", "list", "--flow", "A->B"], "--flow: `mirrorflow flow list` lists every flow: it takes no --flow"),
    (["flow", "list", "--reason", "why"], "--reason: `mirrorflow flow list` lists every flow: it takes no --flow"),
    (["flow", "pause", "--flow", "A->B", "--force"], "--force: only with `mirrorflow flow resume`, not pause"),
])
def test_other_commands_refuse_flags_they_would_ignore(argv, error, tmp_path, capsys):
    assert main(["--config", str(tmp_path / "no-such-config.yaml"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mirrorflow: error: {error}"), err
