"""What a run copied per remote topic (the extra of its Asset events), from the units' results."""
from __future__ import annotations

from mirrorflow.replication.run.copied import CopiedRange, CopiedTopic, copied_per_topic


def unit(topic: str, partition: int, src: tuple[int, int], tgt: tuple[int, int], records: int, **kw) -> dict:
    return {"topic": topic, "partition": partition, "target_topic": f"A.{topic}", "copied_from": src[0],
            "copied_to": src[1], "target_from": tgt[0], "tgt_end": tgt[1], "records": records, **kw}


def test_units_of_a_partition_merge_and_topics_without_records_are_left_out():
    results = [
        unit("orders", 1, (0, 100), (0, 101), 100),
        unit("orders", 1, (100, 250), (102, 253), 150, status="failed"),  # committed before it failed: counted
        unit("orders", 0, (7, 9), (40, 42), 2),
        unit("idle", 0, (5, 5), (-1, 12), 0),  # nothing copied: no range, no topic
        unit("orders", 2, (3, 8), (-1, -1), 0),  # only markers: nothing written
    ]
    assert copied_per_topic(results) == [
        CopiedTopic("orders", "A.orders",
                    (CopiedRange(0, (7, 9), (40, 42), 2), CopiedRange(1, (0, 250), (0, 253), 250)))
    ]
    [topic] = copied_per_topic(results)
    assert topic.records == 252
    assert topic.to_dict() == {
        "source_topic": "orders", "target_topic": "A.orders", "records": 252,
        "partitions": [{"partition": 0, "source_offsets": [7, 9], "target_offsets": [40, 42], "records": 2},
                       {"partition": 1, "source_offsets": [0, 250], "target_offsets": [0, 253], "records": 250}]}


def test_a_copy_task_that_does_not_say_where_its_records_landed_leaves_the_target_range_unknown():
    """A result without target_from (a copy task of an older version, mid-upgrade): the event still
    comes, with the source range and records, and no made-up target range."""
    old = unit("orders", 0, (0, 5), (0, 6), 5)
    del old["target_from"]
    [topic] = copied_per_topic([old, unit("orders", 0, (5, 9), (6, 10), 4)])
    assert topic.partitions == (CopiedRange(0, (0, 9), None, 9),)
    assert topic.to_dict()["partitions"][0]["target_offsets"] is None


def test_a_run_that_copied_nothing_has_no_topic():
    assert copied_per_topic([unit("orders", 0, (5, 5), (-1, 3), 0)]) == []
    assert copied_per_topic([]) == []
