"""Backfill on real brokers: a flow started at `latest` copies its history exactly once, out of
source order on the target; groups in either range resume where no record they have not read is
skipped, saying how many they read again."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import pytest
from confluent_kafka import Consumer, TopicPartition

from mirrorflow.groups.checkpoint import emit_checkpoints, translate_group
from mirrorflow.ops.backfill import backfill
from mirrorflow.replication.run.runner import run_once
from tests.integration.replicate_helpers import delete_records
from tests.integration.test_replicate import records
from tests.support import consume_all, create_topic, load_offset_map, produce, read_progress, write_config

pytestmark = pytest.mark.integration


def backfill_flow(tmp_path, source, target, pfx: str, alias: str = "K", **props):
    """Flow <alias>->B over topics `<pfx>.*`, started at `latest`; its own source alias, so its
    checkpoints topic and state are its own."""
    flow_props = {
        "topics": f"{pfx}.*",
        "tasks.max": 2,
        "state.topic.partitions": 2,
        "lease.timeout.seconds": 2,
        "heartbeats.replication.enabled": False,
        "initial.position": "latest",
        "unit.max.records": 7,
        # the flow's state is this test's own: its first run is its first run (initial.position applies)
        "state.namespace": pfx,
        **props,
    }
    cfg = write_config(tmp_path / f"{pfx}.yaml", {alias: source, "B": target}, {f"{alias}->B": flow_props})
    return cfg, cfg.flow(f"{alias}->B")


def cli(cfg, *args: str) -> tuple[int, str, str]:
    from mirrorflow import cli as cli_mod

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli_mod.main(["--config", str(cfg.path), *args])
    return rc, out.getvalue(), err.getvalue()


def commit(cluster, group: str, offsets: list[tuple[str, int, int]]) -> None:
    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(t, p, o) for t, p, o in offsets], asynchronous=False)
    c.close()


def assert_each_once_via_map(cfg, flow, source, target, topic: str, remote: str, partitions: int):
    """Every source record is on the target exactly once, byte-identical, where the map says."""
    src, dst = consume_all(source, topic), consume_all(target, remote)
    assert len(dst) == len(src)
    maps = load_offset_map(cfg, flow, [(topic, p) for p in range(partitions)])
    at = {(r.partition, r.offset): r for r in dst}
    for r in src:
        t = maps[(topic, r.partition)].target_of(r.offset)
        assert t is not None, (r.partition, r.offset)
        assert at[(r.partition, t)].content() == r.content()
    return src, dst, maps


def test_backfill_after_latest_start_copies_history_once(tmp_path, source, target, unique):
    pfx = unique("bf")
    t, remote = f"{pfx}.orders", f"K.{pfx}.orders"
    create_topic(source, t, 2)
    create_topic(target, remote, 2)
    produce(source, t, records(40, 2))  # the history: 20 per partition
    cfg, flow = backfill_flow(tmp_path, source, target, pfx)
    assert run_once(cfg, flow, mode="direct").records == 0  # anchored at the end
    produce(source, t, records(10, 2, seed="live"))
    assert run_once(cfg, flow, mode="direct").records == 10
    before = read_progress(cfg, flow)

    # dry run: per partition the range and the records it would copy, nothing written
    rc, out, _ = cli(cfg, "backfill", "--flow", "K->B", "--from", "earliest", "--to", "start", "--dry-run")
    assert rc == 0, out
    assert f"{t}[0] -> {remote}[0]: range [0, 20): would copy 20 records (offsets 0..19)" in out
    assert f"{t}[1] -> {remote}[1]: range [0, 20): would copy 20 records (offsets 0..19)" in out
    rc, out, _ = cli(cfg, "backfill", "--flow", "K->B", "--from", "earliest", "--to", "start", "--dry-run", "--json")
    d = json.loads(out)
    assert d["dry_run"] and d["offsets"] == 40 and d["records"] == 0
    assert [(p["partition"], p["start"], p["end"], p["offsets"]) for p in d["partitions"]] == [
        (0, 0, 20, 20),
        (1, 0, 20, 20),
    ]
    assert read_progress(cfg, flow) == before
    assert len(consume_all(target, remote)) == 10

    rep = backfill(cfg, flow, "earliest", "start", mode="direct")
    assert rep.ok and rep.records == 40 and rep.lost == 0, rep.render()
    src, dst, maps = assert_each_once_via_map(cfg, flow, source, target, t, remote, 2)
    # history lands after the newer records: target 0..4 are live, 5..24 the backfilled history
    for p in (0, 1):
        d_p = [r for r in dst if r.partition == p]
        s_p = [r for r in src if r.partition == p]
        assert [r.content() for r in d_p] == [r.content() for r in s_p[20:] + s_p[:20]]
    after = read_progress(cfg, flow)
    for k in ((t, 0), (t, 1)):
        assert after[k].next == before[k].next == 25  # never moves back
        assert after[k].covered == ((0, 25),)
        assert after[k].last_timestamp == before[k].last_timestamp  # the newest copied record stays
        assert after[k].records == 25

    # twice is a no-op; an overlapping range copies nothing twice
    again = backfill(cfg, flow, "earliest", "start", mode="direct")
    assert again.ok and again.records == 0 and again.offsets == 0
    rc, out, _ = cli(
        cfg, "backfill", "--flow", "K->B", "--from", "offset:3", "--to", "latest", "--mode", "direct", "--json"
    )
    assert rc == 0 and json.loads(out)["records"] == 0 and json.loads(out)["offsets"] == 0
    assert len(consume_all(target, remote)) == 50
    # verify compares source and target record by record through the map, whatever the target order
    rc, out, err = cli(cfg, "verify", "--flow", "K->B", "--json")
    assert rc == 0, out + err

    # translation: a group in the backfilled range and one in the live range. One target offset cannot
    # place them exactly (history sits after newer records): each resumes where no record it has not
    # read is skipped, and says how many it reads again
    g_old, g_new = f"{pfx}-old", f"{pfx}-new"
    commit(source, g_old, [(t, 0, 3), (t, 1, 19)])
    commit(source, g_new, [(t, 0, 22), (t, 1, 25)])
    # where each source record landed (target offsets skip the commit markers of the transactions)
    landed = {r.content(): r.offset for r in dst}
    src_at = {(r.partition, r.offset): r for r in src}

    def target_of(p: int, o: int) -> int:
        return landed[src_at[(p, o)].content()]

    end1 = max(r.offset for r in dst if r.partition == 1) + 1
    live0 = target_of(0, 20)  # the first record the flow copied (it started at 20): target offset 0
    assert live0 == min(r.offset for r in dst if r.partition == 0)
    expected = {
        # in the backfilled range: from the first live record (unread too), re-reading the history below g
        (g_old, 0): (3, live0, "reread", 3),
        (g_old, 1): (19, target_of(1, 20), "reread", 19),
        # in the live range: its next record exactly, re-reading the 20 backfilled records after it
        (g_new, 0): (22, target_of(0, 22), "reread", 20),
        (g_new, 1): (25, end1, "end", 0),
    }
    rows = {
        (r.group, r.partition): (r.source_offset, r.target_offset, r.status, r.reread)
        for g in (g_old, g_new)
        for r in translate_group(cfg, flow, g)
    }
    assert rows == expected
    # no record at or after a group's offset lies below where it resumes
    for (g, p), (o, resume, _, again) in expected.items():
        assert all(target_of(p, s) >= resume for (q, s) in src_at if q == p and s >= o)
        assert sum(1 for (q, s) in src_at if q == p and s < o and target_of(p, s) >= resume) == again
    run = emit_checkpoints(cfg, flow, groups=[g_old, g_new])
    got = {(c.group, c.partition): (c.upstream_offset, c.downstream_offset) for c in run.emitted}
    assert got == {k: v[:2] for k, v in expected.items()}
    rc, out, _ = cli(cfg, "translate", "--flow", "K->B", "--group", g_old, "--from-checkpoints", "--json")
    assert rc == 0
    assert sorted((r["partition"], r["target_offset"]) for r in json.loads(out)) == [
        (0, expected[(g_old, 0)][1]),
        (1, expected[(g_old, 1)][1]),
    ]
    # the old group moves on into the live range: exactly its next record now, forward on the target
    commit(source, g_old, [(t, 0, 21)])
    run = emit_checkpoints(cfg, flow, groups=[g_old])
    assert {(c.partition, c.upstream_offset, c.downstream_offset) for c in run.emitted} == {(0, 21, target_of(0, 21))}
    assert target_of(0, 21) > expected[(g_old, 0)][1]


def test_backfill_reports_retention_gaps_and_stays_idempotent(tmp_path, source, target, unique):
    pfx = unique("bfgap")
    t, remote = f"{pfx}.events", f"K.{pfx}.events"
    create_topic(source, t, 1)
    create_topic(target, remote, 1)
    produce(source, t, records(30, 1))
    delete_records(source, t, 0, 12)  # retention removed 0..11 before the flow ever saw them
    cfg, flow = backfill_flow(tmp_path, source, target, pfx)
    run_once(cfg, flow, mode="direct")
    produce(source, t, records(4, 1, seed="live"))
    assert run_once(cfg, flow, mode="direct").records == 4

    rep = backfill(cfg, flow, "offset:5", "start", mode="direct")
    assert rep.ok and rep.records == 18 and rep.lost == 7, rep.render()
    (p,) = rep.partitions
    assert p.gaps == [(5, 12)] and p.todo == [(12, 30)]
    assert "gap: 7 offsets (5..11) already removed by source retention" in rep.render()
    prog = read_progress(cfg, flow)[(t, 0)]
    assert prog.covered == ((12, 34),) and prog.next == 34 and prog.lost == 0  # the gap is reported, not recorded
    # the same backfill again: nothing copied, the same gap reported
    again = backfill(cfg, flow, "offset:5", "start", mode="direct")
    assert again.ok and again.records == 0 and again.partitions[0].gaps == [(5, 12)]
    src = consume_all(source, t)
    dst = consume_all(target, remote)
    assert [r.content() for r in dst] == [r.content() for r in src[18:] + src[:18]]
    pm = load_offset_map(cfg, flow, [(t, 0)])[(t, 0)]
    # source 12 (the first backfilled record) sits after the 4 live ones (and a commit marker): a group
    # at 12 has read nothing copied, so it resumes at the first live record and reads everything once
    assert pm.translate(12).target_offset == dst[0].offset and pm.translate(12).status == "exact"
    assert pm.translate(30).target_offset == dst[0].offset and pm.translate(8).status == "before"


def test_backfill_by_time_and_topics_regex(tmp_path, source, target, unique):
    from datetime import UTC, datetime

    pfx = unique("bftime")
    t1, t2 = f"{pfx}.a", f"{pfx}.b"
    for t in (t1, t2):
        create_topic(source, t, 1)
        create_topic(target, f"K.{t}", 1)
        produce(source, t, records(20, 1))  # timestamps NOW + 10 * i
    cfg, flow = backfill_flow(tmp_path, source, target, pfx)
    run_once(cfg, flow, mode="direct")
    ts = records(20, 1)[5]["timestamp"]
    iso = datetime.fromtimestamp(ts / 1000, tz=UTC).isoformat(timespec="milliseconds")
    rc, out, _ = cli(
        cfg,
        "backfill",
        "--flow",
        "K->B",
        "--topics",
        rf"{pfx}\.a",
        "--from",
        iso,
        "--to",
        "offset:15",
        "--mode",
        "direct",
        "--json",
    )
    d = json.loads(out)
    assert rc == 0 and d["records"] == 10 and [p["topic"] for p in d["partitions"]] == [t1]
    assert [r.value for r in consume_all(target, f"K.{t1}")] == [r.value for r in consume_all(source, t1)[5:15]]
    assert len(consume_all(target, f"K.{t2}")) == 0


def test_bad_when_and_regex_are_one_clear_error(tmp_path, source, target, unique):
    pfx = unique("bfbad")
    cfg, _ = backfill_flow(tmp_path, source, target, pfx)
    cases = [
        (("--from", "yesterday", "--to", "latest"), "--from: expected earliest (source log start), latest"),
        (("--from", "earliest", "--to", "offset:-3"), "--to: offset:N needs a non-negative integer N, got 'offset:-3'"),
        (
            ("--from", "2026-01-01T00:00:00", "--to", "latest"),
            "--from: the time '2026-01-01T00:00:00' needs a time zone",
        ),
        (("--from", "earliest", "--to", "latest", "--topics", "("), "--topics: not a valid regular expression"),
        (
            ("--from", "earliest", "--to", "latest", "--topics", "nothing-here"),
            "--topics: no source topic of flow K->B matches 'nothing-here'",
        ),
    ]
    for args, msg in cases:
        rc, out, err = cli(cfg, "backfill", "--flow", "K->B", *args, "--dry-run")
        assert rc == 2 and out == "", (args, out)
        assert err.startswith(f"mirrorflow: error: {msg}") and err.count("\n") == 1, (args, err)


def test_backfill_draws_a_bar_on_a_terminal_and_is_quiet_through_a_pipe(tmp_path, source, target, unique):
    import re
    import subprocess

    from tests.integration.test_cli_progress import CLI, _on_a_terminal

    pfx = unique("bfbar")
    t, remote = f"{pfx}.feed", f"K.{pfx}.feed"
    create_topic(source, t, 2)
    create_topic(target, remote, 2)
    produce(source, t, records(60, 2))
    cfg, flow = backfill_flow(tmp_path, source, target, pfx)
    run_once(cfg, flow, mode="direct")
    base = [*CLI, "--config", str(cfg.path), "backfill", "--flow", "K->B", "--mode", "direct"]
    piped = subprocess.run(
        [*base, "--from", "earliest", "--to", "offset:10"], capture_output=True, text=True, timeout=300
    )
    assert piped.returncode == 0, piped.stderr
    assert "\x1b[" not in piped.stdout + piped.stderr and "rec/s" not in piped.stderr
    assert "copied 20 records" in piped.stdout
    code, drawn = _on_a_terminal([*base, "--from", "earliest", "--to", "offset:30"])
    assert code == 0, drawn
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn)
    assert re.search(r"K->B records .*40/40 .*100%", plain), plain
    assert "copied 40 records" in plain
    assert len(consume_all(target, remote)) == 60
