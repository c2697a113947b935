"""A failover while a continuous run holds the flow's lease: without the operator's
confirmation it stops, naming `--take-over` and nothing changed; with `--take-over` it takes the
lease, fences the flow's copies and commits, and the continuous run -- still alive, its state check
60 s away -- writes no record and no progress after the failover, although its source gets new
records; it ends fenced. The history says who took the flow from whom."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from mirrorflow.clients import FlowClients
from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.state.flow_state import flow_state
from mirrorflow.state.history import read_history
from mirrorflow.state.lease import current_holder
from tests.integration.test_failover import commit, first_record_after_resume
from tests.integration.test_replicate import CLI, cli, records
from tests.support import consume_all, create_topic, produce, read_progress, write_config

pytestmark = pytest.mark.integration


def test_a_failover_takes_the_flow_over_from_a_continuous_run_that_then_writes_nothing(tmp_path, source, target,
                                                                                      unique):
    pfx = unique("dtk")
    topic, group = f"{pfx}.orders", f"{pfx}-app"
    remote = f"KT.{topic}"
    # source alias KT: a flow of its own (KT->B; the fencing would count the partitions of test_backfill's K->B);
    # a lease that does not lapse during the test, and a state check the run would only make after the test:
    # only the take-over can stop it
    cfg = write_config(tmp_path / "mf.yaml", {"KT": source, "B": target}, {"KT->B": {
        "topics": f"{pfx}\\..*", "groups": f"{pfx}-.*", "state.topic.partitions": 2,
        "heartbeats.replication.enabled": False, "lease.timeout.seconds": 120,
        "continuous.state.check.seconds": 600}})
    flow = cfg.flow("KT->B")
    create_topic(source, topic, 1)
    assert sync_flow(cfg, flow, ["topics"]).ok
    produce(source, topic, records(20, 1))
    run = subprocess.Popen([*CLI, "--config", str(cfg.path), "replicate", "--flow", "KT->B", "--continuous",
                            "--seconds", "300", "--mode", "direct"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        deadline = time.monotonic() + 120
        while len(consume_all(target, remote)) < 20 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(consume_all(target, remote)) == 20
        commit(source, group, topic, {0: 7})
        assert group in emit_checkpoints(cfg, flow).groups
        with FlowClients(cfg, flow) as clients:
            held = current_holder(clients)
        assert held is not None and held.who.startswith("mirrorflow replicate --continuous --mode direct by ")

        # a drill (the failover's dry preflight) with the flow running: it only says a take-over is needed
        drill = cli(cfg, "drill", "--flow", "KT->B", "--verify-from", "latest", check=False)
        assert drill.returncode == 0, drill.stdout[-2000:] + drill.stderr[-2000:]
        dry = json.loads(cli(cfg, "failover", "--flow", "KT->B", "--dry-run", "--json").stdout)
        assert dry["take_over"].startswith("needed to fail over now (--take-over, Param take_over): the flow is held "
                                           f"by the run holding its lease, {held.who} since "), dry["take_over"]

        refused = cli(cfg, "failover", "--flow", "KT->B", "--yes", check=False)
        assert refused.returncode == 75, refused.stderr[-2000:]
        assert f"failover of KT->B: flow KT->B is being replicated by {held.who} since " in refused.stderr
        assert "run the failover again with --take-over (in Airflow: the failover DAG's Param take_over)" in \
            refused.stderr
        with FlowClients(cfg, flow) as clients:
            assert flow_state(clients).state == "running" and current_holder(clients).who == held.who

        out = json.loads(cli(cfg, "failover", "--flow", "KT->B", "--take-over", "--yes", "--json").stdout)
        assert out["done"] is True, out
        assert out["take_over"].startswith(f"took flow KT->B over for the failover of plan {out['plan_id']}: took "
                                           f"its lease from {held.who} (held since "), out["take_over"]
        assert out["take_over"].endswith("fenced the copy transactions of 1 partition(s) on 'B'")
        progress = read_progress(cfg, flow, [(topic, 0)])[(topic, 0)]
        assert progress.next == 20

        # the source gets new records: the continuous run, alive and following, must not copy them
        produce(source, topic, records(10, 1, seed="after"))
        stdout, stderr = run.communicate(timeout=120)  # it ends: its next commit is fenced
        assert "fenced" in stdout + stderr, (stdout[-2000:], stderr[-2000:])
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    time.sleep(2)
    assert [r.content() for r in consume_all(target, remote)] == [r.content() for r in consume_all(source, topic)[:20]]
    assert read_progress(cfg, flow, [(topic, 0)])[(topic, 0)] == progress  # no progress written either
    _, msg = first_record_after_resume(target, group, remote, 0)
    want = consume_all(source, topic)[7]
    assert (msg.key(), msg.value()) == (want.key, want.value)
    with FlowClients(cfg, flow) as clients:
        assert flow_state(clients).state == "stopped"
        kinds = [(h.kind, h.summary) for h in read_history(clients, 5)]
    assert ("failover", out["take_over"]) in kinds, kinds
