"""The run directory holds plans the copy job executes: by default it is private to the user."""
from __future__ import annotations

import os
import tempfile

import pytest

from mirrorflow.config import parse
from mirrorflow.errors import MirrorflowError
from mirrorflow.replication.run.runner import run_dir

FLOW = parse({"clusters": {"A": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"}},
              "flows": {"A->B": {}}}).flow("A->B")


@pytest.fixture
def tmp_base(tmp_path, monkeypatch):
    monkeypatch.delenv("MIRRORFLOW_RUN_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path / f"mirrorflow-runs-{os.getuid()}"


def test_the_default_base_is_created_private(tmp_base):
    d = run_dir(FLOW, "r1")
    assert d == tmp_base / "A-B" / "r1" and d.is_dir()
    assert tmp_base.stat().st_mode & 0o777 == 0o700


def test_a_base_others_can_write_is_refused(tmp_base):
    tmp_base.mkdir(mode=0o777)
    os.chmod(tmp_base, 0o777)  # as another user could have made it
    with pytest.raises(MirrorflowError, match="is not private to this user"):
        run_dir(FLOW, "r1")
    assert not (tmp_base / "A-B").exists()


def test_an_explicit_base_is_used_as_given(tmp_path, monkeypatch):
    monkeypatch.setenv("MIRRORFLOW_RUN_DIR", str(tmp_path / "runs"))
    assert run_dir(FLOW, "r2") == tmp_path / "runs" / "A-B" / "r2"
