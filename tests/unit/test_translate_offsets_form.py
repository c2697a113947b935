"""`translate --offsets`: Spark's startingOffsets form in and out, its checks, and the translation it shares
with consumer groups (`translate_committed` over the offset map), without a cluster (a stub answers the
target's partition counts; the maps are given)."""
from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import pytest

from mirrorflow import cli
from mirrorflow import config as config_mod
from mirrorflow.errors import ConfigError
from mirrorflow.groups.translation import (
    OffsetsTranslation,
    TranslatedOffset,
    parse_starting_offsets,
    translate_offsets,
)
from mirrorflow.state.offset_map import MapEntry, PartitionMap, Run


def cfg_of(flows: dict) -> config_mod.Config:
    return config_mod.parse({"clusters": {"A": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"}},
                             "flows": flows})


CFG = cfg_of({"A->B": {"topics": "orders.*"}})
FLOW = CFG.flow("A->B")


class TargetStub:
    """What translate_offsets asks of FlowClients when the maps are given: the target's partition counts."""

    def __init__(self, counts: dict[str, int]):
        self.counts, self.asked = counts, []

    def partitions(self, side: str, topic: str, refresh: bool = False) -> int:
        assert side == "target"  # the source is never needed: it may be lost
        self.asked.append(topic)
        return self.counts.get(topic, 0)


def pmap(topic: str = "orders", partition: int = 0) -> PartitionMap:
    """Source 0..9 copied to target 100..107: 4 a compaction hole, 7 a transaction marker; tgt_end 108."""
    e1 = MapEntry(topic, partition, 0, 7, (Run(0, 100, 4), Run(5, 104, 2)), 106)
    e2 = MapEntry(topic, partition, 7, 10, (Run(8, 106, 2),), 108)
    return PartitionMap([e1, e2])


def translate(offsets, counts=None, maps=None) -> OffsetsTranslation:
    stub = TargetStub(counts if counts is not None else {"A.orders": 3, "A.orders.eu": 1})
    return translate_offsets(CFG, FLOW, offsets, maps=maps if maps is not None else {
        ("orders", 0): pmap(), ("orders", 1): pmap("orders", 1)}, clients=stub)


# -- the JSON form -------------------------------------------------------------------------------------
def test_parse_accepts_sparks_form_as_text_or_mapping():
    text = '{"orders": {"0": 42, "1": 17}, "orders.eu": {"0": -2}}'
    assert parse_starting_offsets(text) == {"orders": {0: 42, 1: 17}, "orders.eu": {0: -2}}
    assert parse_starting_offsets({"orders": {0: 5, "1": -1}}) == {"orders": {0: 5, 1: -1}}


@pytest.mark.parametrize("given,says", [
    ('{"orders": {"0": 42,}', "--offsets: not valid JSON"),
    ("[1, 2]", "expected Spark's startingOffsets form"),
    ("{}", "expected Spark's startingOffsets form"),
    ('{"orders": 42}', "topic 'orders': expected an object of partition -> offset"),
    ('{"orders": {}}', "topic 'orders': expected an object of partition -> offset"),
    ('{"orders": {"zero": 1}}', "topic 'orders': partition 'zero' is not a partition number"),
    ('{"orders": {"-1": 1}}', "topic 'orders': partition '-1' is not a partition number"),
    ('{"orders": {"0": "42"}}', "topic 'orders' partition 0: offset '42' is not an offset"),
    ('{"orders": {"0": 1.5}}', "topic 'orders' partition 0: offset 1.5 is not an offset"),
    ('{"orders": {"0": true}}', "topic 'orders' partition 0: offset True is not an offset"),
    ('{"orders": {"0": -3}}', "topic 'orders' partition 0: offset -3 is not an offset (an integer >= 0, or -2 for "
                              "earliest, -1 for latest)"),
    ('{"orders": {"0": 1, "00": 2}}', "topic 'orders': partition 0 is given twice"),
    ('{"": {"0": 1}}', "a topic name must be a non-empty string"),
])
def test_parse_names_what_is_wrong(given, says):
    with pytest.raises(ConfigError) as err:
        parse_starting_offsets(given)
    assert says in str(err.value)


def test_parse_reports_every_problem_at_once():
    with pytest.raises(ConfigError) as err:
        parse_starting_offsets('{"orders": {"0": -7, "x": 1}, "other": []}')
    assert len(err.value.problems) == 3


# -- translation ------------------------------------------------------------------------------------
def test_offsets_translate_exactly_as_group_offsets_do_keyed_by_the_target_topic():
    # 4 is a compaction hole, 7 a marker: each resumes at the next copied record; 10 is the end, 13 ahead
    rep = translate('{"orders": {"0": 4, "1": 7, "2": 3}}', maps={
        ("orders", 0): pmap(), ("orders", 1): pmap("orders", 1), ("orders", 2): pmap("orders", 2)})
    assert rep.starting_offsets() == {"A.orders": {"0": 104, "1": 106, "2": 103}}
    assert [r.status for r in rep.rows] == ["exact"] * 3
    rep = translate({"orders": {"0": 10, "1": 13}})
    assert rep.starting_offsets() == {"A.orders": {"0": 108, "1": 108}}
    assert [(r.status, r.missing) for r in rep.rows] == [("end", 0), ("ahead", 3)]
    assert rep.starting_offsets_json() == '{"A.orders":{"0":108,"1":108}}'


def test_earliest_and_latest_pass_on_and_nothing_copied_starts_at_earliest():
    rep = translate('{"orders": {"0": -2, "1": -1, "2": 5}}')  # partition 2: no map, nothing copied yet
    assert rep.starting_offsets() == {"A.orders": {"0": -2, "1": -1, "2": -2}}
    assert [(r.partition, r.target_offset, r.status) for r in rep.rows] == [
        (0, -2, "earliest"), (1, -1, "latest"), (2, None, "none")]
    text = rep.render()
    assert "earliest: given as -2 (earliest)" in text and "latest: given as -1 (latest)" in text
    assert "none: nothing copied yet for this partition: starts at the earliest offset" in text
    assert text.splitlines()[-1] == 'startingOffsets on B: {"A.orders":{"0":-2,"1":-1,"2":-2}}'


def test_a_reread_is_earlier_never_later():
    # a backfill put source 0..4 after 5..9 on the target: the map cannot say 7 in one offset
    pm = PartitionMap([MapEntry("orders", 0, 5, 10, (Run(5, 0, 5),), 5),
                       MapEntry("orders", 0, 0, 5, (Run(0, 5, 5),), 10)])
    rep = translate({"orders": {"0": 7}}, maps={("orders", 0): pm})
    [row] = rep.rows
    assert row.status == "reread" and row.target_offset <= 2 and row.reread > 0  # never past source 7's copy (2)


def test_the_same_core_translation_as_a_group():
    from mirrorflow.groups.group_offsets import CommittedOffset
    from mirrorflow.groups.translation import translate_committed
    from mirrorflow.mm2.filters import FlowFilters

    maps = {("orders", 0): pmap()}
    group = translate_committed(FlowFilters.for_flow(FLOW), [CommittedOffset("g", "orders", 0, 7)], maps)
    [row] = translate({"orders": {"0": 7}}, maps=maps).rows
    assert row == TranslatedOffset("", *[getattr(group[0], f) for f in (
        "source_topic", "partition", "source_offset", "target_topic", "target_offset", "status", "missing",
        "metadata", "reordered", "reread")])


def test_identity_policy_keeps_the_name():
    cfg = cfg_of({"A->B": {"topics": "orders", "replication.policy.class": "IdentityReplicationPolicy"}})
    rep = translate_offsets(cfg, cfg.flow("A->B"), {"orders": {"0": 4}}, maps={("orders", 0): pmap()},
                            clients=TargetStub({"orders": 1}))
    assert rep.starting_offsets() == {"orders": {"0": 104}}


def test_unknown_topics_and_partitions_are_named_one_error():
    with pytest.raises(ConfigError) as err:
        translate('{"payments": {"0": 1}}')
    assert str(err.value) == "--offsets: topic 'payments' is not replicated by flow A->B (its topic filters)"
    with pytest.raises(ConfigError) as err:  # passes the filter, but there is no such topic on B
        translate('{"orders.us": {"0": 1}}')
    assert str(err.value) == ("--offsets: topic 'orders.us' is not replicated by flow A->B: its remote topic "
                              "'A.orders.us' does not exist on cluster 'B'")
    with pytest.raises(ConfigError) as err:
        translate('{"orders": {"0": 1, "3": 1, "7": 2}, "orders.eu": {"0": 1}}')
    assert str(err.value) == ("--offsets: topic 'orders' has no partition 3: 'A.orders' on cluster 'B' has 3\n"
                              "--offsets: topic 'orders' has no partition 7: 'A.orders' on cluster 'B' has 3")
    assert err.value.exit_code == 2


def test_json_report():
    rep = translate('{"orders": {"1": 4, "0": -1}}')
    out = rep.to_json()
    assert out["starting_offsets"] == {"A.orders": {"0": -1, "1": 104}}
    assert out["flow"] == "A->B" and out["target"] == "B"
    assert out["partitions"][1] == {"source_topic": "orders", "partition": 1, "source_offset": 4,
                                    "target_topic": "A.orders", "target_offset": 104, "status": "exact",
                                    "missing": 0, "reread": 0, "reordered": False}


# -- the command line -------------------------------------------------------------------------------------
def run_cli(tmp_path, *args: str) -> tuple[int, str, str]:
    path = tmp_path / "mf.yaml"
    path.write_text(json.dumps({"clusters": {"A": {"bootstrap.servers": "127.0.0.1:1"},
                                             "B": {"bootstrap.servers": "127.0.0.1:1"}},
                                "flows": {"A->B": {"topics": "orders.*"}}}))
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            rc = cli.main(["--config", str(path), "translate", "--flow", "A->B", *args])
        except SystemExit as exc:  # argparse
            rc = int(exc.code)
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("args,says", [
    (["--offsets", "{nope"], "mirrorflow: error: --offsets: not valid JSON"),
    (["--offsets", '{"orders": {"0": 1}}', "--from-checkpoints"],
     "mirrorflow: error: --from-checkpoints: only with --group"),
    (["--offsets", '{"orders": {"0": 1}}', "--group", "g"], "not allowed with argument"),
    ([], "one of the arguments --group --offsets is required"),
])
def test_cli_bad_input_exits_2_before_any_cluster_is_asked(tmp_path, args, says):
    rc, out, err = run_cli(tmp_path, *args)
    assert rc == 2 and says in err and out == ""
