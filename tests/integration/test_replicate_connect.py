"""The `connect` copy mode end to end: a real Spark Connect server (dev spark), real brokers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mirrorflow.replication.runner import run_once
from tests.connect_support import with_remote
from tests.integration.replicate_helpers import assert_copied, assert_map_exact, make_flow, mirror_topic
from tests.support import produce, read_progress

pytestmark = pytest.mark.integration

CLI = [os.path.join(os.path.dirname(sys.executable), "mirrorflow")]


def rows(n: int, partitions: int, seed: str) -> list[dict]:
    return [
        {
            "partition": i % partitions,
            "key": f"k{i}".encode(),
            "value": f"{seed}-{i}".encode(),
            "headers": [("h", f"{i}".encode())] if i % 2 else None,
        }
        for i in range(n)
    ]


def replicate_cli(cfg) -> dict:
    proc = subprocess.run(
        [*CLI, "--config", str(cfg.path), "replicate", "--flow", "A->B", "--once", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_connect_mode_copies_exactly_across_two_runs(tmp_path, source, target, unique, connect_server):
    pfx = unique("connect")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 3)
    produce(source, t, rows(90, 3, "first"))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"tasks.max": 3})
    cfg = with_remote(cfg, connect_server.remote)

    out = replicate_cli(cfg)  # spark.remote set: the CLI's default mode is connect
    assert out["ok"] and out["records"] == 90 and out["lag"] == 0, out
    assert_copied(source, target, t)
    prog = read_progress(cfg, flow, [(t, p) for p in range(3)])
    assert {k: v.next for k, v in prog.items()} == {(t, p): 30 for p in range(3)}

    produce(source, t, rows(12, 3, "second"))
    out = replicate_cli(cfg)  # the same server and session again: only the new records
    assert out["ok"] and out["records"] == 12 and out["lag"] == 0, out
    assert_copied(source, target, t)
    assert_map_exact(cfg, flow, source, target, t, 3)
    prog = read_progress(cfg, flow, [(t, p) for p in range(3)])
    assert {k: v.next for k, v in prog.items()} == {(t, p): 34 for p in range(3)}

    rep = run_once(cfg, flow, mode="connect")  # nothing new: no job at all
    assert rep.ok and rep.records == 0 and rep.units == 0


def test_connect_mode_unreachable_server_is_a_clear_error(tmp_path, source, target, unique):
    from mirrorflow.errors import MirrorflowError
    from mirrorflow.dev.cluster import free_port

    pfx = unique("noconnect")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 1)
    produce(source, t, rows(3, 1, "x"))
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    remote = f"sc://127.0.0.1:{free_port()}"
    cfg = with_remote(cfg, remote)
    with pytest.raises(MirrorflowError, match=r"Spark Connect .*127\.0\.0\.1"):
        run_once(cfg, flow, mode="connect")
    # nothing was copied, and the lease is free again: a direct run copies the 3 records
    rep = run_once(cfg, flow, mode="direct")
    assert rep.records == 3
    assert_copied(source, target, t)
