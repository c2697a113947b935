"""Taking a run's lease (a run refused while another holds it; a run that waits for it polls
`blocking_holder`), and fencing what a holder that never released it may have left running
(state.lease holds the protocol)."""

from __future__ import annotations

from mirrorflow.clients import FlowClients
from mirrorflow.state.fencing import fence_copies
from mirrorflow.state.lease import FlowLease, Holder, current_holder
from mirrorflow.state.state_topics import ensure_state_topics


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


def blocking_holder(clients: FlowClients, owner: str) -> Holder | None:
    """Who holds the flow's lease against `owner` (None: free, or `owner`'s own). What a run that
    waits for the lease polls (a run of `airflow backfill create`: Airflow starts a backfill's runs
    side by side and beside the scheduled runs, so without waiting all but one would end skipped --
    "success" with their intervals never copied); it claims only once the lease is free, so a wait
    writes no claim record per poll."""
    holder = current_holder(clients)
    return None if holder is None or holder.owner == owner else holder
