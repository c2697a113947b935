"""The `connect` copy mode end to end: a real Spark Connect server (dev spark), real brokers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow_dev.spark import DevSparkServer
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.lease import current_holder
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


def replicate_cli(cfg, imported: list[str] | None = None) -> dict:
    """`mirrorflow replicate --once --json` as a process; `imported` gets the modules it imported."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"} if imported is not None else dict(os.environ)
    proc = subprocess.run(
        [*CLI, "--config", str(cfg.path), "replicate", "--flow", "A->B", "--once", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    if imported is not None:
        imported += [line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
                     if line.startswith("import time:") and "|" in line]
    return json.loads(proc.stdout)


def test_connect_mode_copies_exactly_across_two_runs(tmp_path, source, target, unique, connect_server):
    pfx = unique("connect")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 3)
    produce(source, t, rows(90, 3, "first"))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"tasks.max": 3})
    cfg = with_remote(cfg, connect_server.remote)

    imported: list[str] = []
    out = replicate_cli(cfg, imported)  # spark.remote set: the CLI's default mode is connect
    assert out["ok"] and out["records"] == 90 and out["lag"] == 0, out
    assert "pyspark.sql.connect.session" in imported
    assert_copied(source, target, t)
    prog = read_progress(cfg, flow, [(t, p) for p in range(3)])
    assert {k: v.next for k, v in prog.items()} == {(t, p): 30 for p in range(3)}

    produce(source, t, rows(12, 3, "second"))
    said: list[str] = []
    rep = run_once(cfg, flow, mode="connect", log=said.append)  # the same server and session: only the new records
    assert rep.ok and rep.records == 12 and rep.lag == 0, rep
    # the server (local[2]) states its 2 slots: the 3 planned tasks ran in 2 Spark tasks, one of them
    # copying two planned tasks at once (task_copier.copy_together); the copy is exact all the same
    assert any("unit results from 3 tasks (2 Spark tasks)" in line for line in said), said
    assert_copied(source, target, t)
    assert_map_exact(cfg, flow, source, target, t, 3)
    prog = read_progress(cfg, flow, [(t, p) for p in range(3)])
    assert {k: v.next for k, v in prog.items()} == {(t, p): 34 for p in range(3)}

    rep = run_once(cfg, flow, mode="connect")  # nothing new: no job at all
    assert rep.ok and rep.records == 0 and rep.units == 0
    imported.clear()  # nor the Connect client's imports (PySpark, pandas, pyarrow: ~0.8 s of CPU)
    out = replicate_cli(cfg, imported)
    assert out["ok"] and out["records"] == 0 and out["units"] == 0, out
    assert "mirrorflow.replication.run.run" in imported and not [m for m in imported if m.startswith("pyspark")]


def test_connect_mode_unreachable_server_is_a_clear_error(tmp_path, source, target, unique):
    from mirrorflow.errors import MirrorflowError
    from mirrorflow_dev.processes import free_port

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


def test_a_connect_server_killed_mid_run_fails_the_run_naming_it_and_the_next_run_continues_exactly(
        tmp_path, source, target, unique, monkeypatch, connect_server):
    """The server of spark.remote is SIGKILLed while its job copies (a crash, not a clean stop): the run
    fails within the client's bounded retries naming the server, nothing it had not committed is
    marked done, the lease is free at once; on a server that is up (the session's), the next run
    copies exactly the rest."""
    pfx = unique("gone")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 2)
    produce(source, t, rows(300, 2, "r"))
    # one task, one partition at a time, transactions of 50: the job commits 50 records of partition 0
    # and then stops there (MIRRORFLOW_TEST_HANG, read by the server's Python workers) until killed;
    # a lease that is not released would be held for 10 minutes, not lapse in a second
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{
        "tasks.max": 1, "task.partitions.in.flight": 1, "transaction.max.records": 50,
        "lease.timeout.seconds": 600})
    marker = tmp_path / "hung-once"
    server = DevSparkServer(tmp_path / "spark-home")
    with monkeypatch.context() as m:
        m.setenv("MIRRORFLOW_TEST_HANG", "after_commit")
        m.setenv("MIRRORFLOW_TEST_CRASH_ONCE", str(marker))  # the restarted server's workers go on
        s = server.up(master="local[1]", port=0, attached=True)
    try:
        cfg = with_remote(cfg, s.remote)
        proc = subprocess.Popen([*CLI, "--config", str(cfg.path), "replicate", "--flow", "A->B", "--once"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while not marker.exists():  # the job's first transaction is committed; it hangs after it
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the copy job never reached its first commit"
            time.sleep(0.2)
        os.killpg(s.pid, signal.SIGKILL)  # the server, its executors and Python workers
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=300)
        print(f"the run failed {time.monotonic() - t0:.1f} s after the server was killed")
        assert proc.returncode == 1, (out, err)
        assert f"the Spark Connect server {s.remote} (spark.remote) went away during the copy job" in err, err
        assert "the units it had not committed are not marked done" in err
        assert "Rendezvous" not in err and "RETRIES_EXCEEDED" not in err, err  # one readable line, said once
        assert read_progress(cfg, flow, [(t, 0), (t, 1)])[(t, 0)].next == 50  # the committed transaction only
        assert (t, 1) not in read_progress(cfg, flow, [(t, 0), (t, 1)])
        with FlowClients(cfg, flow) as clients:
            assert current_holder(clients) is None  # released by the failed run, not left to its timeout

        with_remote(cfg, connect_server.remote)  # a server that is up (a second start here would cost ~30 s)
        out = replicate_cli(cfg)
        assert out["ok"] and out["records"] == 250 and out["lag"] == 0, out
        assert_copied(source, target, t)
        assert_map_exact(cfg, flow, source, target, t, 2)
    finally:
        server.down()


def test_a_killed_clis_connect_job_is_interrupted_by_the_next_run_and_never_blocks_it(
        tmp_path, source, target, unique, connect_server):
    """`kill -9` of a continuous `mirrorflow replicate` (an OOM kill of the CLI): its job follows on
    without it on the session's Spark Connect server, holding both of the server's task slots (it
    would until its deadline, an hour away). The next run takes the flow at once (the holder's
    process is gone), fences the flow's copy tasks and interrupts the flow's job on the server
    before starting its own: it copies the new records itself, each once, instead of waiting for
    slots the killed run's job holds (whichever copies the new records, each is on the target once)."""
    pfx = unique("killcli")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 2)
    produce(source, t, rows(40, 2, "before"))
    cfg, flow = make_flow(tmp_path, source, target, pfx, **{"tasks.max": 2, "lease.timeout.seconds": 600})
    cfg = with_remote(cfg, connect_server.remote)
    proc = subprocess.Popen([*CLI, "--config", str(cfg.path), "replicate", "--flow", "A->B", "--continuous",
                             "--seconds", "3600"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while sum(p.next for p in read_progress(cfg, flow, [(t, 0), (t, 1)]).values()) < 40:
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the continuous run never copied its first records"
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the CLI; its job on the server is in no process of ours
        proc.wait(30)
    produce(source, t, rows(30, 2, "after"))
    out = replicate_cli(cfg)  # within its 300 s timeout: never waits for the killed run's job
    assert out["ok"] and out["lag"] == 0, out
    assert_copied(source, target, t)
    assert_map_exact(cfg, flow, source, target, t, 2)
    with FlowClients(cfg, flow) as clients:
        assert current_holder(clients) is None
