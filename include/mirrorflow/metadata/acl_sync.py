"""Topic ACL sync for one flow, as MM2 does it (MirrorSourceConnector.syncTopicAcls): additive, literal topic ACLs only.

Only mirrorflow should write remote topics, so ALLOW WRITE is never synced and ALLOW ALL becomes
ALLOW READ; DENY entries are copied as they are. PREFIXED bindings are skipped (a prefix on the
source means something else once names are prefixed). Target ACLs are never deleted. A source
without an authorizer has no ACLs to sync: that is one log line, not an error.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from mirrorflow.metadata.sync_report import ADD_ACL, Change, SyncReport, settle
from mirrorflow.metadata.topic_sync import read_error, skip_reason
from mirrorflow.mm2.filters import FlowFilters

log = logging.getLogger(__name__)

ALL_TOPIC_ACLS = AclBindingFilter(
    ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
)


@dataclass(frozen=True)
class Acl:
    """A topic ACL binding as plain, hashable data."""

    topic: str
    pattern: str  # LITERAL | PREFIXED | ...
    principal: str
    host: str
    operation: str  # READ | WRITE | ALL | DESCRIBE | ...
    permission: str  # ALLOW | DENY

    @classmethod
    def of(cls, b: AclBinding) -> Acl:
        return cls(b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name, b.permission_type.name)

    def binding(self) -> AclBinding:
        return AclBinding(
            ResourceType.TOPIC,
            self.topic,
            ResourcePatternType[self.pattern],
            self.principal,
            self.host,
            AclOperation[self.operation],
            AclPermissionType[self.permission],
        )

    def describe(self) -> str:
        return f"{self.permission} {self.operation} for {self.principal} from host {self.host}"


def target_acl(acl: Acl, filters: FlowFilters) -> tuple[Acl | None, str | None]:
    """The binding to create on the target for a source binding, or (None, why it is skipped)."""
    if acl.pattern != "LITERAL":
        return None, f"{acl.pattern} ACLs are not synced (only LITERAL)"
    if acl.permission == "ALLOW" and acl.operation == "WRITE":
        return None, "ALLOW WRITE is not synced: only mirrorflow writes remote topics"
    if filters.remote_topic(acl.topic) == "*":
        # a literal `*` is Kafka's wildcard: kept as `*` (IdentityReplicationPolicy) it would grant on
        # every topic of the target, state topics included (the default policy makes it `A.*`, a name)
        return None, "the wildcard topic ACL (*) is not synced: on the target it would apply to every topic"
    why = skip_reason(filters, acl.topic)
    if why:
        return None, f"topic not replicated ({why})"
    op = "READ" if acl.permission == "ALLOW" and acl.operation == "ALL" else acl.operation
    return Acl(filters.remote_topic(acl.topic), "LITERAL", acl.principal, acl.host, op, acl.permission), None


def plan_acls(
    source_acls: Iterable[Acl], target_acls: set[Acl], filters: FlowFilters, report: SyncReport
) -> list[tuple[Acl, Change]]:
    """Adds add-acl changes (those the target lacks) and skips to `report`."""
    planned: list[tuple[Acl, Change]] = []
    seen: set[Acl] = set()
    for acl in sorted(source_acls, key=lambda a: (a.topic, a.principal, a.operation, a.permission, a.host)):
        new, why = target_acl(acl, filters)
        if new is None:
            report.skip("acls", f"{acl.topic} ({acl.describe()})", why or "")
            continue
        if new in target_acls or new in seen:
            continue
        seen.add(new)
        origin = "" if new.operation == acl.operation else f" (source: {acl.permission} {acl.operation})"
        planned.append((new, report.change("acls", ADD_ACL, new.topic, new.describe() + origin)))
    return planned


def _describe(admin: AdminClient, timeout: float) -> set[Acl]:
    return {Acl.of(b) for b in admin.describe_acls(ALL_TOPIC_ACLS, request_timeout=timeout).result(timeout)}


# A filter no real binding matches: a principal and a topic name nobody uses.
_PROBE = AclBindingFilter(
    ResourceType.TOPIC,
    "__mirrorflow_authorizer_probe__",
    ResourcePatternType.LITERAL,
    "User:__mirrorflow_authorizer_probe__",
    "*",
    AclOperation.READ,
    AclPermissionType.ALLOW,
)

NO_AUTHORIZER, NOT_AUTHORIZED = "no authorizer", "not authorized"


def probe(admin: AdminClient, timeout: float) -> str | None:
    """Why an empty DescribeAcls answer may not be the truth (None: it is).

    librdkafka turns DescribeAcls errors (SECURITY_DISABLED, CLUSTER_AUTHORIZATION_FAILED) into an
    empty list; DeleteAcls keeps them. The probe filter matches no binding anyone has, so it
    deletes nothing. Being allowed to run it (ALTER on the cluster) implies DESCRIBE.
    """
    try:
        for fut in admin.delete_acls([_PROBE], request_timeout=timeout).values():
            fut.result(timeout)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        code = err.code() if isinstance(err, KafkaError) else None
        if code == KafkaError.SECURITY_DISABLED:
            return NO_AUTHORIZER
        if code == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
            return NOT_AUTHORIZED
        raise
    return None


def _security_disabled(exc: KafkaException) -> bool:
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and err.code() == KafkaError.SECURITY_DISABLED


def read_acls(admin: AdminClient, alias: str, timeout: float) -> tuple[set[Acl], str | None]:
    """The cluster's topic ACLs, and if they cannot be known, why (NO_AUTHORIZER / NOT_AUTHORIZED)."""
    try:
        acls = _describe(admin, timeout)
    except KafkaException as exc:
        if _security_disabled(exc):
            return set(), NO_AUTHORIZER
        raise read_error(alias, "describing topic ACLs", exc) from None
    if acls:
        return acls, None
    try:
        return acls, probe(admin, timeout)
    except KafkaException as exc:
        raise read_error(alias, "checking the authorizer", exc) from None


def sync_acls(
    filters: FlowFilters, source: AdminClient, target: AdminClient, report: SyncReport, dry_run: bool, timeout: float
) -> None:
    source_acls, why = read_acls(source, filters.source, timeout)
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
    target_acls, why = read_acls(target, filters.target, timeout) if source_acls else (set(), None)
    if why == NO_AUTHORIZER:
        log.info("ACL sync skipped for %s: target cluster %s has no authorizer", report.flow, filters.target)
        report.skip("acls", "*", f"target cluster {filters.target} has no authorizer (ACLs cannot be created)")
        return
    # NOT_AUTHORIZED on the target: creating will fail per binding with the broker's reason
    planned = plan_acls(source_acls, target_acls, filters, report)
    if dry_run or not planned:
        return
    futures = target.create_acls([a.binding() for a, _ in planned], request_timeout=timeout)
    by_acl = {Acl.of(b): f for b, f in futures.items()}
    for acl, change in planned:
        settle(change, by_acl[acl], timeout)
