"""Taking a flow over from the real MirrorMaker 2 in dedicated mode: MM2 from Maven Central copies,
is stopped, is started again and SIGKILLed after copying records whose offsets it never stored;
`mirrorflow takeover` continues every partition right after the last record MM2 copied, so the
target ends with every source record exactly once, and MM2's checkpoints stay the groups' floor."""
from __future__ import annotations

import re
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirrorflow.clients import FlowClients, cluster_connection
from mirrorflow_dev.mirrormaker import MirrorMaker2, mm2_properties
from mirrorflow.groups.checkpoint import emit_checkpoints, translate_group
from mirrorflow.kafka.log_reader import read_partition
from mirrorflow.mm2.formats import Checkpoint
from mirrorflow.ops.takeover.from_mm2 import TakeoverError, mm2_offsets, takeover
from tests.integration.replicate_helpers import assert_copied
from tests.integration.test_replicate import cli
from tests.support import consume_all, create_topic, produce, write_config

pytestmark = pytest.mark.integration


def records(n: int, start: int, tag: str) -> list[dict]:
    now = int(time.time() * 1000)
    return [{"partition": i % 2, "key": f"k{i}".encode(), "value": f"{tag}-{i}".encode(), "timestamp": now + i,
             "headers": [("n", str(i).encode())]} for i in range(start, start + n)]


def wait_for(what: str, check, timeout: float = 180.0, mm2: MirrorMaker2 | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        if mm2 is not None:
            mm2.check_alive()
        time.sleep(1)
    tail = mm2.log.read_text(errors="replace")[-3000:] if mm2 is not None and mm2.log.exists() else ""
    pytest.fail(f"timed out waiting for {what}\n{tail}")


def test_takeover_from_mirrormaker2(tmp_path, source, target, unique, airflow_db, monkeypatch):
    tag = uuid.uuid4().hex[:6]
    src, tgt = f"M{tag}", f"N{tag}"  # MM2's aliases and the flow's: the same names
    topic = unique("legacy")
    remote = f"{src}.{topic}"
    create_topic(source, topic, partitions=2)
    produce(source, topic, records(40, 0, "a"))
    group = unique("app")
    c = Consumer({**source.client_config(), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 10)], asynchronous=False)
    c.close()
    props = mm2_properties(
        {src: source.bootstrap_servers, tgt: target.bootstrap_servers},
        {f"{src}->{tgt}": {"topics": re.escape(topic), "groups": re.escape(group)}},
        {f"{tgt}->{src}.enabled": "false", f"{tgt}->{src}.emit.heartbeats.enabled": "false",
         "refresh.topics.interval.seconds": "2", "refresh.groups.interval.seconds": "2",
         "emit.checkpoints.interval.seconds": "1", "sync.topic.acls.enabled": "false",
         "offset.flush.interval.ms": "60000"},  # offsets are stored at a clean stop, not while we look
    )
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target},
                       {f"{src}->{tgt}": {"topics": re.escape(topic), "heartbeats.replication.enabled": False,
                                          "lease.timeout.seconds": 1}})
    flow = cfg.flow(f"{src}->{tgt}")
    n_remote = lambda: len(consume_all(target, remote)) if remote in target_topics(target) else 0  # noqa: E731

    # MM2 copies the first 40 records and checkpoints the group, then stops cleanly (offsets stored)
    mm2 = MirrorMaker2(tmp_path / "mm2-1", props).start()
    try:
        wait_for("MM2 to copy 40 records", lambda: n_remote() == 40, mm2=mm2)
        ckpt = f"{src}.checkpoints.internal"
        wait_for("MM2's checkpoint of the group", lambda: any(
            Checkpoint.decode(r.key, r.value).group == group
            for r in read_partition(cluster_connection(cfg.cluster(tgt)), ckpt)) if ckpt in target_topics(target)
            else False, mm2=mm2)
    finally:
        assert mm2.stop() in (0, 130, 143)
    with FlowClients(cfg, flow) as clients:
        # (MM2 also copies every heartbeats topic it sees: other tests' on this source; not ours)
        stored = mm2_offsets(clients, f"mm2-offsets.{src}.internal", src)
        assert {k: v for k, v in stored.items() if k[0] == topic} == {(topic, 0): 19, (topic, 1): 19}

    # MM2 again: it copies 10 more, and is SIGKILLed before it stores their offsets
    produce(source, topic, records(10, 40, "b"))
    mm2 = MirrorMaker2(tmp_path / "mm2-2", props).start()
    try:
        wait_for("MM2 to copy 50 records", lambda: n_remote() == 50, mm2=mm2)
        with FlowClients(cfg, flow) as clients, pytest.raises(TakeoverError, match="MirrorMaker 2 still runs"):
            takeover(clients, dry_run=True)
    finally:
        mm2.proc.kill()
        mm2.proc.wait(30)

    produce(source, topic, records(20, 50, "c"))
    # once MM2's heartbeats have stopped for a while, the takeover may go
    seen: list[str] = []

    def attempt():
        with FlowClients(cfg, flow) as clients:
            try:
                return takeover(clients, dry_run=True, quiet_s=5)
            except TakeoverError as exc:
                assert "still runs" in str(exc), exc
                seen.append(str(exc))
                return None
    deadline = time.monotonic() + 120
    while (dry := attempt()) is None:
        assert time.monotonic() < deadline, f"MM2 never counted as stopped: {seen[-1]}"
        time.sleep(1)
    assert [(p.partition, p.mm2_offset, p.already_copied, p.next, p.action) for p in dry.partitions] == [
        (0, 19, 5, 25, "take-over"), (1, 19, 5, 25, "take-over")]
    proc = cli(cfg, "takeover", "--flow", flow.name, "--yes", "--mm2-quiet-seconds", "5")
    assert "took over 2 partition(s)" in proc.stdout and "+5 copied after MM2's last stored offset" in proc.stdout
    again = cli(cfg, "takeover", "--flow", flow.name, "--yes", "--mm2-quiet-seconds", "5")  # a second takeover changes nothing
    assert "took over 0 partition(s)" in again.stdout and "already has progress (next 25)" in again.stdout
    status = cli(cfg, "status", "--flow", flow.name).stdout  # the status names the takeover (the first one)
    assert re.search(r"operations: took over from MirrorMaker 2 \(2 partitions\) at \S+ by ", status), status

    # the same through the takeover DAG (a dry run now: nothing left to take over)
    monkeypatch.setenv("MIRRORFLOW_CONFIG", str(cfg.path))
    from mirrorflow_airflow.dag_builders.takeover import build_takeover_dag

    run = build_takeover_dag(cfg, flow).test(run_conf={"dry_run": True, "mm2_quiet_seconds": 5})
    [ti] = run.get_task_instances()
    assert ti.state == "success"
    out = ti.xcom_pull(task_ids="takeover")
    assert out["taken_over"] == 0 and [p["action"] for p in out["partitions"]] == ["skip", "skip"]

    cli(cfg, "replicate", "--flow", flow.name, "--once", "--mode", "direct")
    assert_copied(source, target, topic, remote=remote)  # 70 records, each once, in order

    # the group: MM2's checkpoint (offset 10) stays; after it moves past the takeover point, exact
    assert not emit_checkpoints(cfg, flow).errors
    c = Consumer({**source.client_config(), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 30)], asynchronous=False)
    c.close()
    assert not emit_checkpoints(cfg, flow).errors
    [row] = [r for r in translate_group(cfg, flow, group) if r.partition == 0]
    src30 = [r for r in consume_all(source, topic, [0]) if r.offset == 30][0]
    want = [r.offset for r in consume_all(target, remote, [0]) if r.content() == src30.content()][0]
    assert (row.target_offset, row.status) == (want, "exact")
    mine = [Checkpoint.decode(r.key, r.value) for r in read_partition(cluster_connection(cfg.cluster(tgt)), ckpt)]
    assert [(c.upstream_offset, c.downstream_offset) for c in mine if c.group == group and c.partition == 0][-1] == (
        30, want)


def target_topics(cluster) -> set[str]:
    from tests.support import admin

    return set(admin(cluster).list_topics(timeout=10).topics)
