"""Read-only mirrors (`mirror.read.only: true`): nobody but mirrorflow writes the flow's remote topics
on the target until a failover promotes them.

Kafka's ACLs have no "everyone except": a DENY binding beats every ALLOW, whoever it names, and
`User:*` names every principal. The one principal no binding binds is a super user (`super.users`:
Kafka's authorizers let them through before looking at any binding). So a read-only mirror is, per
remote topic, one binding `DENY WRITE for User:* from host * on TOPIC <remote> (LITERAL)` on the
target, and the flow's target principal must be a super user of the target (else the DENY would
refuse the flow's own copies too). Every other binding stays as it is (the ACL sync stays additive;
an application's ALLOW WRITE is kept and simply loses to the DENY until the promotion).

* `check_target`: whether the target can carry it -- an authorizer, a principal that may alter ACLs
  (ALTER on the cluster) and, with `probe`, is a super user (`kafka.acl_admin.bypasses_deny`) --
  before anything changes: `config validate`, every sync that would add a deny, the failback's
  preflight (`probe`), the failover's preflight (no probe: lifting needs ALTER only).
* `deny_writes`: the sync's step (and the failback's, on the side that becomes the mirror): a DENY
  for each remote topic of the topics the flow selects on its source, created before the topic
  itself (an ACL on a literal name needs no topic), so no remote topic is ever writable.
* `promote`: the failover's promotion: the flow's DENY bindings deleted (`lift_denies`: exactly
  those, the same pattern, principal, host, operation and permission on a remote topic of the flow)
  and a `promote` line in the operations history. The commit promotes; a failover run again on a
  failed-over flow promotes what an interrupted commit left.
"""

from __future__ import annotations

from confluent_kafka import KafkaException

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ClusterError, ConfigError, MirrorflowError
from mirrorflow.kafka.acl_admin import (
    NO_AUTHORIZER,
    NOT_AUTHORIZED,
    AclBinding,
    acl_access,
    bypasses_deny,
    create_acls,
    delete_acls,
    read_acls,
)
from mirrorflow.metadata.sync_report import DENY_WRITE, SyncReport, settle
from mirrorflow.metadata.topic_sync import TopicSync, read_error, selected_topics, skip_reason
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.mm2.policy import IdentityReplicationPolicy
from mirrorflow.state.history import record_operation

PROPERTY = "mirror.read.only"
EVERYONE = "User:*"


def deny_binding(remote: str) -> AclBinding:
    """The binding that keeps one remote topic read-only."""
    return AclBinding("TOPIC", "LITERAL", remote, EVERYONE, "*", "WRITE", "DENY")


def is_read_only(flow: FlowConfig) -> bool:
    return bool(flow.props.get(PROPERTY, False))


def _key(flow: FlowConfig) -> str:
    return f"flows.{flow.name}.{PROPERTY}"


def target_problem(clients: FlowClients, probe: bool) -> str | None:
    """Why the flow's target cannot keep its remote topics read-only (None: it can). Changes nothing
    but, with `probe`, one DENY on a topic name nobody uses, created and deleted again
    (`bypasses_deny`)."""
    flow = clients.flow
    alias = flow.target
    admin = clients.admin("target")
    try:
        why = acl_access(admin, clients.admin_timeout)
        if why == NO_AUTHORIZER:
            return (
                f"cluster {alias!r} has no authorizer (its brokers set no authorizer.class.name), so it enforces "
                "no ACL: a read-only mirror is a DENY WRITE binding, which only an authorizer enforces. Set "
                "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer (with the flow's "
                f"target principal in super.users), or leave {PROPERTY} off"
            )
        if why == NOT_AUTHORIZED:
            return (
                f"the principal of cluster {alias!r}'s connection may not alter ACLs (DeleteAcls/CreateAcls were "
                "refused: it needs ALTER on the cluster), so it can neither put the read-only DENY on the "
                "remote topics nor lift it at a failover. Make it a super user of the cluster (super.users), "
                "which a read-only mirror needs anyway"
            )
        if probe and not bypasses_deny(admin, clients.admin_timeout):
            return (
                f"the principal of cluster {alias!r}'s connection is not a super user of that cluster "
                "(super.users): Kafka's ACLs have no exception, a DENY WRITE for User:* binds every principal "
                "but the super users, so it would refuse the flow's own copies too. Add the principal to the "
                "brokers' super.users"
            )
    except KafkaException as exc:
        raise read_error(alias, "checking what its principal may do with ACLs", exc) from None
    return None


def check_target(clients: FlowClients, probe: bool) -> None:
    """ConfigError naming `mirror.read.only` when the flow is read-only and its target cannot keep it
    so (`target_problem`); nothing for a flow that is not read-only."""
    if not is_read_only(clients.flow):
        return
    problem = target_problem(clients, probe)
    if problem:
        raise ConfigError([(_key(clients.flow), problem)])


def check_flows(cfg: Config) -> list[tuple[str, str]]:
    """`config validate`'s check of every enabled read-only flow's target, super user included:
    (key, problem) for each that cannot keep its remote topics read-only or does not answer."""
    problems: list[tuple[str, str]] = []
    for flow in cfg.flows.values():
        if not flow.enabled or not is_read_only(flow):
            continue
        try:
            with FlowClients(cfg, flow) as clients:
                problem = target_problem(clients, probe=True)
        except ClusterError as exc:
            problem = f"cannot check the target's authorizer: {exc}"
        if problem:
            problems.append((_key(flow), problem))
    return problems


def _denies(clients: FlowClients) -> tuple[set[AclBinding], str | None]:
    """The target's DENY bindings for User:* on topics, and why they cannot be known (`read_acls`)."""
    try:
        found, why = read_acls(
            clients.admin("target"), clients.admin_timeout, resource="TOPIC", principal=EVERYONE, permission="DENY"
        )
    except KafkaException as exc:
        raise read_error(clients.flow.target, "describing topic ACLs", exc) from None
    return set(found), why


def deny_writes(clients: FlowClients, report: SyncReport, dry_run: bool) -> None:
    """Put the read-only DENY on every remote topic of the topics the flow selects on its source that
    lacks it (module doc), as changes of `report` (concern `acls`). Refuses (ConfigError, nothing
    changed) when the target cannot keep them (`check_target`; a dry run does not probe)."""
    flow = clients.flow
    filters = FlowFilters.for_flow(flow)
    source = clients.admin("source")
    listing = TopicSync(filters, source, clients.admin("target"), flow.replication_factor, clients.admin_timeout)
    remotes = [remote for _, remote in selected_topics(filters, listing.partitions(source))]
    have, _ = _denies(clients)  # unknown (no authorizer, not allowed): check_target refuses
    missing = [deny_binding(r) for r in remotes if deny_binding(r) not in have]
    if not missing:
        return
    check_target(clients, probe=not dry_run)
    planned = [
        (
            acl,
            report.change(
                "acls",
                DENY_WRITE,
                acl.name,
                f"DENY WRITE for {EVERYONE} from host * ({PROPERTY}: only mirrorflow writes)",
            ),
        )
        for acl in missing
    ]
    if dry_run:
        return
    futures = create_acls(clients.admin("target"), missing, clients.admin_timeout)
    for acl, change in planned:
        settle(change, futures[acl], clients.admin_timeout)


def deny_or_raise(clients: FlowClients, what: str) -> list[str]:
    """`deny_writes` outside a sync (the failback): the remote topics denied now; MirrorflowError
    naming each topic whose DENY could not be created."""
    report = SyncReport(clients.flow.name, False, ["acls"])
    deny_writes(clients, report, dry_run=False)
    if report.failed:
        raise MirrorflowError(
            f"{what}: the read-only DENY could not be created on cluster {clients.flow.target!r} for "
            + "; ".join(f"{c.resource}: {c.error}" for c in report.failed)
        )
    return sorted(c.resource for c in report.changes)


def _upstream(filters: FlowFilters, remote: str) -> str | None:
    """The source topic whose remote topic `remote` is, when the flow selects it (None: not the flow's)."""
    p = filters.policy
    up: str | None = remote
    if not isinstance(p, IdentityReplicationPolicy):
        up = p.upstream_topic(remote) if p.topic_source(remote) == filters.source else None
    return up if up and skip_reason(filters, up) is None else None


def _mine(clients: FlowClients) -> tuple[list[AclBinding], str | None]:
    """The read-only DENY bindings on the flow's remote topics on its target, and why they cannot be known."""
    filters = FlowFilters.for_flow(clients.flow)
    found, why = _denies(clients)
    return [b for b in found if b == deny_binding(b.name) and _upstream(filters, b.name) is not None], why


def mirror_line(clients: FlowClients) -> str | None:
    """What the status page says of a read-only flow's mirror, read from the target's ACLs (None: the
    flow is not read-only)."""
    flow = clients.flow
    if not is_read_only(flow):
        return None
    held, why = _mine(clients)
    if why:
        return f"read-only mirror: whether the remote topics on {flow.target!r} are read-only is unknown ({why})"
    if held:
        return (
            f"read-only mirror: {len(held)} remote topic(s) on {flow.target!r} refuse every writer but "
            "mirrorflow (DENY WRITE for User:*) until a failover promotes them"
        )
    return f"read-only mirror: no remote topic on {flow.target!r} is read-only now (promoted, or not synced yet)"


def lift_denies(clients: FlowClients) -> list[str]:
    """The promotion: delete the read-only DENY of every remote topic of the flow on its target; the
    topics whose DENY was deleted (none when there was none: lifting twice is lifting once)."""
    mine, _ = _mine(clients)  # none known: nothing to lift (the preflight refused a principal that cannot)
    try:
        gone = delete_acls(clients.admin("target"), mine, clients.admin_timeout)
    except KafkaException as exc:
        raise read_error(clients.flow.target, "deleting the read-only DENY bindings", exc) from None
    return sorted({b.name for b in gone})


def promote(clients: FlowClients, by: str, via: str) -> list[str] | None:
    """The promotion of a read-only mirror at its failover: the DENY lifted (`lift_denies`) and, when
    it lifted any, a `promote` line in the flow's history. The topics promoted; None for a flow that
    is not read-only. MirrorflowError saying the failover stands and what to run when it fails."""
    flow = clients.flow
    if not is_read_only(flow):
        return None
    try:
        lifted = lift_denies(clients)
        if lifted:
            record_operation(
                clients,
                "promote",
                by,
                via=via,
                summary=f"read-only mirror promoted: the DENY WRITE for {EVERYONE} lifted from {len(lifted)} "
                f"remote topic(s) on {flow.target!r}; applications may write them",
                figures={"topics": len(lifted)},
            )
    except MirrorflowError as exc:
        raise MirrorflowError(
            f"flow {flow.name} was failed over, but its remote topics on {flow.target!r} may still be read-only: "
            f"{exc}. Run `mirrorflow failover --flow {flow.name}` again: it lifts what is left"
        ) from None
    return lifted
