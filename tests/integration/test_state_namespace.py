"""Several mirrorflow deployments on one target: `state.namespace` keeps their
state topics, transactional ids and reader groups apart; a second deployment on the same flow's
state is refused by the lease, naming both deployments."""

from __future__ import annotations

import pytest

from mirrorflow.errors import DeploymentConflictError, LeaseError
from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.replication.run.runner import run_once
from mirrorflow.state.names import lease_topic, offset_map_topic, progress_topic, runs_topic, transactional_id
from tests.integration.replicate_helpers import target_offset_of
from tests.integration.test_replicate import cli
from tests.integration.test_topologies import commit, records
from tests.support import admin, consume_all, create_topic, produce, read_progress, write_config

pytestmark = pytest.mark.integration


def _flow_props(pfx: str) -> dict:
    return {"topics": f"{pfx}\\..*", "tasks.max": 2, "state.topic.partitions": 2, "lease.timeout.seconds": 1,
            "heartbeats.replication.enabled": False, "emit.heartbeats.enabled": False}


def _topics(cluster) -> set[str]:
    return set(admin(cluster).list_topics(timeout=10).topics)


def test_two_namespaces_replicate_and_checkpoint_the_same_flow_apart(tmp_path, source, target, unique):
    src = unique("NS").replace("-", "")  # this test's own flow: no other test's state
    name = f"{src}->B"
    cfgs, flows, topics = {}, {}, {}
    for team in ("team1", "team2"):
        pfx = unique(team)
        topics[team] = f"{pfx}.orders"
        create_topic(source, topics[team], partitions=2)
        create_topic(target, f"{src}.{topics[team]}", partitions=2)
        produce(source, topics[team], records(40 if team == "team1" else 30, 2, team))
        cfgs[team] = write_config(tmp_path / f"{team}.yaml", {src: source, "B": target}, {name: _flow_props(pfx)},
                                  defaults={"state.namespace": team})
        flows[team] = cfgs[team].flow(name)

    f1, f2 = flows["team1"], flows["team2"]
    assert progress_topic(f1) == f"mirrorflow.team1.{src}-B.progress.internal"
    assert transactional_id(f2, "t", 3) == f"mirrorflow-team2-{src}-B-t-3"
    for team, want in (("team1", 40), ("team2", 30)):
        rep = run_once(cfgs[team], flows[team], mode="direct")
        assert rep.ok and rep.records == want, (rep.render(), rep.__dict__)
        src_vals = [r.content() for r in consume_all(source, topics[team])]
        assert [r.content() for r in consume_all(target, f"{src}.{topics[team]}")] == src_vals

    # each deployment has its own state topics, holding only its own partitions
    on_target = _topics(target)
    for f in (f1, f2):
        assert {progress_topic(f), offset_map_topic(f), lease_topic(f), runs_topic(f)} <= on_target
    assert not any(t.startswith(f"mirrorflow.{src}-B.") for t in on_target)  # no un-namespaced state
    for team, other in (("team1", "team2"), ("team2", "team1")):
        prog = read_progress(cfgs[team], flows[team])
        assert {k: v.next for k, v in prog.items()} == {
            (topics[team], 0): 20 if team == "team1" else 15, (topics[team], 1): 20 if team == "team1" else 15}
        assert not any(t == topics[other] for t, _ in prog)

    # each checkpoints its own group from its own offset map; the other's group is left alone
    groups = {team: unique(f"app{team}") for team in ("team1", "team2")}
    for team in ("team1", "team2"):
        commit(source, groups[team], topics[team], {0: 5, 1: 9})
    for team in ("team1", "team2"):
        cp = emit_checkpoints(cfgs[team], flows[team], groups=[groups[team]])
        assert not cp.errors and cp.topic == f"{src}.checkpoints.internal"
        remote = f"{src}.{topics[team]}"
        want = {p: target_offset_of(source, target, topics[team], remote, p, o) for p, o in ((0, 5), (1, 9))}
        assert sorted((c.group, c.topic, c.partition, c.upstream_offset, c.downstream_offset)
                      for c in cp.emitted) == [
            (groups[team], remote, 0, 5, want[0]), (groups[team], remote, 1, 9, want[1])]
    # the second run of each copies nothing new: neither touched the other's progress
    for team in ("team1", "team2"):
        rep = run_once(cfgs[team], flows[team], mode="direct")
        assert rep.ok and rep.records == 0, rep.render()


def test_a_second_deployment_on_the_same_flow_state_is_refused(tmp_path, source, target, unique):
    src = unique("DP").replace("-", "")
    name = f"{src}->B"
    pfx = unique("dep")
    topic = f"{pfx}.orders"
    create_topic(source, topic, partitions=1)
    create_topic(target, f"{src}.{topic}", partitions=1)
    produce(source, topic, records(10, 1, "dep"))
    blue = write_config(tmp_path / "blue.yaml", {src: source, "B": target}, {name: _flow_props(pfx)},
                        defaults={"deployment.id": "blue"})
    rep = run_once(blue, blue.flow(name), mode="direct")
    assert rep.ok and rep.records == 10, rep.render()

    # another config (no namespace, no deployment id) on the same flow into the same target
    other = write_config(tmp_path / "other.yaml", {src: source, "B": target}, {name: _flow_props(pfx)})
    produce(source, topic, records(5, 1, "more"))
    with pytest.raises(DeploymentConflictError) as err:
        run_once(other, other.flow(name), mode="direct")
    msg = str(err.value)
    assert f"flow {name}: its state on cluster 'B' (mirrorflow.{src}-B.*) belongs to deployment 'blue'" in msg
    assert "this config is a deployment without deployment.id or state.namespace" in msg
    assert "give this one its own state.namespace" in msg
    assert not isinstance(err.value, LeaseError)  # not "try later": a DAG run fails instead of skipping
    proc = cli(other, "replicate", "--flow", name, "--once", "--mode", "direct", check=False)
    assert proc.returncode == 2 and "belongs to deployment 'blue'" in proc.stderr, proc.stderr[-2000:]
    # nothing was copied by the refused run, and the owner still runs (its lease was not taken)
    assert len(consume_all(target, f"{src}.{topic}")) == 10
    rep = run_once(blue, blue.flow(name), mode="direct")
    assert rep.ok and rep.records == 5, rep.render()
