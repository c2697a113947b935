"""ACLs on one cluster: the binding as plain data, describing (and whether an empty answer is the
truth), creating, deleting exact bindings, and what the connection's principal may do with ACLs
(`acl_access`: alter them at all; `bypasses_deny`: a super user, whom no DENY binds). The only place
ACLs are read from or written to a cluster.

`AclBinding` is Kafka's binding (a resource pattern and an access control entry) as hashable names,
so ACL sync, the required ACLs and the applications' ACLs after a failover compare, sort and print
one type. librdkafka calls Kafka's CLUSTER resource type BROKER; here it is CLUSTER, as in Kafka's
own tools.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection
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


def _fields(acl: AclBinding) -> tuple[Any, ...]:
    """The binding's fields as confluent-kafka's binding and filter types take them."""
    return (
        _restype(acl.resource),
        acl.name,
        ck.ResourcePatternType[acl.pattern],
        acl.principal,
        acl.host,
        ck.AclOperation[acl.operation],
        ck.AclPermissionType[acl.permission],
    )


def to_kafka(acl: AclBinding) -> ck.AclBinding:
    """The binding as confluent-kafka's type."""
    return ck.AclBinding(*_fields(acl))


def _from_kafka(b: ck.AclBinding) -> AclBinding:
    resource = "CLUSTER" if b.restype == ck.ResourceType.BROKER else b.restype.name
    return AclBinding(
        resource, b.resource_pattern_type.name, b.name, b.principal, b.host, b.operation.name, b.permission_type.name
    )


def acl_access(admin: ck.AdminClient, timeout: float) -> str | None:
    """Whether the connection's principal may alter the cluster's ACLs: None (it may), NO_AUTHORIZER
    or NOT_AUTHORIZED. Changes nothing. Also why an empty DescribeAcls answer may not be the truth.

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
    empty list: an empty answer is checked with a probe (`acl_access`)."""
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
    return found, None if found else acl_access(admin, timeout)


def create_acls(admin: ck.AdminClient, acls: Iterable[AclBinding], timeout: float) -> dict[AclBinding, Future]:
    """Create the bindings (one request); each binding's future says whether it was created."""
    futures = admin.create_acls([to_kafka(a) for a in acls], request_timeout=timeout)
    return {_from_kafka(b): f for b, f in futures.items()}


def delete_acls(admin: ck.AdminClient, acls: Iterable[AclBinding], timeout: float) -> list[AclBinding]:
    """Delete exactly these bindings (one request; a binding that is not there is no error): the
    ones the cluster deleted. The client's KafkaException when a deletion is refused."""
    found: list[AclBinding] = []
    filters = [ck.AclBindingFilter(*_fields(a)) for a in acls]
    if not filters:
        return found
    for fut in admin.delete_acls(filters, request_timeout=timeout).values():
        found += [_from_kafka(b) for b in fut.result(timeout)]
    return found


def bypasses_deny(admin: ck.AdminClient, timeout: float, settle_s: float = 1.0) -> bool:
    """Whether the connection's principal is a super user of the cluster (`super.users`): the only
    principal a DENY binding for `User:*` does not bind (Kafka's authorizers check super users before
    any binding; DENY beats ALLOW for everyone else). Kafka tells no client the super users
    (DescribeConfigs hides `super.users`), so this asks the authorizer: a DENY DESCRIBE for `User:*` on
    a topic name nobody uses (`__mirrorflow_probe_<random>`) is created, the principal describes that
    topic -- a super user hears "unknown topic", anyone else "not authorized" -- and the binding is
    deleted again. Needs ALTER on the cluster (`acl_access`); the client's KafkaException otherwise.

    The answer is read again for `settle_s` after the binding is known to the cluster, so a broker that
    applied it a moment later (KRaft brokers apply ACL records as metadata arrives) cannot pass a
    principal the binding would refuse."""
    probe = AclBinding("TOPIC", "LITERAL", f"__mirrorflow_probe_{uuid.uuid4().hex}", "User:*", "*", "DESCRIBE", "DENY")
    for fut in create_acls(admin, [probe], timeout).values():
        fut.result(timeout)
    try:
        deadline = time.monotonic() + timeout
        while probe not in read_acls(admin, timeout, resource="TOPIC", principal="User:*", permission="DENY")[0]:
            if time.monotonic() > deadline:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "the probe binding never showed", fatal=False))
            time.sleep(0.1)
        end = time.monotonic() + settle_s
        while True:
            try:
                admin.describe_topics(TopicCollection([probe.name]), request_timeout=timeout)[probe.name].result(
                    timeout
                )
            except KafkaException as exc:
                code = _code(exc)
                if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    return False
                if code != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise
            if time.monotonic() >= end:
                return True
            time.sleep(0.2)
    finally:
        delete_acls(admin, [probe], timeout)


def _code(exc: KafkaException) -> int | None:
    err = kafka_error(exc)
    return err.code() if err is not None else None
