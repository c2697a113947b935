"""Aborting what a crashed copy left open, so state reads need not wait for the broker.

A copy that dies mid-transaction leaves its transaction open until the broker aborts it after
transaction.timeout.ms; meanwhile read_committed readers of that state partition block. Before a
run reads progress, the planner finds state partitions with an open transaction (last stable
offset below the high watermark) and re-initialises the transactional ids whose keys live there,
which fences the zombie and aborts its transaction.

`init_transactions` alone does not end every open transaction: a target broker SIGKILLed while a
copy transaction was open, and down longer than transaction.timeout.ms, can leave that
transaction's records pending on a partition the coordinator no longer lists (Kafka 4.3.1,
reproduced with a bare producer); the next COMMIT marker of the same transactional.id then makes
them visible. `abort_pending` writes one aborted transaction over the partitions an id writes to:
its abort marker ends such records as aborted, and its new epoch on those partitions rejects any
late write of an older attempt. Every copy unit does this once, after `init_transactions` and
before its first commit (see docs/replicate.md, "Fencing").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.errors import StateError, TransactionAbortedError
from mirrorflow.kafka.topic_admin import list_offsets
from mirrorflow.state.state_topics import offset_map_topic, progress_topic, state_partition, transactional_id

ABORTED_VALUE = b"mirrorflow-aborted"  # never read: no read_committed reader sees an aborted record


def abort_pending(
    producer: Any, parts: Iterable[tuple[str, int]], abort: Callable[[], None], where: str, cluster: str
) -> None:
    """One aborted transaction over `parts` (topic, partition) with this (initialised)
    transactional producer: its abort marker on each partition ends records an earlier epoch of
    the same transactional.id left pending there. `abort()` aborts the transaction (the caller
    decides how it is retried). A record not delivered (an outage) is a TransactionAbortedError:
    the marker is not known to be on that partition, so the caller must not commit with this
    producer."""
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer.begin_transaction()
    for topic, partition in parts:
        producer.produce(topic, b"", ABORTED_VALUE, partition, on_delivery=report, headers=[("mirrorflow", b"aborted")])
    try:
        left = producer.flush(60)
    except SystemError as exc:  # a fatal error (fencing) surfaces in flush() as the cause of this
        if isinstance(exc.__cause__, KafkaException):
            raise exc.__cause__ from None
        raise
    abort()
    if left or errors:
        what = errors[0].str() if errors else f"{left} records not delivered in time"
        raise TransactionAbortedError(
            f"{where}: the aborting transaction on cluster {cluster!r} did not reach every partition ({what})"
        )


def blocked_state_partitions(clients: FlowClients) -> set[int]:
    """Progress partitions with an open transaction (last stable offset < high watermark)."""
    admin, topic = clients.admin("target"), progress_topic(clients.flow)
    n = clients.partitions("target", topic)
    if not n:
        return set()
    tps = [(topic, p) for p in range(n)]
    conn = clients.connection("target")
    # a broker restart (the state topics' leaders coming back) is ridden through, not failed
    hw = list_offsets(admin, conn, tps, OffsetSpec.latest(), committed=False, timeout=clients.outage_timeout)
    lso = list_offsets(admin, conn, tps, OffsetSpec.latest(), committed=True, timeout=clients.outage_timeout)
    return {p for (_, p), h in hw.items() if lso.get((topic, p), h) < h}


def fence_open_transactions(
    clients: FlowClients, keys: Iterable[tuple[str, int]], log: Callable[[str], Any] | None = None
) -> int:
    """init_transactions for every source partition whose progress partition has an open
    transaction. A copy still running for that partition is fenced too (it stops cleanly); only
    call this while no run of the flow is active. Returns how many ids were fenced."""
    flow = clients.flow
    if not flow.exactly_once:
        return 0
    blocked = blocked_state_partitions(clients)
    if not blocked:
        return 0
    n = clients.partitions("target", progress_topic(flow))
    todo = [(t, p) for t, p in keys if state_partition(t, p, n) in blocked]

    nmap = clients.partitions("target", offset_map_topic(flow))

    def fence(tp: tuple[str, int]) -> None:
        pr = clients.producer("target", required={"transactional.id": transactional_id(flow, *tp)})
        try:
            pr.init_transactions(60)
            # records a killed broker left pending on the state partitions are ended too, so the
            # progress partition's last stable offset moves and the plan reads the whole progress
            parts = [
                (progress_topic(flow), state_partition(*tp, n)),
                (offset_map_topic(flow), state_partition(*tp, nmap)),
            ]
            with contextlib.suppress(TransactionAbortedError):  # best effort: the unit does it again
                abort_pending(pr, parts, lambda: pr.abort_transaction(60), f"{tp[0]}[{tp[1]}]", flow.target)
        finally:
            clients.release(pr)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(fence, todo))
    if log:
        log(f"aborted open transactions of {len(todo)} source partitions (a crashed copy)")
    return len(todo)


def fence_copies(clients: FlowClients, keys: Iterable[tuple[str, int]]) -> int:
    """init_transactions with the transactional id of every source partition in `keys`: every copy
    of the flow that holds one of them now (a run taken over, state.lease) is fenced, its open
    transaction aborted, and none of its later commits can succeed (a copy that fences back later
    first checks its run still holds the lease: copier). Only with exactly-once (idempotent
    producers cannot be fenced). Returns how many ids were fenced; StateError naming the partition
    when one cannot be (the take-over must not go on unsure)."""
    flow = clients.flow
    todo = sorted(set(keys))

    def fence(tp: tuple[str, int]) -> None:
        pr = clients.producer("target", required={"transactional.id": transactional_id(flow, *tp)})
        try:
            pr.init_transactions(60)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else exc
            raise StateError(
                f"cannot fence the copies of {tp[0]}[{tp[1]}] (transactional.id {transactional_id(flow, *tp)}) on "
                f"cluster {flow.target!r}: {err}"
            ) from None
        finally:
            clients.release(pr)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(fence, todo))
    return len(todo)
