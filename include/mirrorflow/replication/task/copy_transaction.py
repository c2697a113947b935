"""A copy task's transaction on its slot producer: every transactional call a copy attempt makes
(its epoch and claim, begin, flush, commit, abort), in one class with one retry policy and one
table of timeouts. The writer (replication.task.transaction_writer) fills the transaction; this decides
what each call's failure means.

The epoch (`establish`, before any progress is read): a new producer's init_transactions fences
every older producer of the slot and aborts its open transaction; then one aborted transaction
over those of the attempt's partitions (its target partitions, their progress and offset-map
partitions, its claim's partition) that still hold a transaction open, so what an earlier epoch
left pending there ends as aborted (state.fencing.abort_pending; a quiet partition gets no write,
and no aborted record lands where nothing was pending); a cached producer does the same over the
partitions its epoch has not looked at yet. Before either writes anything, the task asks whether its
run still holds the flow's lease (task_succession.TaskSuccession.holds): a producer initialised after
a failover fenced the slot is not fenced itself, and a read begun after its epoch is what stops it. Both then
commit a CLAIM: a record in the progress topic (key `task_slots.claim_key`) naming the run's lease
owner and the attempt (Spark's attempt number). A producer that a newer epoch fenced fails this
commit before anything was read; once a claim is committed no older producer of the slot can
commit anymore, and a newer one commits only after this attempt stopped committing: a zombie
never commits after a newer attempt read its progress.

One policy for every call:

* fenced (a newer attempt initialised the slot; the broker's timeout abort bumped the epoch), and a
  fatal error at the claim: the KafkaException as it is, the task decides (replication.task.task_copier:
  re-initialise a cached producer, or stop);
* abortable (an outage broke the transaction, the producer is fine): `Abortable`, and the task
  goes on from the committed progress with a new producer;
* a retriable failure whose outcome is not known (a commit, an init, the epoch's abort): the same
  call again after a backoff until the flow's outage bound (`broker.outage.max.seconds`), then one
  BrokerUnavailableError naming the cluster; a commit is never turned into an abort;
* anything else: a MirrorflowError naming the call.

Every call waits at most its entry of `WAITS_S`, and never past the outage bound
(kafka.retry.call_timeout_s): a black-holed target ends a copy within the bound plus one call.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import KafkaException

from mirrorflow.clients import FlowClients
from mirrorflow.config import FlowConfig
from mirrorflow.errors import MirrorflowError, TransactionAbortedError
from mirrorflow.kafka.connection import kafka_error
from mirrorflow.kafka.retry import Outage, call_timeout_s, describe, is_fenced, retrying
from mirrorflow.replication.task.faults import NO_FAULTS, Faults
from mirrorflow.replication.task.reader import outage_bound_s
from mirrorflow.replication.task.task_producer import Part, SlotProducer
from mirrorflow.replication.task.write_failures import Abortable
from mirrorflow.state.fencing import abort_pending, open_transactions
from mirrorflow.state.names import progress_topic
from mirrorflow.state.task_slots import claim_key, key_partition, last_value

# How long each blocking call waits (s), before the outage bound caps it. Why each:
WAITS_S: dict[str, float] = {
    "metadata": 30.0,  # the producer's first metadata request (it connects before init_transactions)
    "init": 60.0,  # init_transactions: an older epoch's open transaction ends first
    "flush": 120.0,  # a round's records delivered (a round: up to transaction.max.bytes)
    "commit": 120.0,  # commit_transaction of a round (it flushes first)
    "claim": 60.0,  # commit_transaction of the claim (one small record)
    "redo": 60.0,  # an abort before the round is written again, or of what an older epoch left pending
    "give_up": 30.0,  # an abort of a round given up (the producer may be dropped next: no long wait)
    "probe": 10.0,  # an abort that only asks why the transaction failed: fenced, or an outage
}


@dataclass(frozen=True)
class Claim:
    """Who established a slot's epoch last: the run's lease owner and the attempt (Spark's number)."""

    owner: str
    attempt: int
    run: str = ""

    def to_json(self) -> bytes:
        return json.dumps(
            {"v": 1, "owner": self.owner, "attempt": self.attempt, "run": self.run, "at": int(time.time() * 1000)},
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes | None) -> Claim | None:
        try:
            d = json.loads(raw or b"")
            return cls(str(d["owner"]), int(d["attempt"]), str(d.get("run", "")))
        except (ValueError, KeyError, TypeError):
            return None


def read_claim(clients: FlowClients, slot: int) -> Claim | None:
    """The slot's last claim written (None: none, or unreadable), read uncommitted: an attempt asks
    it before it may initialise the slot's producer again, and what an earlier epoch of the slot
    left pending on the claim's partition (a target SIGKILLed mid-transaction) ends only with that
    initialisation (`establish`); read_committed, the question waited for its own answer until
    broker.outage.max.seconds. A claim written at all, committed or not, means a newer attempt had
    initialised the slot's producer."""
    return Claim.from_json(last_value(clients, claim_key(slot), committed=False))


class CopyTransaction:
    """The transactions of one copy attempt on its slot producer (module docstring)."""

    def __init__(self, flow: FlowConfig, sp: SlotProducer) -> None:
        self.flow, self.sp = flow, sp
        self.producer, self.fatal = sp.producer, sp.fatal
        self.eos = bool(flow.exactly_once)
        self.bound_s = outage_bound_s(flow)
        self.began = 0.0  # monotonic time the current transaction began
        self._abort_failed: str | None = None  # why the last abort got no answer (an outage)

    def wait_s(self, call: str) -> float:
        """How long `call` (a key of WAITS_S) waits: its default, never past the outage bound."""
        return call_timeout_s(self.bound_s, WAITS_S[call])

    @property
    def open_s(self) -> float:
        """How long the current transaction has been open (0: none began)."""
        return time.monotonic() - self.began if self.began else 0.0

    # -- the epoch ----------------------------------------------------------------------------------
    def establish(
        self,
        clients: FlowClients,
        slot: int,
        parts: list[Part],
        claim: Claim,
        outage: Outage,
        held: Callable[[], None],
        faults: Faults = NO_FAULTS,
    ) -> None:
        """The attempt's epoch (module docstring): init_transactions when the producer is new, `held`
        (raises when the run lost the flow's lease), an aborted transaction over those of `parts` its
        epoch has not covered that hold one open, the claim committed. An outage is ridden through
        up to `outage`'s bound (a TransactionAbortedError when the aborted transaction did not reach
        every partition: the caller starts again with a new producer)."""
        flow, sp, target = self.flow, self.sp, self.flow.target
        if not self.eos:
            sp.initialised = True
            retrying(held, outage, target, f"asking for the lease of flow {flow.name}")
            return
        pr, where = self.producer, sp.transactional_id
        if not sp.initialised:
            # connect first: init_transactions on a cold producer waits for its retry timer when the broker
            # connection is not up yet (~0.3 s). Two metadata requests, as kafka.connection.warm_producer: the
            # first answer may come through the bootstrap connection librdkafka then retires, and the producer
            # id waited 0.5-0.7 s then (12 of 80 epochs of steady runs over 200 partitions; 0 of 80 with two)
            topic = progress_topic(flow)
            meta = lambda: pr.list_topics(topic, timeout=self.wait_s("metadata"))  # noqa: E731
            for _ in range(2):
                retrying(meta, outage, target, f"metadata of {topic!r}")
            retrying(lambda: pr.init_transactions(self.wait_s("init")), outage, target, f"init_transactions ({where})")
            sp.initialised = True
        # after the epoch, before any write: a run that lost the flow's lease writes nothing. The target
        # may be back for the epoch before the lease topic's leader is: ridden out like the calls above
        retrying(held, outage, target, f"asking for the lease of flow {flow.name} ({where})")
        nprog = clients.partitions("target", progress_topic(flow))
        claimed = (progress_topic(flow), key_partition(claim_key(slot), nprog))  # an earlier claim's, too
        todo = [p for p in dict.fromkeys([*parts, claimed]) if p not in sp.closed]
        pending = open_transactions(clients, todo)
        if pending:
            abort = lambda: retrying(  # noqa: E731
                lambda: pr.abort_transaction(self.wait_s("redo")), outage, target, f"aborting ({where})"
            )
            abort_pending(pr, pending, abort, where, target)
        sp.closed.update(todo)
        pr.begin_transaction()
        pr.produce(progress_topic(flow), claim.to_json(), claim_key(slot), key_partition(claim_key(slot), nprog))
        what = f"the claim of {where}"
        try:
            self.commit(what, outage, claim=True)
        except Abortable as exc:
            raise TransactionAbortedError(f"{what} was not committed: {exc}") from None
        faults.reached("after_init")

    # -- one transaction ----------------------------------------------------------------------------
    def begin(self) -> None:
        self.began = time.monotonic()
        if not self.eos:
            return
        try:
            self.producer.begin_transaction()
        except KafkaException as exc:
            if self._abort_failed is None:
                raise
            # librdkafka: "Conflicting abort_transaction API call is already in progress": the round
            # before was aborted in an outage and the target never answered; name that
            raise TransactionAbortedError(
                f"cluster {self.flow.target!r} did not answer the abort of the last transaction "
                f"({self._abort_failed}): it is unavailable ({describe(exc)})"
            ) from None
        self._abort_failed = None

    def flush(self, call: str = "flush") -> int:
        """Flush; the number of records still undelivered. A producer that failed the flush is told
        apart: fenced (its fatal error), else the transaction is aborted (which raises the fencing
        error when that is the cause) and a MirrorflowError says the flush failed."""
        try:
            return int(self.producer.flush(self.wait_s(call)))
        except (SystemError, KafkaException) as exc:
            # a fenced producer fails flush() (confluent-kafka may surface it as a SystemError)
            with contextlib.suppress(Exception):
                self.producer.poll(0)
            if self.fatal.error is not None:
                raise KafkaException(self.fatal.error) from None
            if isinstance(exc, KafkaException):
                raise
            if self.eos:
                self.producer.abort_transaction(self.wait_s("give_up"))
            raise MirrorflowError(f"flushing the transaction failed: {exc}") from None

    def commit(self, what: str, outage: Outage | None = None, claim: bool = False) -> None:
        """Commit (exactly-once; else wait until everything is delivered), again while the outcome is
        not known, up to the outage bound. Fenced: the KafkaException; abortable: Abortable. The
        claim's commit (`claim`) gives a fatal error up as its KafkaException."""
        if not self.eos:
            if self.producer.flush(self.wait_s("flush")) != 0:
                raise MirrorflowError(f"state records of {what} were not delivered")
            return
        outage = outage or Outage(self.bound_s)
        while True:
            try:
                self.producer.commit_transaction(self.wait_s("claim" if claim else "commit"))
                return
            except KafkaException as exc:
                if is_fenced(exc):
                    raise
                e = kafka_error(exc)
                given_up = claim and e is not None and e.fatal()
                if e is not None and e.txn_requires_abort() and not given_up:
                    raise Abortable(exc) from None
                if e is not None and e.retriable() and not given_up:  # the outcome is not known yet: commit again
                    outage.wait(self.flow.target, f"committing {what}", exc)
                    continue
                if claim:
                    raise
                raise MirrorflowError(f"committing {what} failed: {e.str() if e else exc}") from None

    def give_up(self) -> None:
        """Abort a round given up (the task stops or starts again). An abort the target does not
        answer (an outage) is remembered: the next `begin` names it."""
        if self.eos:
            try:
                self.producer.abort_transaction(self.wait_s("give_up"))
            except KafkaException as exc:
                self._abort_failed = describe(exc)

    def abort_to_redo(self, quiet: bool = False) -> None:
        """Abort before the round is written again (the careful path, a probe). Fencing is raised
        (unless `quiet`); an abort that fails otherwise is left to the next call to find."""
        if not self.eos:
            return
        try:
            self.producer.abort_transaction(self.wait_s("redo"))
        except KafkaException as exc:
            if is_fenced(exc) and not quiet:
                raise

    def fenced_or(self, cause: Exception) -> Exception:
        """The transaction failed for a reason its error does not say (an outage, or another attempt
        fencing this one: INVALID_PRODUCER_EPOCH is abortable in librdkafka). An abort tells them
        apart: a fenced producer's abort fails with the fencing error (returned: the task stops, it
        never re-initialises, which would fence its fencer back); else `cause`."""
        try:
            self.producer.abort_transaction(self.wait_s("probe"))
        except KafkaException as abort_exc:
            if is_fenced(abort_exc):
                return abort_exc
        return cause

    def fatal_cause(self, exc: KafkaException) -> Exception:
        """produce() says only "Fatal error" (_FATAL); the cause (e.g. _FENCED when another attempt
        fenced this one) reaches error_cb on the next poll, or is what the transactional API raises."""
        with contextlib.suppress(Exception):
            self.producer.poll(0)
        if self.fatal.error is not None:
            return KafkaException(self.fatal.error)
        return self.fenced_or(exc) if self.eos else exc

    def raise_if_fenced(self) -> None:
        err = self.fatal.error
        if err is not None and is_fenced(KafkaException(err)):
            raise KafkaException(err)
