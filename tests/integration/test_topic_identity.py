"""State that no longer describes its topics stops the partition: a recreated source
topic, a recreated target topic, a replication-policy change. `mirrorflow reseed` restarts it."""

from __future__ import annotations

import json
import time

from confluent_kafka.admin import NewTopic

from mirrorflow.observe.status import flow_status
from mirrorflow.replication.run.runner import run_once
from tests.integration.replicate_helpers import assert_copied, make_flow, mirror_topic
from tests.integration.test_replicate import cli, records
from tests.support import admin, consume_all, create_topic, load_offset_map, produce, read_progress, wait_for_topic


def recreate_topic(cluster, name: str, partitions: int = 1) -> None:
    """Delete `name` and create it again (a new topic ID); deletion completes asynchronously."""
    a = admin(cluster)
    a.delete_topics([name])[name].result(30)
    deadline = time.monotonic() + 60
    while True:
        try:
            a.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)
    wait_for_topic(cluster, name, partitions)


def test_recreated_source_topic_stops_until_reseeded(tmp_path, source, target, unique):
    pfx = unique("ident")
    t = f"{pfx}.orders"
    remote = mirror_topic(source, target, t, 1)
    produce(source, t, records(100, 1))
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 100, rep.render()
    old = read_progress(cfg, flow, [(t, 0)])[(t, 0)]
    assert old.topic_id and old.target_topic == remote and old.target_topic_id and old.epoch == 0

    recreate_topic(source, t)
    produce(source, t, records(30, 1, seed="new"))  # end 30: below the 100 already replicated
    rep = run_once(cfg, flow, mode="direct")
    assert not rep.ok and rep.stopped_partitions == 1 and rep.records == 0
    text = rep.render()
    assert f"source topic '{t}' was recreated (topic ID " in text, text
    assert f"`mirrorflow reseed --flow A->B --topic {t}`" in text
    # a recreated topic that grows past the old progress: once the new topic passes the old progress, still nothing is copied
    produce(source, t, records(100, 1, seed="more"))
    rep = run_once(cfg, flow, mode="direct")
    assert rep.stopped_partitions == 1 and rep.records == 0 and rep.lag == 130, rep.render()
    assert len(consume_all(target, remote)) == 100
    st = flow_status(cfg, flow)
    mine = next(p for p in st.partitions if p.topic == t)  # flow A->B also holds other tests' topics
    assert st.lag is None and mine.stopped and mine.lag is None and "was recreated" in (mine.note or ""), mine

    # without --yes: says what it would do, writes nothing
    out = cli(cfg, "reseed", "--flow", "A->B", "--topic", t).stdout
    assert f"would re-seed {t}" in out and "source offsets 0..130" in out and "map epoch 1" in out, out
    assert read_progress(cfg, flow, [(t, 0)])[(t, 0)] == old
    done = json.loads(cli(cfg, "reseed", "--flow", "A->B", "--topic", t, "--yes", "--json").stdout)
    assert done["dry_run"] is False and done["partitions"][0]["epoch"] == 1
    assert done["partitions"][0]["target_end"] >= 100

    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 130 and rep.lag == 0, rep.render()
    dst = consume_all(target, remote)
    src = consume_all(source, t)
    assert [r.content() for r in dst[100:]] == [r.content() for r in src]
    # the new epoch translates the NEW topic's offsets onto the records copied after the re-seed
    pm = load_offset_map(cfg, flow, [(t, 0)])[(t, 0)]
    assert pm.epoch == 1
    for s, d in zip(src, dst[100:]):
        assert pm.target_of(s.offset) == d.offset
        assert pm.translate(s.offset).target_offset == d.offset
    assert run_once(cfg, flow, mode="direct").records == 0


def test_recreated_target_topic_stops_until_reseeded(tmp_path, source, target, unique):
    pfx = unique("ident")
    t = f"{pfx}.orders"
    remote = mirror_topic(source, target, t, 2)
    produce(source, t, records(80, 2))
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    assert run_once(cfg, flow, mode="direct").records == 80
    recreate_topic(target, remote, 2)
    produce(source, t, records(10, 2, seed="late"))
    rep = run_once(cfg, flow, mode="direct")
    assert rep.stopped_partitions == 2 and rep.records == 0
    assert f"target topic '{remote}' was recreated (topic ID" in rep.render()
    assert consume_all(target, remote) == []
    cli(cfg, "reseed", "--flow", "A->B", "--topic", t, "--yes")
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 90, rep.render()
    assert_copied(source, target, t)  # the whole source again, exactly once


def test_replication_policy_change_stops_the_partition(tmp_path, source, target, unique):
    pfx = unique("ident")
    t = f"{pfx}.orders"
    mirror_topic(source, target, t, 1)
    produce(source, t, records(20, 1))
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    assert run_once(cfg, flow, mode="direct").records == 20
    create_topic(target, f"A-{t}", 1)
    cfg2, flow2 = make_flow(tmp_path, source, target, pfx, **{"replication.policy.separator": "-"})
    rep = run_once(cfg2, flow2, mode="direct")
    assert rep.stopped_partitions == 1 and rep.records == 0
    assert f"the remote topic of {t}[0] is now 'A-{t}' but its state was written for 'A.{t}'" in rep.render()
    assert consume_all(target, f"A-{t}") == []


def test_a_reseed_of_a_topic_whose_state_describes_it_is_refused_unless_forced(tmp_path, source, target, unique):
    """A re-seed copies the topic again after what the target holds: of a topic no run stopped (a misclick,
    the wrong topic named) that is every record twice. It is refused, dry run and write alike, naming why
    and `--force`, with nothing written; forced, it does what it says (the next run copies all again)."""
    pfx = unique("needless")
    t = f"{pfx}.orders"
    remote = mirror_topic(source, target, t, 2)
    produce(source, t, records(20, 2))
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    assert run_once(cfg, flow, mode="direct").records == 20
    before = read_progress(cfg, flow)
    for args in ((), ("--yes",)):
        proc = cli(cfg, "reseed", "--flow", "A->B", "--topic", t, *args, check=False)
        assert proc.returncode != 0 and proc.stdout == "", proc.stdout
        assert (
            f"nothing to re-seed: the state of every partition of '{t}' still describes it (no partition is stopped), "
            "and a re-seed would copy the 20 records flow A->B copied of it again" in proc.stderr
            and "(--force)" in proc.stderr
        ), proc.stderr
    assert read_progress(cfg, flow) == before
    with_history = cli(cfg, "history", "--flow", "A->B", "--json").stdout
    assert f"re-seeded {t}" not in with_history, with_history  # flow A->B holds other tests' topics too

    done = json.loads(cli(cfg, "reseed", "--flow", "A->B", "--topic", t, "--yes", "--force", "--json").stdout)
    assert [p["epoch"] for p in done["partitions"]] == [1, 1] and [p["copied"] for p in done["partitions"]] == [10, 10]
    rep = run_once(cfg, flow, mode="direct")
    assert rep.ok and rep.records == 20, rep.render()
    assert len(consume_all(target, remote)) == 40  # as forced: every record twice
