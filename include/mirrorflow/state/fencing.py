"""Aborting what a crashed copy left open, so state reads need not wait for the broker.

A copy that dies mid-transaction leaves its transaction open until the broker aborts it after
transaction.timeout.ms; meanwhile read_committed readers of that state partition block. Before a
run reads progress, the planner finds state partitions with an open transaction (last stable
offset below the high watermark) and re-initialises the transactional ids whose keys live there,
which fences the zombie and aborts its transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.kafka.topics import list_offsets
from mirrorflow.state.topics import progress_topic, state_partition, transactional_id


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

    def fence(tp: tuple[str, int]) -> None:
        pr = clients.producer("target", required={"transactional.id": transactional_id(flow, *tp)})
        pr.init_transactions(60)
        pr.flush(5)
        clients.release(pr)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(fence, todo))
    if log:
        log(f"aborted open transactions of {len(todo)} source partitions (a crashed copy)")
    return len(todo)
