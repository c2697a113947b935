"""A real Spark Structured Streaming query fails over from A to B exactly once (issue 40, item 2).

Spark keeps its Kafka positions in its checkpoint, not in a consumer group: the query on A is stopped
mid-stream, the flow is failed over (`mirrorflow failover --mode planned`: drain, verify, stop), the
offsets of the query's last committed batch (its checkpoint's `offsets/<batchId>`, last line) are
translated with `mirrorflow translate --offsets`, and a new query on B starts from them
(`startingOffsets`). Across the two queries every record is processed exactly once.

The connector: PySpark's wheel has none; `mirrorflow_dev.spark_kafka` fetches `spark-sql-kafka-0-10`
from Maven Central (4.2.0 for PySpark 4.3.0, which Maven Central does not have).
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from confluent_kafka import Producer

from mirrorflow.replication.executors.spark import CONNECT_CLIENT_VARS
from mirrorflow import cli
from mirrorflow_dev.spark_kafka import connector_jars
from tests.support import consume_all, create_topic, end_transaction, produce, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]
QUERY = Path(__file__).with_name("spark_kafka_query.py")


def run_cli(cfg, *args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli.main(["--config", str(cfg.path), *args])
    assert rc == 0, out.getvalue() + err.getvalue()
    return out.getvalue()


def run_query(tmp_path: Path, name: str, **spec) -> list[tuple[int, int, str]]:
    """One Spark application (its own process): the records its file sink committed."""
    spec = {**spec, "out": str(tmp_path / name / "out"), "result": str(tmp_path / name / "result.json"),
            "jars": [str(j) for j in connector_jars()], "max_offsets_per_trigger": 6}
    (tmp_path / name).mkdir()
    spec_file = tmp_path / name / "spec.json"
    spec_file.write_text(json.dumps(spec))
    # a classic local session: without the Spark Connect client marks an earlier test of this
    # worker may have left in its environment (replication.executors.spark.CONNECT_CLIENT_VARS)
    env = {k: v for k, v in os.environ.items() if k not in CONNECT_CLIENT_VARS}
    proc = subprocess.run(
        [sys.executable, str(QUERY), str(spec_file)], capture_output=True, text=True, timeout=600, env=env
    )
    assert proc.returncode == 0, proc.stderr[-5000:]
    return [tuple(r) for r in json.loads(Path(spec["result"]).read_text())]


def last_committed_offsets(checkpoint: Path) -> str:
    """The offsets a stopped query resumes from: `offsets/<N>` of the newest batch in `commits/`, its last line
    (Spark's startingOffsets form, keyed by source topic)."""
    batches = [int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()]
    return (checkpoint / "offsets" / str(max(batches))).read_text().strip().splitlines()[-1]


def test_a_spark_query_fails_over_to_b_exactly_once(tmp_path, source, target, unique):
    prefix = unique("spq")
    alias = f"SQ{prefix.rsplit('-', 1)[1]}"  # a source alias of its own: the failover stops only this flow
    topic = f"{prefix}.orders"
    cfg = write_config(tmp_path / "mf.yaml", {alias: source, "B": target},
                       {f"{alias}->B": {"topics": f"{prefix}\\..*", "state.topic.partitions": 2,
                                        "heartbeats.replication.enabled": False}})
    flow = f"{alias}->B"
    create_topic(source, topic, 2)
    # partition 0 starts with an aborted transaction and has another one in the middle: A's offsets of every
    # record there differ from B's, where neither the aborted records nor A's markers are
    p = Producer({**source.client_config(), "transactional.id": f"tx-{prefix}"})
    p.init_transactions(30)
    for batch, commit in ((range(100, 104), False), (range(0, 8), True), (range(104, 108), False),
                          (range(8, 16), True)):
        p.begin_transaction()
        for i in batch:
            p.produce(topic, f"a0-{i}".encode(), partition=0)
        end_transaction(p, commit)
    produce(source, topic, [{"partition": 1, "value": f"a1-{i}".encode()} for i in range(16)])
    run_cli(cfg, "sync", "--flow", flow)
    run_cli(cfg, "replicate", "--flow", flow, "--once", "--mode", "direct")

    # the application on A: two batches of at most 6 records, then it is stopped mid-stream
    ck1 = tmp_path / "ck-a"
    first = run_query(tmp_path, "on-a", bootstrap=source.bootstrap_servers, topic=topic, checkpoint=str(ck1),
                      starting_offsets="earliest", stop_after_batches=2)
    assert 0 < len(first) < 32

    # A keeps taking records until the failover; the planned failover drains them to B, verifies, stops the flow
    produce(source, topic, [{"partition": i % 2, "value": f"late-{i}".encode()} for i in range(10)])
    out = json.loads(run_cli(cfg, "failover", "--flow", flow, "--mode", "planned", "--copy-mode", "direct",
                             "--yes", "--json"))
    assert out["done"] is True and out["not_replicated"] == 0, out

    # the query's position, translated to B
    position = last_committed_offsets(ck1)
    assert set(json.loads(position)) == {topic}
    answer = json.loads(run_cli(cfg, "translate", "--flow", flow, "--offsets", position, "--json"))
    assert {r["status"] for r in answer["partitions"]} <= {"exact", "end"}, answer
    starting = answer["starting_offsets"]
    remote = f"{alias}.{topic}"
    assert set(starting) == {remote}
    # exactly the target offsets of the first records the query on A had not processed
    on_a = {(r.partition, r.offset): r.value.decode() for r in consume_all(source, topic)}
    on_b = {r.value.decode(): r.offset for r in consume_all(target, remote)}
    done_a = {(part, off) for part, off, _ in first}
    for part, offset in json.loads(position)[topic].items():
        nxt = min((o for (pp, o) in on_a if pp == int(part) and o >= offset), default=None)
        assert starting[remote][part] == on_b[on_a[(int(part), nxt)]], (part, offset)
        assert not any(pp == int(part) and o >= offset for pp, o in done_a)
    assert starting[remote]["0"] < json.loads(position)[topic]["0"]  # not the identity: the aborted records

    # the application on B: a new query (a new checkpoint) from the translated offsets
    second = run_query(tmp_path, "on-b", bootstrap=target.bootstrap_servers, topic=remote,
                       checkpoint=str(tmp_path / "ck-b"), starting_offsets=json.dumps(starting))
    # every record exactly once across the two queries, in each partition's order
    committed_on_a = {part: [v for (pp, _), v in sorted(on_a.items()) if pp == part] for part in (0, 1)}
    assert sum(map(len, committed_on_a.values())) == 42
    for part in (0, 1):
        read = [v for pp, _, v in sorted(first) if pp == part] + [v for pp, _, v in sorted(second) if pp == part]
        assert read == committed_on_a[part], part
