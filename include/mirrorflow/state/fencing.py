"""Fencing copies: aborting what a crashed copy left open, ending a generation of task slots, a take-over.

A copy that dies mid-transaction leaves its transaction open until the broker aborts it after
transaction.timeout.ms; meanwhile read_committed readers of that state partition block. Before a
run reads progress, the planner finds state partitions with an open transaction (last stable
offset below the high watermark) and re-initialises the copy tasks' transactional ids
(state.task_slots), which fences the zombie and aborts its transaction (`fence_open_transactions`).
The same re-initialisation ends a generation of task slots before the next is recorded
(`ensure_layout`) and fences a run that a failover took over (`fence_copies`).

`init_transactions` alone does not end every open transaction: a target broker SIGKILLed while a
copy transaction was open, and down longer than transaction.timeout.ms, can leave that
transaction's records pending on a partition the coordinator no longer lists (Kafka 4.3.1,
reproduced with a bare producer); the next COMMIT marker of the same transactional.id then makes
them visible. `abort_pending` writes one aborted transaction over the partitions an id writes to:
its abort marker ends such records as aborted, and its new epoch on those partitions rejects any
late write of an older attempt. A copy task does this once per epoch, after `init_transactions`
and before its first commit, on the partitions such records hold open (`open_transactions`): a
partition with nothing pending gets no aborted record, so the target's offsets hold only what
the copies committed and their markers (see docs/replicate.md, "Fencing").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.errors import MirrorflowError, StateError, TransactionAbortedError
from mirrorflow.kafka.connection import kafka_error
from mirrorflow.kafka.topic_admin import list_offsets
from mirrorflow.state.names import offset_map_topic, progress_topic, transactional_id
from mirrorflow.state.state_topics import state_partition
from mirrorflow.state.task_slots import TaskLayout, fingerprint, read_layout, write_layout

Key = tuple[str, int]
FENCE_THREADS = 16  # init_transactions mostly waits on the transaction coordinator

ABORTED_VALUE = b"mirrorflow-aborted"  # never read: no read_committed reader sees an aborted record
MARKER = [("mirrorflow", b"aborted")]


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
        try:
            producer.produce(topic, b"", ABORTED_VALUE, partition, on_delivery=report, headers=MARKER)
        except KafkaException as exc:
            err = kafka_error(exc)
            if err is None or err.code() != KafkaError._UNKNOWN_PARTITION:
                raise
            # the producer's metadata knows fewer partitions: ask again (its cache is brought up to
            # date); a partition the target does not have (added on the source, not synced yet) holds
            # nothing pending
            md = producer.list_topics(topic, timeout=10).topics.get(topic)
            if md is not None and partition in md.partitions:
                producer.produce(topic, b"", ABORTED_VALUE, partition, on_delivery=report, headers=MARKER)
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


def open_transactions(clients: FlowClients, tps: Sequence[Key]) -> list[Key]:
    """The target partitions among `tps` that hold records of a transaction not ended yet (last
    stable offset < high watermark), in the order of `tps`."""
    if not tps:
        return []
    admin, conn = clients.admin("target"), clients.connection("target")
    # a broker restart (the leaders coming back) is ridden through, not failed
    hw = list_offsets(admin, conn, tps, OffsetSpec.latest(), committed=False, timeout=clients.outage_timeout)
    lso = list_offsets(admin, conn, tps, OffsetSpec.latest(), committed=True, timeout=clients.outage_timeout)
    return [k for k in tps if lso.get(k, hw[k]) < hw[k]]


def blocked_state_partitions(clients: FlowClients) -> set[int]:
    """Progress partitions with an open transaction."""
    topic = progress_topic(clients.flow)
    n = clients.partitions("target", topic)
    return {p for _, p in open_transactions(clients, [(topic, p) for p in range(n)])}


def fence_ids(
    clients: FlowClients, ids: Iterable[str], pending: Mapping[str, list[tuple[str, int]]] | None = None
) -> int:
    """init_transactions with each transactional id (in parallel): every producer holding one is
    fenced and its open transaction aborted. `pending`: partitions per id over which an aborted
    transaction also ends what an earlier epoch of it left pending there (`abort_pending`). Returns
    how many ids were fenced; StateError naming the first id that could not be (whoever fences must
    not go on unsure). The aborted transaction goes only to those of an id's partitions that still
    hold a transaction open after its init_transactions (`open_transactions`)."""
    flow = clients.flow
    todo = sorted(set(ids))

    def fence(tid: str) -> None:
        pr = clients.producer("target", required={"transactional.id": tid})
        try:
            pr.init_transactions(60)
            parts = (pending or {}).get(tid)
            if parts:
                # only where something is still pending once init_transactions aborted what the
                # coordinator knew of: no aborted record of ours lands on a partition (an application's
                # topic among them) that holds no open transaction
                with contextlib.suppress(MirrorflowError):  # cannot tell: end them all, as before
                    parts = open_transactions(clients, parts)
            if parts:
                with contextlib.suppress(TransactionAbortedError):  # best effort: the records stay pending
                    abort_pending(pr, parts, lambda: pr.abort_transaction(60), tid, flow.target)
        except KafkaException as exc:
            err = kafka_error(exc)
            raise StateError(
                f"cannot fence the copies with transactional.id {tid} on cluster {flow.target!r}: "
                f"{err.str() if err is not None else exc}"
            ) from None
        finally:
            clients.release(pr)

    with ThreadPoolExecutor(max_workers=FENCE_THREADS) as pool:
        list(pool.map(fence, todo))
    return len(todo)


def state_parts(clients: FlowClients, keys: Iterable[Key]) -> list[tuple[str, int]]:
    """The progress and offset-map partitions the state of `keys` lives in."""
    flow = clients.flow
    nprog = clients.partitions("target", progress_topic(flow))
    nmap = clients.partitions("target", offset_map_topic(flow))
    out = {(progress_topic(flow), state_partition(t, p, nprog)) for t, p in keys}
    return sorted(out | {(offset_map_topic(flow), state_partition(t, p, nmap)) for t, p in keys})


def copy_ids(clients: FlowClients, keys: Iterable[Key], layout: TaskLayout | None) -> dict[str, list[Key]]:
    """The transactional ids that may write the state of `keys` now: every slot of the recorded
    generation, or (a flow without one yet, copied per partition) each key's own id."""
    flow = clients.flow
    if layout is not None:
        return {tid: list(keys) for tid in layout.transactional_ids(flow)}
    return {transactional_id(flow, t, p): [(t, p)] for t, p in keys}


def fence_open_transactions(
    clients: FlowClients,
    keys: Iterable[Key],
    layout: TaskLayout | None = None,
    log: Callable[[str], Any] | None = None,
) -> int:
    """Fence the copies whose open transaction blocks a progress partition of `keys` (last stable
    offset below the high watermark): a copy still running is fenced too (it stops cleanly), so
    only call this under the flow's lease. The ids are `copy_ids` (the slots of `layout`, else
    per partition); records an earlier epoch left pending on those state partitions are ended too,
    so the partition's last stable offset moves and the plan reads the whole progress. Returns
    how many ids were fenced."""
    flow = clients.flow
    if not flow.exactly_once:
        return 0
    blocked = blocked_state_partitions(clients)
    if not blocked:
        return 0
    n = clients.partitions("target", progress_topic(flow))
    todo = [(t, p) for t, p in keys if state_partition(t, p, n) in blocked]
    ids = copy_ids(clients, todo, layout)
    fenced = fence_ids(clients, ids, {tid: state_parts(clients, ks) for tid, ks in ids.items()})
    if log:
        log(f"aborted open transactions of {len(todo)} source partitions (a crashed copy)")
    return fenced


def fence_copies(clients: FlowClients, keys: Iterable[Key]) -> int:
    """Fence every copy of the flow (a run taken over, state.lease): init_transactions with each
    transactional id that may copy `keys` (`copy_ids`), so its open transaction is aborted and none
    of its later commits can succeed (a copy that starts later first checks its run still holds
    the lease: replication.task.task_producer). Only with exactly-once (idempotent producers cannot be
    fenced). Returns how many source partitions are covered; StateError naming the id when one
    cannot be fenced (the take-over must not go on unsure)."""
    todo = sorted(set(keys))
    fence_ids(clients, copy_ids(clients, todo, read_layout(clients)))
    return len(todo)


def ensure_layout(
    clients: FlowClients,
    partitions: Sequence[tuple[str, int, str]],
    ran_before: Callable[[], bool],
    log: Callable[[str], Any] | None = None,
    current: TaskLayout | None = None,
) -> TaskLayout:
    """The generation of task slots this run copies with (only under the flow's lease): the recorded
    one when it deals `partitions` (source topic, partition, target topic: every partition of the
    flow) onto tasks.max slots, else the next one, recorded only after every transactional id that
    may still commit under the old deal is fenced (state.task_slots). A flow without a layout record
    that `ran_before()` was copied with per-partition ids: each of its partitions' id is fenced
    once, with what it left pending on its target and state partitions ended. `current`: the
    recorded layout when the caller read it already."""
    flow = clients.flow
    slots, print_ = max(1, int(flow.parallelism)), fingerprint((t, p) for t, p, _ in partitions)
    current = current if current is not None else read_layout(clients)
    if current is not None and current.matches(slots, print_):
        return current
    if flow.exactly_once and current is not None:
        n = fence_ids(clients, current.transactional_ids(flow))
        if log:
            log(f"flow {flow.name}: the task layout changed; fenced the {n} tasks of generation {current.generation}")
    elif flow.exactly_once and ran_before():
        ids = {transactional_id(flow, t, p): [(r, p), *state_parts(clients, [(t, p)])] for t, p, r in partitions}
        n = fence_ids(clients, ids, ids)
        if log:
            log(f"flow {flow.name}: first run with task slots; fenced the per-partition copy ids of {n} partitions")
    layout = TaskLayout((current.generation if current else 0) + 1, slots, print_)
    write_layout(clients, layout)
    return layout
