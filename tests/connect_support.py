"""A Spark Connect server for tests of the `connect` copy mode (import the fixture into a test module)."""
from __future__ import annotations

import pytest
import yaml

from mirrorflow import config as config_mod
from mirrorflow_dev.spark import DevSparkServer


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """One Spark Connect server (local[2]) for the session (registered in tests/conftest.py: its start
    is one of the suite's dearest set-ups), tied to the pytest process, stopped at the end."""
    server = DevSparkServer(tmp_path_factory.mktemp("spark-home"))
    # a free port, not Connect's default: each pytest-xdist worker has a server of its own
    s = server.up(master="local[2]", port=0, attached=True)
    try:
        yield s
    finally:
        server.down()


def with_remote(cfg, remote: str):
    """The same config file with spark.remote set (what a user writes to select connect mode)."""
    raw = yaml.safe_load(cfg.path.read_text())
    raw.setdefault("spark", {})["remote"] = remote
    cfg.path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return config_mod.load(cfg.path)
