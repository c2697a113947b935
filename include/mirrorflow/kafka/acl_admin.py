"""ACLs on one cluster: the binding as plain data, describing (and whether an empty answer is the
truth), creating. The only place ACLs are read from or written to a cluster.

`AclBinding` is Kafka's binding (a resource pattern and an access control entry) as hashable names,
so ACL sync, the required ACLs and the applications' ACLs after a failover compare, sort and print
one type. librdkafka calls Kafka's CLUSTER resource type BROKER; here it is CLUSTER, as in Kafka's
own tools.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import admin as ck

from mirrorflow.kafka.connection import kafka_error

NO_AUTHORIZER, NOT_AUTHORIZED = "no authorizer", "not authorized"

# A filter no real binding matches: a principal and a topic name nobody uses.
_PROBE = ck.AclBindingFilter(
    ck.ResourceType.TOPIC,
    "__mirrorflow_authorizer_probe__",
    ck.ResourcePatternType.LITERAL,
    "User:__mirrorflow_authorizer_probe__",
    "*",
    ck.AclOperation.READ,
    ck.AclPermissionType.ALLOW,
)


@dataclass(frozen=True)
class AclBinding:
    """One ACL binding: who (principal, host) may or may not (permission) do what (operation) on
    which resources (resource type, pattern type, name)."""

    resource: str  # TOPIC | GROUP | TRANSACTIONAL_ID | CLUSTER
    pattern: str  # LITERAL | PREFIXED
    name: str
    principal: str
    host: str
    operation: str  # READ | WRITE | ALL | DESCRIBE | ...
    permission: str  # ALLOW | DENY

    @classmethod
    def allow(cls, resource: str, pattern: str, name: str, principal: str, operation: str) -> AclBinding:
        """An ALLOW binding from any host."""
        return cls(resource, pattern, name, principal, "*", operation, "ALLOW")

    def matches(self, name: str) -> bool:
        """Whether the binding's resource pattern covers a resource called `name`."""
        if self.pattern == "LITERAL":
            return self.name in ("*", name)
        return self.pattern == "PREFIXED" and name.startswith(self.name)


def _restype(name: str) -> ck.ResourceType:
    return ck.ResourceType.BROKER if name == "CLUSTER" else ck.ResourceType[name]


def to_kafka(acl: AclBinding) -> ck.AclBinding:
    """The binding as confluent-kafka's type."""
    return ck.AclBinding(
        _restype(acl.resource),
        acl.name,
        ck.ResourcePatternType[acl.pattern],
        acl.principal,
        acl.host,
        ck.AclOperation[acl.operation],
        ck.AclPermissionType[acl.permission],
    )


def _from_kafka(b: ck.AclBinding) -> AclBinding:
    resource = "CLUSTER" if b.restype == ck.ResourceType.BROKER else b.restype.name
    return AclBinding(
        resource, b.resource_pattern_type.name, b.name, b.principal, b.host, b.operation.name, b.permission_type.name
    )


def _why_empty(admin: ck.AdminClient, timeout: float) -> str | None:
    """Why an empty DescribeAcls answer may not be the truth (None: it is).

    DeleteAcls keeps the errors DescribeAcls loses. The probe filter matches no binding anyone has,
    so it deletes nothing. Being allowed to run it (ALTER on the cluster) implies DESCRIBE.
    """
    try:
        for fut in admin.delete_acls([_PROBE], request_timeout=timeout).values():
            fut.result(timeout)
    except KafkaException as exc:
        code = _code(exc)
        if code == KafkaError.SECURITY_DISABLED:
            return NO_AUTHORIZER
        if code == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
            return NOT_AUTHORIZED
        raise
    return None


def read_acls(
    admin: ck.AdminClient,
    timeout: float,
    resource: str = "ANY",
    principal: str | None = None,
    permission: str = "ANY",
) -> tuple[list[AclBinding], str | None]:
    """The bindings of any name, pattern, host and operation that match the rest of the filter, and
    if they cannot be known, why (NO_AUTHORIZER / NOT_AUTHORIZED). Other failures raise the
    client's KafkaException.

    librdkafka turns DescribeAcls errors (SECURITY_DISABLED, CLUSTER_AUTHORIZATION_FAILED) into an
    empty list: an empty answer is checked with a probe (`_why_empty`)."""
    flt = ck.AclBindingFilter(
        ck.ResourceType[resource],
        None,
        ck.ResourcePatternType.ANY,
        principal,
        None,
        ck.AclOperation.ANY,
        ck.AclPermissionType[permission],
    )
    try:
        found = [_from_kafka(b) for b in admin.describe_acls(flt, request_timeout=timeout).result(timeout)]
    except KafkaException as exc:
        if _code(exc) == KafkaError.SECURITY_DISABLED:
            return [], NO_AUTHORIZER
        raise
    return found, None if found else _why_empty(admin, timeout)


def create_acls(admin: ck.AdminClient, acls: Iterable[AclBinding], timeout: float) -> dict[AclBinding, Future]:
    """Create the bindings (one request); each binding's future says whether it was created."""
    futures = admin.create_acls([to_kafka(a) for a in acls], request_timeout=timeout)
    return {_from_kafka(b): f for b, f in futures.items()}


def _code(exc: KafkaException) -> int | None:
    err = kafka_error(exc)
    return err.code() if err is not None else None
