"""Beyond one machine: `replicate --once` on a real Spark standalone cluster (a master and two
workers from PySpark's own classes, on loopback); the package reaches the executors as --py-files."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mirrorflow_dev.spark import DevStandalone
from tests.integration.replicate_helpers import assert_copied, assert_map_exact, make_flow, mirror_topic
from tests.support import produce, read_progress

pytestmark = pytest.mark.integration

CLI = [os.path.join(os.path.dirname(sys.executable), "mirrorflow")]


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    dev = DevStandalone(tmp_path_factory.mktemp("spark-standalone"))
    cluster = dev.up(workers=2, cores=1, memory="1g")
    try:
        yield cluster
    finally:
        dev.down(cluster)


def test_replicate_once_on_a_standalone_cluster(tmp_path, source, target, unique, standalone):
    pfx = unique("standalone")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 4)
    produce(source, t, [{"partition": i % 4, "key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(80)])
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"tasks.max": 2})
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run(
        [
            *CLI,
            "--config",
            str(cfg.path),
            "replicate",
            "--flow",
            "A->B",
            "--once",
            "--json",
            "--master",
            standalone.master,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["ok"] and out["records"] == 80 and out["lag"] == 0, out
    assert_copied(source, target, t)
    assert_map_exact(cfg, flow, source, target, t, 4)
    prog = read_progress(cfg, flow, [(t, p) for p in range(4)])
    assert {k: v.next for k, v in prog.items()} == {(t, p): 20 for p in range(4)}
    # the job ran in executors on the workers (each worker keeps its app's stderr), not in the driver
    work = [os.path.join(standalone.home, f"worker-{i}") for i in range(2)]
    app_dirs = [os.path.join(w, d) for w in work for d in os.listdir(w) if d.startswith("app-")]
    assert app_dirs, "no application ran on the workers"
