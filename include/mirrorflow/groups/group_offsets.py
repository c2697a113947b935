"""Committed offsets of consumer groups on one cluster: listing the groups, fetching their offsets.

Asked by the checkpoint pass (the flow's groups), by the offset map's upkeep (every group's offsets
are a floor no translation goes below), by group offset sync and by the drill. Every request is
sent before any answer is awaited, and a group whose coordinator is not ready yet is asked again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, as_completed
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException

from mirrorflow.kafka.connection import ClusterConnection, kafka_error
from mirrorflow.kafka.retry import backoff_s, failure, transient_error


@dataclass(frozen=True, slots=True)  # slots: a pass builds 100,000s of them
class CommittedOffset:
    """One committed offset of a consumer group on the source cluster."""

    group: str
    topic: str
    partition: int
    offset: int
    metadata: str = ""


def list_groups(admin: Any, conn: ClusterConnection, timeout: float) -> list[str]:
    """Every consumer group id on the cluster."""
    try:
        res = admin.list_consumer_groups(request_timeout=timeout).result(timeout + 5)
    except KafkaException as exc:
        raise failure(conn, exc) from None
    if res.errors:  # a broker that did not answer (a connection reset): its groups are missing from `valid`
        err = res.errors[0]
        raise failure(conn, err if isinstance(err, KafkaException) else KafkaException(err)) from None
    return sorted(g.group_id for g in res.valid)


# A group's coordinator is not ready (a just-started broker loading __consumer_offsets, or moving)
COORDINATOR_CODES = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError._WAIT_COORD,
}


def coordinators_ready(
    admin: Any, groups: list[str], deadline: float, ready: Callable[[str], None] | None = None
) -> None:
    """Wait (until `deadline`) until the coordinator of each group answers DescribeGroups. Why:
    librdkafka (2.16, confluentinc/librdkafka#5040) dereferences the null consumer-group handle of
    an AdminClient when ListConsumerGroupOffsets' OffsetFetch answers NOT_COORDINATOR, and the
    process dies with SIGSEGV; a broker loading __consumer_offsets answers just that (seen in 2 of
    3 runs on fresh dev clusters). DescribeGroups goes to the same coordinator without that flaw.
    Other failures are left to the offsets request, which reports them. `ready(group)` is called
    for each group as soon as its answer is in (its offsets can be asked for while the other
    groups' answers are still coming: a pass over 1,000 groups waited for all of them first)."""
    pending, failures = list(groups), 0
    while pending:
        timeout = max(1.0, deadline - time.monotonic())
        retry = []
        futures = admin.describe_consumer_groups(pending, request_timeout=timeout)
        group_of = {id(f): g for g, f in futures.items()}
        for fut in as_completed(futures.values(), timeout=timeout + 5):
            g = group_of[id(fut)]
            try:
                fut.result()
            except KafkaException as exc:
                err = kafka_error(exc)
                if err is not None and err.code() in COORDINATOR_CODES and time.monotonic() < deadline:
                    retry.append(g)
                    continue
            if ready is not None:
                ready(g)
        pending = retry
        if pending:
            failures += 1
            time.sleep(backoff_s(failures))


def fetch_group_offsets(
    admin: Any, conn: ClusterConnection, groups: Iterable[str], timeout: float, described: bool = False
) -> tuple[dict[str, list[CommittedOffset]], dict[str, str]]:
    """Committed offsets of many groups: every request is sent before any answer is awaited
    (librdkafka takes one group per request), once each group's coordinator answers
    (`coordinators_ready`; `described`: the caller's DescribeGroups of these groups answered
    already). A group whose coordinator is still not ready is asked again with a backoff, up to
    `timeout`; any other failure is that group's error. Returns (offsets per group, error per group)."""
    offsets: dict[str, list[CommittedOffset]] = {}
    errors: dict[str, str] = {}
    pending, deadline, failures = list(groups), time.monotonic() + timeout, 0
    futures: dict[str, Future] = {}

    def ask(g: str) -> None:
        futures.update(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)], request_timeout=timeout))

    if pending and not described:  # each group's offsets are asked for once its coordinator answered
        coordinators_ready(admin, pending, deadline, ask)
    else:
        for g in pending:
            ask(g)
    while futures:
        asked, futures = futures, {}
        pending = []
        for g, fut in asked.items():
            try:
                res = fut.result(timeout + 5)
            except KafkaException as exc:
                err = kafka_error(exc)
                if err is not None and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                    continue  # deleted since it was listed
                if err is not None and err.code() in (
                    KafkaError._TRANSPORT,
                    KafkaError._TIMED_OUT,
                    KafkaError._ALL_BROKERS_DOWN,
                ):
                    raise failure(conn, exc) from None
                if transient_error(err) and time.monotonic() < deadline:
                    pending.append(g)  # e.g. COORDINATOR_LOAD_IN_PROGRESS on a just-started broker
                    continue
                errors[g] = err.str() if err is not None else str(exc)
                continue
            offsets[g] = [
                CommittedOffset(g, tp.topic, tp.partition, tp.offset, tp.metadata or "")
                for tp in res.topic_partitions
                if tp.error is None
            ]
        if pending:
            failures += 1
            time.sleep(backoff_s(failures))
            for g in pending:
                ask(g)
    return offsets, errors
