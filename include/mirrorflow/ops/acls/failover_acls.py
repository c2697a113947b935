"""The ACLs the applications need on the target after a failover (`mirrorflow acls --after-failover`).

After a failover of A->B the applications move to B: consumers resume the flow's groups there and
producers write there. The flow's own ACLs (ops.acls.required_acls) do not cover them, and MirrorMaker 2's ACL
sync copies only literal topic READ ACLs (never WRITE, never group ACLs), so on a cluster that
enforces ACLs the moved applications would be refused. What they need is derived from what they
could do on A:

* **From A's ACLs** (when A answers): every principal but the flow's own with ALLOW READ (or ALL)
  on a topic the flow replicated is a consumer: on B it needs READ on the topics it will read --
  with IdentityReplicationPolicy the same names; with the default policy the remote topic
  `A.<topic>` (the replicated records, where its group resumes) and `<topic>` (B's own, where the
  producers write after the failover) -- and READ on its group bindings that match a group of the
  flow (the same pattern and name: groups keep their names). A principal with ALLOW WRITE (or ALL)
  on such a topic is a producer: on B it needs WRITE and DESCRIBE on `<topic>` (the same name
  under both policies: a remote topic is written only by mirrorflow), and its transactional-id
  bindings, if it has any, as they are. DENY bindings are not carried over (a note counts them).
* **From B's replicated ACLs** (A does not answer): the topic READ ACLs the ACL sync copied name
  the consumers and their topics; which groups they use and who writes cannot be told from B, and
  the report says so.

Topics are named LITERAL, one binding per topic the flow replicated (its progress on B), whatever
pattern granted it on A: a prefix means something else once names are prefixed, and a literal
name grants nothing more than the application had. Checked against what B holds (present /
missing), created with `apply` through the target admin alias, like ops.acls.required_acls.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import KafkaException

from mirrorflow.clients import FlowClients, cluster_connection
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ClusterError, ConfigError
from mirrorflow.groups.checkpoint import CheckpointStore
from mirrorflow.kafka.acl_admin import NO_AUTHORIZER, AclBinding, read_acls
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.ops.acls.required_acls import (
    AclsReport,
    Need,
    create_missing,
    mark_present,
    required_acls,
    unreadable,
)
from mirrorflow.state.store import StateStore

READS = ("READ", "ALL")
WRITES = ("WRITE", "ALL")
DESCRIBE_TIMEOUT_S = 15.0  # A may be gone: how long to wait for its ACLs before reading B's


def after_failover_acls(
    cfg: Config,
    flow: FlowConfig,
    apply: bool = False,
    principals: dict[str, str] | None = None,
    admins: dict[str, str] | None = None,
) -> AclsReport:
    """What the applications' principals need on the flow's target after a failover (module doc),
    marked present or missing on the target; with `apply`, the missing ones created (through the
    `admins["target"]` alias when given; `admins["source"]` reads A's ACLs)."""
    admins = admins or {}
    for side in ("source", "target"):
        if admins.get(side) and admins[side] not in cfg.clusters:
            raise ConfigError([(f"--{side}-admin", f"unknown cluster alias {admins[side]!r}")])
    _, own = required_acls(cfg, flow, principals=principals)
    filters = FlowFilters.for_flow(flow)
    with FlowClients(cfg, flow) as clients:
        topics = sorted({t for t, _ in StateStore(clients).progress() if filters.should_replicate_topic(t)})
        groups = sorted(g for g in CheckpointStore.load(clients).groups() if filters.should_replicate_group(g))
    report = AclsReport(flow.name, {}, [], after_failover=f"the ACLs on cluster {flow.source!r}")
    if not topics:
        report.notes.append(f"flow {flow.name} has replicated nothing to {flow.target!r}: no application needs")
        return report
    skip = set(own.values())
    on_a, why = _read_source(cfg, flow, admins)
    if on_a is None or why is not None:
        _derive_from_target(cfg, flow, admins, report, why, topics, skip)
    else:
        report.needs = _from_source(flow, filters, topics, groups, on_a, skip)
        deny = sum(1 for b in on_a if b.permission == "DENY" and b.principal not in skip)
        if deny:
            report.notes.append(f"{deny} DENY binding(s) on {flow.source!r} are not carried over")
    report.principals = own  # the flow's own principals (left out)
    if not report.needs:
        report.notes.append("no principal but the flow's own reads or writes the flow's topics")
        return report
    _check(cfg, flow, report, apply, admins)
    return report


def _read_source(cfg: Config, flow: FlowConfig, admins: dict[str, str]) -> tuple[list[AclBinding] | None, str | None]:
    """A's ACLs, or None and why not (A may be gone: it is waited for DESCRIBE_TIMEOUT_S at most)."""
    source = cluster_connection(cfg.clusters[admins.get("source") or flow.source])
    try:
        return read_acls(source.admin(), DESCRIBE_TIMEOUT_S)
    except KafkaException as exc:
        return None, str(source.describe_failure(exc))
    except ClusterError as exc:  # A does not answer
        return None, str(exc)


def _derive_from_target(
    cfg: Config,
    flow: FlowConfig,
    admins: dict[str, str],
    report: AclsReport,
    why: str | None,
    topics: list[str],
    skip: set[str],
) -> None:
    """A's ACLs cannot be read: the needs from the topic READ ACLs the ACL sync replicated to B, and
    a note saying what that cannot tell."""
    report.after_failover = f"the replicated ACLs on cluster {flow.target!r}"
    if why == NO_AUTHORIZER:
        report.notes.append(
            f"cluster {flow.source!r} has no authorizer: its applications had no ACLs to carry over; "
            f"derived from the topic READ ACLs replicated to {flow.target!r} only"
        )
    else:
        report.notes.append(
            f"the ACLs of cluster {flow.source!r} cannot be read ({why or 'no answer'}): derived from the topic "
            f"READ ACLs the ACL sync replicated to {flow.target!r}; which groups the consumers use and which "
            f"principals write cannot be told from {flow.target!r} (MM2's ACL sync copies neither): grant those "
            "by hand or run this again when A answers"
        )
    on_b = _read_target(cfg, flow, admins)
    report.needs = _from_target(flow, FlowFilters.for_flow(flow), topics, on_b, skip)


def _read_target(cfg: Config, flow: FlowConfig, admins: dict[str, str]) -> list[AclBinding]:
    conn = cluster_connection(cfg.clusters[admins.get("target") or flow.target])
    try:
        return read_acls(conn.admin(), 30)[0]
    except KafkaException as exc:
        raise conn.describe_failure(exc) from None


def _topic_needs(
    flow: FlowConfig, filters: FlowFilters, principal: str, topic: str, reads: bool, writes: bool, why: str
) -> list[Need]:
    remote = filters.remote_topic(topic)
    out = []

    def need(name: str, op: str, what: str) -> None:
        out.append(_need(flow, "TOPIC", "LITERAL", name, principal, op, f"{what} ({why})"))

    if reads:
        need(remote, "READ", "consumer: the replicated records, where its group resumes")
        if remote != topic:
            need(topic, "READ", f"consumer: {flow.target}'s own topic, written by the producers after the failover")
    if writes:
        need(topic, "WRITE", "producer")
        need(topic, "DESCRIBE", "producer")
    return out


def _from_source(
    flow: FlowConfig,
    filters: FlowFilters,
    topics: list[str],
    groups: list[str],
    on_a: list[AclBinding],
    skip: set[str],
) -> list[Need]:
    allowed = [b for b in on_a if b.permission == "ALLOW" and b.principal not in skip]
    needs: list[Need] = []
    for principal in sorted({b.principal for b in allowed}):
        mine = [b for b in allowed if b.principal == principal]
        tops = [b for b in mine if b.resource == "TOPIC"]
        read = {t for t in topics if any(b.operation in READS and b.matches(t) for b in tops)}
        write = {t for t in topics if any(b.operation in WRITES and b.matches(t) for b in tops)}
        for t in sorted(read | write):
            verbs = " and ".join(v for v, yes in (("read", t in read), ("write", t in write)) if yes)
            needs += _topic_needs(
                flow, filters, principal, t, t in read, t in write, f"it may {verbs} {t} on {flow.source}"
            )
        if read:
            for b in mine:
                if b.resource == "GROUP" and b.operation in READS and any(b.matches(g) for g in groups):
                    why = f"consumer: its group, resumed on {flow.target} (READ on it on {flow.source})"
                    needs.append(_need(flow, "GROUP", b.pattern, b.name, principal, "READ", why))
        if write:
            for b in mine:
                if b.resource == "TRANSACTIONAL_ID" and b.operation in ("WRITE", "DESCRIBE", "ALL"):
                    why = f"producer: its transactional ids (as on {flow.source})"
                    for op in ("WRITE", "DESCRIBE") if b.operation == "ALL" else (b.operation,):
                        needs.append(_need(flow, "TRANSACTIONAL_ID", b.pattern, b.name, principal, op, why))
    return _unique(needs)


def _from_target(
    flow: FlowConfig, filters: FlowFilters, topics: list[str], on_b: list[AclBinding], skip: set[str]
) -> list[Need]:
    needs: list[Need] = []
    for t in topics:
        remote = filters.remote_topic(t)
        readers = {
            b.principal
            for b in on_b
            if b.permission == "ALLOW" and b.resource == "TOPIC" and b.operation in READS and b.matches(remote)
        }
        for principal in sorted(readers - skip):
            why = f"it may read {remote} on {flow.target} (replicated ACL)"
            needs += _topic_needs(flow, filters, principal, t, True, False, why)
    return _unique(needs)


def _need(flow: FlowConfig, resource: str, pattern: str, name: str, principal: str, op: str, why: str) -> Need:
    return Need("target", flow.target, AclBinding.allow(resource, pattern, name, principal, op), why)


def _unique(needs: Iterable[Need]) -> list[Need]:
    seen: dict[AclBinding, Need] = {}
    for n in needs:
        seen.setdefault(n.acl, n)
    return sorted(seen.values(), key=lambda n: (n.acl.principal, n.acl.resource, n.acl.name, n.acl.operation))


def _check(cfg: Config, flow: FlowConfig, report: AclsReport, apply: bool, admins: dict[str, str]) -> None:
    use = admins.get("target") or flow.target
    conn = cluster_connection(cfg.clusters[use])
    admin = conn.admin()
    idx = list(range(len(report.needs)))
    if not mark_present(admin, conn, report, idx):
        report.notes.append(unreadable("target", flow.target, use, apply))
        report.applied = False
        return
    if apply:
        create_missing(admin, conn, report, idx)
    report.applied = apply


__all__ = ["after_failover_acls"]
