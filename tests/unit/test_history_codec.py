"""The operations history's record format (docs/state.md): versioned JSON, one line for people."""
from __future__ import annotations

import json

from mirrorflow.state.history import OperationRecord
from mirrorflow.state.names import history_topic
from mirrorflow.state.state_topics import HISTORY_RETENTION_BYTES, HISTORY_RETENTION_MS, state_topic_configs
from tests.unit.test_namespace_boundary_config import flow

AT = 1_800_000_000_000  # 2027-01-15T08:00:00Z


def test_a_record_round_trips_and_reads_as_one_line():
    rec = OperationRecord("A->B", "failover", AT, "alice", "airflow", "region A lost", "unplanned failover",
                          {"groups": 3, "rpo_s": 12})
    raw = rec.to_json()
    assert json.loads(raw) == {"v": 1, "flow": "A->B", "kind": "failover", "at": AT, "by": "alice", "via": "airflow",
                               "reason": "region A lost", "summary": "unplanned failover",
                               "figures": {"groups": 3, "rpo_s": 12}}
    assert OperationRecord.from_json(raw) == rec
    assert rec.line() == ("2027-01-15T08:00:00+00:00 failover by alice (airflow): region A lost; unplanned failover; "
                          "groups 3, rpo_s 12")
    bare = OperationRecord("A->B", "resume", AT, "bob@h pid 7")
    assert bare.line() == "2027-01-15T08:00:00+00:00 resume by bob@h pid 7"


def test_a_newer_or_broken_record_is_skipped_not_fatal():
    assert OperationRecord.from_json(b'{"v":2,"flow":"A->B","kind":"pause","at":1}') is None
    assert OperationRecord.from_json(b"not json") is None
    assert OperationRecord.from_json(b'{"v":1,"kind":"pause"}') is None
    assert OperationRecord.from_json(None) is None


def test_the_history_topic_is_appended_and_bounded_by_time_and_size():
    f = flow()
    assert history_topic(f) == "mirrorflow.A-B.operations.internal"
    conf = state_topic_configs(f)[history_topic(f)]
    assert conf["cleanup.policy"] == "delete"  # never compacted: every operation stays
    assert (conf["retention.ms"], conf["retention.bytes"]) == (str(366 * 86_400_000), str(64 << 20))
    assert (HISTORY_RETENTION_MS, HISTORY_RETENTION_BYTES) == (366 * 86_400_000, 64 << 20)
