"""Taking a flow over for a failover (`--take-over`, the DAG's Param `take_over`): whether a run
holding the flow's lease or another deployment owning its state stands in the way (`held_by`), and
the take-over itself (`take_over_flow`): the lease taken from whoever holds it, that owner fenced for
good, the flow's copy transactions fenced on the target, a line in the operations history. Not the
take-over from MirrorMaker 2 (`takeover`)."""

from __future__ import annotations

import time

from mirrorflow.clients import FlowClients
from mirrorflow.errors import ConfigError, DeploymentConflictError, LeaseError, MirrorflowError, StateError
from mirrorflow.reporting import iso
from mirrorflow.state.fencing import fence_copies
from mirrorflow.state.history import record_operation
from mirrorflow.state.lease import FlowLease, describe_deployment, local_owner
from mirrorflow.state.names import lease_topic
from mirrorflow.state.store import StateStore

TAKE_OVER_HINT = (
    "To fail over anyway, take the flow over: run the failover again with --take-over (in Airflow: the failover "
    "DAG's Param take_over). It takes the flow's lease from whoever holds it, fences the flow's copy transactions "
    "on the target so that run can never write to it again, makes this deployment the one that owns the flow, and "
    "records who took it from whom in the operations history"
)


def held_by(clients: FlowClients, take_over: bool, dry_run: bool = False) -> str | None:
    """What a failover would take the flow over from: a run holding its lease, another deployment
    owning its state (None: nothing). Without `take_over` either is an error naming the flag (the
    preflight stops before anything is drained or approved), except in a dry run (a drill), which
    only says so."""
    flow = clients.flow
    if take_over and not flow.exactly_once:
        raise ConfigError(
            [
                (
                    "--take-over",
                    f"flow {flow.name} copies with exactly.once=false: a run holding it cannot be fenced (idempotent "
                    "producers have no transactional id). Stop that run (its process, or its Airflow task), or "
                    "wait until its lease expires, then fail over without --take-over",
                )
            ]
        )
    if not clients.partitions("target", lease_topic(flow)):
        return "nothing to take over (the flow never ran on this target)" if take_over else None
    lease = FlowLease(clients, "failover-preflight", "failover preflight", 1)
    holder = lease.read_holder()
    live = holder if holder is not None and holder.expires > int(time.time() * 1000) else None
    owning = lease.owning_deployment
    other = owning is not None and owning != flow.deployment
    what = ([f"the run holding its lease, {live.run_line()}"] if live else []) + (
        [f"{describe_deployment(owning or '')}, which owns its state on {flow.target!r}"] if other else []
    )
    if take_over:
        if not what:
            return (
                "nothing to take over now (the lease is free and this deployment owns the flow); its copies are fenced"
            )
        return "takes flow " + flow.name + " over from " + " and from ".join(what)
    if what and dry_run:
        return "needed to fail over now (--take-over, Param take_over): the flow is held by " + " and by ".join(what)
    if live and not other:
        raise LeaseError(f"failover of {flow.name}: {live.describe(flow.name)}. {TAKE_OVER_HINT}")
    if other:
        raise DeploymentConflictError(
            f"failover of {flow.name}: its state on cluster {flow.target!r} belongs to "
            f"{describe_deployment(owning or '')}"
            + (f" and {what[0]}" if live else "")
            + f"; this config is {describe_deployment(flow.deployment)}. {TAKE_OVER_HINT}"
        )
    return None


def take_over_flow(
    clients: FlowClients, by: str, via: str, purpose: str, keys: list[tuple[str, int]] | None = None
) -> tuple[FlowLease, str]:
    """Take the flow over for `purpose` (the operator confirmed it): its lease from whoever holds it
    (that owner fenced for good, this deployment owning the flow from then on), then every copy
    transaction of the flow fenced on the target (its progress's partitions and `keys`), then a
    history line saying who took it from whom. Returns the lease, held (the caller releases it), and
    what was done."""
    flow = clients.flow
    lease = FlowLease(clients, *local_owner("mirrorflow failover --take-over"))
    lease.read_holder()
    owning = lease.owning_deployment
    prev = lease.take_over()
    try:
        n = fence_copies(clients, set(StateStore(clients).progress()) | set(keys or []))
        what = f"took flow {flow.name} over for the {purpose}: " + (
            f"took its lease from {prev.who} (held since {iso(prev.since)})" if prev else "its lease was free"
        )
        if owning is not None and owning != flow.deployment:
            what += (
                f"; its state belonged to {describe_deployment(owning)}, now to {describe_deployment(flow.deployment)}"
            )
        what += f"; fenced the copy transactions of {n} partition(s) on {flow.target!r}"
        record_operation(
            clients,
            "failover",
            by,
            via=via,
            summary=what,
            figures={"partitions fenced": n, **({"taken from": prev.who} if prev else {})},
        )
    except MirrorflowError as exc:
        lease.release()
        took = f"from {prev.who}" if prev else "(it was free)"
        raise StateError(
            f"flow {flow.name}: its lease was taken over {took} for the {purpose} (that run can no longer hold it), "
            f"but the take-over did not complete: {exc}. Nothing else changed; run the failover again with "
            "--take-over"
        ) from None
    except BaseException:
        lease.release()
        raise
    return lease, what
