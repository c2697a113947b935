"""Topic ACL sync for one flow, as MM2 does it (MirrorSourceConnector.syncTopicAcls): additive, literal topic ACLs only.

Only mirrorflow should write remote topics, so ALLOW WRITE is never synced and ALLOW ALL becomes
ALLOW READ; DENY entries are copied as they are. PREFIXED bindings are skipped (a prefix on the
source means something else once names are prefixed). Target ACLs are never deleted. A source
without an authorizer has no ACLs to sync: that is one log line, not an error.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from mirrorflow.kafka.acl_admin import NO_AUTHORIZER, NOT_AUTHORIZED, AclBinding, create_acls, read_acls
from mirrorflow.metadata.sync_report import ADD_ACL, DONE, Change, SyncReport, settle
from mirrorflow.metadata.topic_sync import read_error, skip_reason
from mirrorflow.mm2.filters import FlowFilters

log = logging.getLogger(__name__)


def entry(acl: AclBinding) -> str:
    """The binding's access control entry in words, as the sync report prints it."""
    return f"{acl.permission} {acl.operation} for {acl.principal} from host {acl.host}"


def target_acl(acl: AclBinding, filters: FlowFilters) -> tuple[AclBinding | None, str | None]:
    """The binding to create on the target for a source binding, or (None, why it is skipped)."""
    if acl.pattern != "LITERAL":
        return None, f"{acl.pattern} ACLs are not synced (only LITERAL)"
    if acl.permission == "ALLOW" and acl.operation == "WRITE":
        return None, "ALLOW WRITE is not synced: only mirrorflow writes remote topics"
    if filters.remote_topic(acl.name) == "*":
        # a literal `*` is Kafka's wildcard: kept as `*` (IdentityReplicationPolicy) it would grant on
        # every topic of the target, state topics included (the default policy makes it `A.*`, a name)
        return None, "the wildcard topic ACL (*) is not synced: on the target it would apply to every topic"
    why = skip_reason(filters, acl.name)
    if why:
        return None, f"topic not replicated ({why})"
    op = "READ" if acl.permission == "ALLOW" and acl.operation == "ALL" else acl.operation
    return AclBinding(
        "TOPIC", "LITERAL", filters.remote_topic(acl.name), acl.principal, acl.host, op, acl.permission
    ), None


def plan_acls(
    source_acls: Iterable[AclBinding], target_acls: set[AclBinding], filters: FlowFilters, report: SyncReport
) -> list[tuple[AclBinding, Change]]:
    """Adds add-acl changes (those the target lacks) and skips to `report`."""
    planned: list[tuple[AclBinding, Change]] = []
    seen: set[AclBinding] = set()
    for acl in sorted(source_acls, key=lambda a: (a.name, a.principal, a.operation, a.permission, a.host)):
        new, why = target_acl(acl, filters)
        if new is None:
            report.skip("acls", f"{acl.name} ({entry(acl)})", why or "")
            continue
        if new in target_acls or new in seen:
            continue
        seen.add(new)
        origin = "" if new.operation == acl.operation else f" (source: {acl.permission} {acl.operation})"
        planned.append((new, report.change("acls", ADD_ACL, new.name, entry(new) + origin)))
    return planned


def _topic_acls(admin: AdminClient, alias: str, timeout: float) -> tuple[set[AclBinding], str | None]:
    """The cluster's topic ACLs, and if they cannot be known, why (NO_AUTHORIZER / NOT_AUTHORIZED)."""
    try:
        acls, why = read_acls(admin, timeout, resource="TOPIC")
    except KafkaException as exc:
        raise read_error(alias, "describing topic ACLs", exc) from None
    return set(acls), why


def sync_acls(
    filters: FlowFilters, source: AdminClient, target: AdminClient, report: SyncReport, dry_run: bool, timeout: float
) -> None:
    source_acls, why = _topic_acls(source, filters.source, timeout)
    if why == NO_AUTHORIZER:
        log.info("ACL sync skipped for %s: source cluster %s has no authorizer", report.flow, filters.source)
        report.skip("acls", "*", f"source cluster {filters.source} has no authorizer (no ACLs to sync)")
        return
    if why == NOT_AUTHORIZED:
        log.warning("ACL sync skipped for %s: not allowed to read the ACLs of %s", report.flow, filters.source)
        report.skip(
            "acls",
            "*",
            f"the ACLs of source cluster {filters.source} cannot be read: its principal needs DESCRIBE on the cluster",
        )
        return
    target_acls, why = _topic_acls(target, filters.target, timeout) if source_acls else (set(), None)
    if why == NO_AUTHORIZER:
        log.info("ACL sync skipped for %s: target cluster %s has no authorizer", report.flow, filters.target)
        report.skip("acls", "*", f"target cluster {filters.target} has no authorizer (ACLs cannot be created)")
        return
    # NOT_AUTHORIZED on the target: creating will fail per binding with the broker's reason
    planned = plan_acls(source_acls, target_acls, filters, report)
    if dry_run or not planned:
        return
    futures = create_acls(target, [a for a, _ in planned], timeout)
    for acl, change in planned:
        settle(change, futures[acl], timeout)
    shown([a for a, c in planned if c.status == DONE], target, filters.target, timeout)


def shown(created: list[AclBinding], target: AdminClient, alias: str, timeout: float) -> None:
    """Wait (up to `timeout`) until the target's authorizer shows the bindings just created: a KRaft
    broker applies ACL records a moment after CreateAcls answered, and until then a describe, the next
    sync's plan among them, does not see them (a full run's sync test read none right after its sync,
    on a loaded machine). Past the timeout one warning: they were created, the broker decides when."""
    if not created:
        return
    deadline = time.monotonic() + timeout
    missing = set(created)
    while True:
        with contextlib.suppress(KafkaException):
            missing -= set(read_acls(target, timeout, resource="TOPIC")[0])
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if missing:
        log.warning(
            "ACL sync: cluster %s does not show %d of the %d ACLs created after %.0f s",
            alias,
            len(missing),
            len(created),
            timeout,
        )
