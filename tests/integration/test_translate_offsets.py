"""`mirrorflow translate --offsets` on real clusters: positions kept outside consumer groups (Spark's
startingOffsets form) translated through the offset map the copies wrote, to exactly the target offsets
where the next unread records landed; an assign() consumer on B started there reads exactly the rest."""
from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from mirrorflow import cli
from mirrorflow.groups.translation import translate_offsets
from tests.support import consume_all, create_topic, end_transaction, produce, write_config

pytestmark = pytest.mark.integration


def run_cli(cfg, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli.main(["--config", str(cfg.path), *args])
    return rc, out.getvalue(), err.getvalue()


def read_from(cluster, topic: str, starting: dict[str, int], expected: int) -> dict[int, list[bytes]]:
    """An assign() consumer (no group) started at `starting` (partition -> offset) reads `expected` records."""
    c = Consumer({**cluster.client_config(), "group.id": "unused-assign-only", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    c.assign([TopicPartition(topic, int(p), o) for p, o in starting.items()])
    got: dict[int, list[bytes]] = {}
    eof: set[int] = set()
    import time
    deadline = time.monotonic() + 30
    while len(eof) < len(starting) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                eof.add(m.partition())
            continue
        got.setdefault(m.partition(), []).append(m.value())
    c.close()
    assert sum(map(len, got.values())) == expected, got
    return got


def test_offsets_translate_to_exactly_the_next_unread_records(tmp_path, source, target, unique):
    prefix = unique("tro")
    topic = f"{prefix}.orders"
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target},
                       {"A->B": {"topics": f"{prefix}\\..*", "state.topic.partitions": 2}})
    create_topic(source, topic, 2)
    # partition 0: o0..o2 committed (offsets 0..2, marker 3), x0 x1 aborted (4, 5, marker 6),
    # o3..o5 committed (7..9, marker 10); partition 1: p0..p5 plain (0..5)
    p = Producer({**source.client_config(), "transactional.id": f"tx-{prefix}"})
    p.init_transactions(30)
    for values, commit in (([b"o0", b"o1", b"o2"], True), ([b"x0", b"x1"], False), ([b"o3", b"o4", b"o5"], True)):
        p.begin_transaction()
        for v in values:
            p.produce(topic, v, partition=0)
        end_transaction(p, commit)
    produce(source, topic, [{"partition": 1, "value": f"p{i}".encode()} for i in range(6)])

    # copied with the commands an operator runs
    assert run_cli(cfg, "sync", "--flow", "A->B")[0] == 0
    rc, out, err = run_cli(cfg, "replicate", "--flow", "A->B", "--once", "--mode", "direct")
    assert rc == 0, out + err
    on_b = {r.value: r.offset for r in consume_all(target, f"A.{topic}")}
    assert len(on_b) == 12

    # a consumer that read o0..o2 and p0..p3 keeps {"0": 3, "1": 4}: 3 is the commit marker on A
    rc, out, err = run_cli(cfg, "translate", "--flow", "A->B", "--offsets", json.dumps({topic: {"0": 3, "1": 4}}),
                           "--json")
    assert rc == 0, err
    got = json.loads(out)
    # the target offsets where o3 and p4 landed, wherever the copier's own transaction markers put them
    assert got["starting_offsets"] == {f"A.{topic}": {"0": on_b[b"o3"], "1": on_b[b"p4"]}}
    assert {(r["partition"], r["status"], r["missing"], r["reread"]) for r in got["partitions"]} == {
        (0, "exact", 0, 0), (1, "exact", 0, 0)}
    assert on_b[b"o4"] < 8  # A's aborted records are not on B: source and target offsets differ

    # every offset of the aborted range resumes at o3 too; the end resumes after the last copy
    for at, want in ((4, on_b[b"o3"]), (5, on_b[b"o3"]), (7, on_b[b"o3"]), (8, on_b[b"o4"]), (11, on_b[b"o5"] + 1)):
        rep = translate_offsets(cfg, cfg.flow("A->B"), {topic: {"0": at}})
        assert rep.starting_offsets() == {f"A.{topic}": {"0": want}}, at
        assert rep.rows[0].status == ("end" if at == 11 else "exact")

    # an assign() consumer on B started at the answer reads exactly what was not read on A
    rest = read_from(target, f"A.{topic}", got["starting_offsets"][f"A.{topic}"], 5)
    assert rest == {0: [b"o3", b"o4", b"o5"], 1: [b"p4", b"p5"]}

    # the text form: the table, then the line to paste into startingOffsets
    rc, out, _ = run_cli(cfg, "translate", "--flow", "A->B", "--offsets", json.dumps({topic: {"0": -2, "1": 6}}))
    assert rc == 0
    lines = out.splitlines()
    assert lines[-1] == "startingOffsets on B: " + json.dumps({f"A.{topic}": {"0": -2, "1": on_b[b"p5"] + 1}},
                                                              separators=(",", ":"))
    assert any("earliest" in line for line in lines) and any(" end " in f" {line} " for line in lines)


def test_offsets_that_name_no_replicated_partition_exit_2(tmp_path, source, target, unique):
    prefix = unique("trx")
    topic = f"{prefix}.orders"
    cfg = write_config(tmp_path / "mf.yaml", {"A": source, "B": target},
                       {"A->B": {"topics": f"{prefix}\\.orders"}})
    create_topic(source, topic, 2)
    assert run_cli(cfg, "sync", "--flow", "A->B")[0] == 0
    for offsets, says in (
        ({topic: {"2": 5}}, f"--offsets: topic '{topic}' has no partition 2: 'A.{topic}' on cluster 'B' has 2"),
        ({f"{prefix}.other": {"0": 5}}, f"--offsets: topic '{prefix}.other' is not replicated by flow A->B "
                                        "(its topic filters)"),
        ({topic: {"0": "x"}}, f"--offsets: topic '{topic}' partition 0: offset 'x' is not an offset"),
    ):
        rc, out, err = run_cli(cfg, "translate", "--flow", "A->B", "--offsets", json.dumps(offsets))
        assert rc == 2 and out == "" and says in err, err
    # a replicated topic whose remote topic was never created on B (no sync yet)
    late = f"{prefix}.orders-late"
    cfg2 = write_config(tmp_path / "mf2.yaml", {"A": source, "B": target}, {"A->B": {"topics": f"{prefix}\\..*"}})
    rc, _, err = run_cli(cfg2, "translate", "--flow", "A->B", "--offsets", json.dumps({late: {"0": 0}}))
    assert rc == 2 and f"its remote topic 'A.{late}' does not exist on cluster 'B'" in err
