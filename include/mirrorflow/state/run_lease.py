"""Taking a run's lease: at once (a run refused while another holds it), or waiting for it (a run
of `airflow backfill create`), and fencing what a holder that never released it may have left
running (state.lease holds the protocol)."""

from __future__ import annotations

import logging
import time

from mirrorflow.clients import FlowClients
from mirrorflow.errors import LeaseError
from mirrorflow.state.fencing import fence_copies
from mirrorflow.state.lease import FlowLease, current_holder
from mirrorflow.state.state_topics import ensure_state_topics

log = logging.getLogger(__name__)


def take_lease(clients: FlowClients, owner: str, who: str) -> FlowLease:
    """Ensure the state topics and take the flow's lease (LeaseError: another run holds it). When
    the last holder never released it (its process was killed, its lease lapsed), its copy tasks
    may still run somewhere (a Spark job nobody waits for): every copy task of the flow is fenced
    first, so none of them commits again (state.fencing.fence_copies)."""
    ensure_state_topics(clients)
    lease = FlowLease(clients, owner, who).acquire()
    if lease.took_from is not None and clients.flow.exactly_once:
        fence_copies(clients, [])
    return lease


def wait_for_lease(clients: FlowClients, owner: str, who: str, wait_s: float, poll_s: float = 5.0) -> FlowLease:
    """The flow's lease, waiting up to `wait_s` while another run holds it (a run of `airflow
    backfill create`: Airflow starts a backfill's runs side by side and beside the scheduled runs,
    so without waiting all but one would end skipped -- "success" with their intervals never
    copied). Reads who holds the lease and claims only once it is free (no claim record per poll);
    LeaseError naming the holder after `wait_s`."""
    ensure_state_topics(clients)
    deadline, seen = time.monotonic() + wait_s, ""
    while True:
        holder = current_holder(clients)
        if holder is None or holder.owner == owner:
            try:
                return take_lease(clients, owner, who)
            except LeaseError:  # another run claimed it in between
                if time.monotonic() >= deadline:
                    raise
        elif time.monotonic() >= deadline:
            raise LeaseError(holder.describe(clients.flow.name))
        elif holder.owner != seen:  # once per holder, not per poll
            seen = holder.owner
            log.info("%s; waiting for it", holder.describe(clients.flow.name))
        time.sleep(poll_s)
