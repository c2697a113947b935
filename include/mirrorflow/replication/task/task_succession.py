"""Whether an attempt of a copy task may still write: its run holds the flow's lease, and no newer
attempt of its run claimed its task slot.

A run that lost the flow's lease (a failover, failback, takeover or reseed took it, or a run after this
one's lapsed) writes nothing more: the taker fences the flow's copy transactions first
(state.run_lease.take_lease), and each task also asks here before a round writes anything (at most
every GUARD_EVERY_S), which is what stops an at-least-once run (idempotent producers cannot be
fenced). A lease that lapsed while nobody claimed it is still the run's. The same questions decide
whether a fenced or outage-stricken attempt may re-initialise its producer (it must not when it is the
zombie: it would fence the attempt that owns the slot) and what its report names as the fencer.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from confluent_kafka import KafkaException

from mirrorflow.clients import FlowClients
from mirrorflow.errors import FencedError, LeaseError, MirrorflowError
from mirrorflow.process import background
from mirrorflow.replication.task.copy_transaction import read_claim
from mirrorflow.state.lease import LeaseGuard

GUARD_EVERY_S = 5.0  # how often, at most, a task asks before a round whether its run still holds the lease


class TaskSuccession:
    """The succession questions of one attempt of task `slot` of run `owner` (module doc)."""

    def __init__(self, clients: FlowClients, owner: str | None, attempt: int, slot: int, tid: str) -> None:
        self.clients, self.owner, self.attempt, self.slot, self.tid = clients, owner, attempt, slot, tid
        self.guard = LeaseGuard(clients, owner) if owner else None
        self._next_check = time.monotonic() + GUARD_EVERY_S  # the attempt asks once after its epoch
        self._warming: Callable[[float | None], object] | None = None

    def warm(self) -> None:
        """Begin reading the lease topic in the background (its connection, its history) while the
        epoch's first requests run: `holds` then reads only what was appended since."""
        if self.guard is not None and self._warming is None:
            self._warming = background(self.guard.check, "mirrorflow-lease-guard")

    def holds(self) -> None:
        """FencedError when the run's lease is someone else's now. Asked once the attempt's epoch is
        established and before it writes anything (its claim): a producer initialised after the
        taker fenced the slot is not fenced, so only this read, begun after the epoch, stops it (a
        run cut off from the target while a failover took the flow wrote its claim after the
        failover's commit)."""
        if self.guard is None:
            return
        warming, self._warming = self._warming, None
        try:
            if warming is not None:
                with contextlib.suppress(MirrorflowError, KafkaException):  # the read below says it
                    warming(None)
            self.guard.check()
        except LeaseError as exc:  # a run taken over since writes nothing
            raise FencedError(str(exc)) from None

    def before_round(self) -> None:
        """Before a round writes anything, at most every GUARD_EVERY_S: FencedError when the run's lease
        is someone else's now. A check the target does not answer is left to the round, which meets
        the same outage."""
        if self.guard is None or time.monotonic() < self._next_check:
            return
        self._next_check = time.monotonic() + GUARD_EVERY_S
        try:
            self.guard.check()
        except LeaseError as exc:
            raise FencedError(str(exc)) from None
        except (MirrorflowError, KafkaException):
            pass

    def superseded(self) -> str | None:
        """Why this attempt is a zombie (its run lost the flow's lease, or a newer attempt of its run
        claimed the slot), else None: only then may it initialise the slot's producer again."""
        if self.guard is not None:
            try:
                self.guard.check()
            except LeaseError as exc:
                return str(exc)
        claim = read_claim(self.clients, self.slot)
        if claim is not None and self.owner and claim.owner == self.owner and claim.attempt > self.attempt:
            return (
                f"fenced by attempt {claim.attempt} of the same run (transactional.id {self.tid}); "
                "it owns this partition now"
            )
        return None

    def why_fenced(self) -> str | None:
        """Who fenced this attempt (a failover, a take-over, a newer attempt); None (the report's
        default words) when that cannot be read."""
        try:
            return self.superseded()
        except (MirrorflowError, KafkaException):
            return None

    def close(self) -> None:
        if self.guard is not None:
            self.guard.close()
