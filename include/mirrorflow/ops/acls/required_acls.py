"""The ACLs a flow's principals need, printed or created (`mirrorflow acls --flow A->B [--apply]`).

The source documents recommend read-only access to the source, and mirrorflow runs with it:

* **source principal** (the source cluster's connection): READ, DESCRIBE and DESCRIBE_CONFIGS on
  the replicated topics (and the `heartbeats` topic, which is replicated like a topic), DESCRIBE on
  the checkpointed groups (fetching a group's committed offsets needs only DESCRIBE; READ would let
  it commit), READ and DESCRIBE on mirrorflow's reader groups (prefix `mirrorflow-`: librdkafka
  asks for a group coordinator even for a consumer that only assigns; they never commit), DESCRIBE
  on the cluster (listing groups, reading ACLs for the ACL sync). Nothing is
  written to the source: the reverse heartbeat MM2 writes there is skipped when it is not allowed.
* **target principal** (the target cluster's connection): on the remote topics CREATE, WRITE, READ,
  DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS and ALTER (new partitions); the same plus DELETE
  (truncating the offset map) on the flow's state topics (prefix `mirrorflow.<flow id>.`); the
  checkpoints and heartbeats topics; WRITE and DESCRIBE on the transactional ids (prefix
  `mirrorflow-<flow id>-`); READ and DESCRIBE on the readers' groups (prefix `mirrorflow-`) and on
  the synced groups; IDEMPOTENT_WRITE and DESCRIBE on the cluster, and ALTER on it when the flow
  syncs topic ACLs (creating ACLs).

Topic and group regexes become ACL patterns: `orders\\..*` -> PREFIXED `orders.`, a plain name ->
LITERAL, `.*` -> LITERAL `*` (every name); any other regex -> one LITERAL binding per name it
matches now (run `acls --apply` again when new ones appear).

`--apply` creates what is missing with the clusters' own connections, or with the connections of
other cluster aliases given as `admin_source` / `admin_target` (the same cluster as an admin user):
creating ACLs needs ALTER on the cluster, which the flow's principals should not have.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from mirrorflow.clients import cluster_connection
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ConfigError, MirrorflowError
from mirrorflow.kafka.acl_admin import AclBinding, create_acls, read_acls
from mirrorflow.kafka.connection import ClusterConnection
from mirrorflow.kafka.log_reader import READER_GROUP
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.reporting import Report
from mirrorflow.state.names import client_prefix, state_topic_prefix

SOURCE_TOPIC_OPS = ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")
TARGET_TOPIC_OPS = ("CREATE", "WRITE", "READ", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALTER")
STATE_TOPIC_OPS = ("CREATE", "WRITE", "READ", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "DELETE")
INTERNAL_TOPIC_OPS = ("CREATE", "WRITE", "READ", "DESCRIBE", "DESCRIBE_CONFIGS")
CLUSTER = "kafka-cluster"
_PLAIN = re.compile(r"(?:[A-Za-z0-9_\-]|\\[.\-_])*")


@dataclass(frozen=True)
class Need:
    """One ACL binding (ALLOW, any host) a principal needs on one side of the flow, and why."""

    side: str  # source | target
    cluster: str
    acl: AclBinding
    why: str

    def describe(self) -> str:
        a = self.acl
        what = f"{a.resource} {a.name!r}" + (" (prefix)" if a.pattern == "PREFIXED" else "")
        return f"ALLOW {a.operation} on {what} for {a.principal}"

    def to_dict(self) -> dict[str, Any]:
        a = self.acl
        return {
            "side": self.side,
            "cluster": self.cluster,
            "principal": a.principal,
            "resource": a.resource,
            "pattern": a.pattern,
            "name": a.name,
            "operation": a.operation,
            "why": self.why,
            "permission": a.permission,
            "host": a.host,
        }


@dataclass
class AclsReport(Report):
    flow: str
    principals: dict[str, str]  # side -> principal
    needs: list[Need] = field(default_factory=list)
    status: dict[int, str] = field(default_factory=dict)  # index in needs -> present | missing | created | error
    notes: list[str] = field(default_factory=list)
    applied: bool = False
    after_failover: str | None = None  # the applications' ACLs after a failover (ops.acls.failover_acls), derived from

    @property
    def missing(self) -> int:
        return sum(1 for s in self.status.values() if s in ("missing", "error"))

    @property
    def ok(self) -> bool:
        return not any(s == "error" for s in self.status.values())

    def lines(self) -> list[str]:
        if self.after_failover is not None:
            return self._application_lines()
        out = [f"ACLs of flow {self.flow}" + (" (applied)" if self.applied else "")]
        for side in ("source", "target"):
            items = [(i, n) for i, n in enumerate(self.needs) if n.side == side]
            cluster = items[0][1].cluster if items else "?"
            out.append(f"  {side} cluster {cluster!r}, principal {self.principals.get(side)}:")
            for i, n in items:
                status = self.status.get(i)
                out.append(f"    {n.describe()}" + (f" [{status}]" if status else "") + f"  -- {n.why}")
        out += [f"  note: {n}" for n in self.notes]
        return out

    def _application_lines(self) -> list[str]:
        cluster = self.needs[0].cluster if self.needs else "?"
        out = [
            f"ACLs the applications of flow {self.flow} need on cluster {cluster!r} after a failover, derived from "
            f"{self.after_failover}" + (" (applied)" if self.applied else "")
        ]
        for principal in sorted({n.acl.principal for n in self.needs}):
            out.append(f"  {principal}:")
            for i, n in enumerate(self.needs):
                if n.acl.principal == principal:
                    status = self.status.get(i)
                    out.append(f"    {n.describe()}" + (f" [{status}]" if status else "") + f"  -- {n.why}")
        out += [f"  note: {n}" for n in self.notes]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "after_failover": self.after_failover,
            "principals": self.principals,
            "applied": self.applied,
            "missing": self.missing,
            "ok": self.ok,
            "acls": [{**n.to_dict(), "status": self.status.get(i)} for i, n in enumerate(self.needs)],
            "notes": self.notes,
        }


def principal_of(cfg: Config, alias: str) -> str | None:
    """The Kafka principal a cluster's connection authenticates as, when the settings tell it."""
    conf = cfg.clusters[alias].client_config()
    protocol = str(conf.get("security.protocol", "PLAINTEXT")).upper()
    mech = str(conf.get("sasl.mechanism") or conf.get("sasl.mechanisms") or "").upper()
    if protocol == "PLAINTEXT":
        return "User:ANONYMOUS"
    if (
        protocol.startswith("SASL")
        and mech in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
        and conf.get("sasl.username")
    ):
        return f"User:{conf['sasl.username']}"
    if mech == "OAUTHBEARER":
        m = re.search(r"principal=([^\s]+)", str(conf.get("sasl.oauthbearer.config", "")))
        return f"User:{m.group(1)}" if m else None
    return None  # TLS client certificates, GSSAPI: the broker's principal mapping decides


def patterns(regexes: Iterable[str], names: Iterable[str], chosen: Any) -> list[tuple[str, str]]:
    """(pattern type, name) ACL patterns covering what a regex list selects (module docstring)."""
    out: list[tuple[str, str]] = []
    names = sorted(names)
    for rx in regexes:
        rx = str(rx)
        if rx in (".*", ".+"):
            out.append(("LITERAL", "*"))
        elif _PLAIN.fullmatch(rx):
            out.append(("LITERAL", _unescape(rx)))
        elif rx.endswith(".*") and _PLAIN.fullmatch(rx[:-2]) and rx[:-2]:
            out.append(("PREFIXED", _unescape(rx[:-2])))
        else:
            one = re.compile(rx)
            out += [("LITERAL", n) for n in names if one.fullmatch(n) and chosen(n)]
    return sorted(set(out))


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", r"\1", s)


def _principals(cfg: Config, flow: FlowConfig, given: dict[str, str]) -> dict[str, str]:
    """Each side's principal: as given, else as its cluster's settings tell it (else a ConfigError)."""
    p = dict(given)
    for side, alias in (("source", flow.source), ("target", flow.target)):
        if p.get(side):
            continue
        found = principal_of(cfg, alias)
        if found is None:
            why = (
                f"the principal of cluster {alias!r} cannot be told from its settings (TLS certificate or "
                f"GSSAPI): give it, e.g. --{side}-principal User:mirrorflow"
            )
            raise ConfigError([(f"--{side}-principal", why)])
        p[side] = found
    return p


def required_acls(
    cfg: Config,
    flow: FlowConfig,
    topics: Iterable[str] = (),
    groups: Iterable[str] = (),
    principals: dict[str, str] | None = None,
) -> tuple[list[Need], dict[str, str]]:
    """Every binding the flow's principals need (pure given the names found on the source)."""
    p = _principals(cfg, flow, principals or {})
    f = FlowFilters.for_flow(flow)
    props = flow.props
    needs: list[Need] = []

    def add(side: str, resource: str, pattern: str, name: str, ops: Iterable[str], why: str) -> None:
        alias = flow.source if side == "source" else flow.target
        needs.extend(Need(side, alias, AclBinding.allow(resource, pattern, name, p[side], op), why) for op in ops)

    topics, groups = list(topics), list(groups)
    src_topics = patterns(props["topics"], topics, f.should_replicate_topic)
    for pt, name in src_topics:
        add("source", "TOPIC", pt, name, SOURCE_TOPIC_OPS, "read the replicated topics, their offsets and configs")
    hb = f.policy.heartbeats_topic()
    if f.heartbeats_replication:
        add("source", "TOPIC", "LITERAL", hb, ("READ", "DESCRIBE"), "replicate the heartbeats topic")
    src_groups = patterns(props["groups"], groups, f.should_replicate_group)
    for pt, name in src_groups:
        add("source", "GROUP", pt, name, ("DESCRIBE",), "fetch the checkpointed groups' committed offsets")
    reader = READER_GROUP.split("-")[0] + "-"
    add("source", "GROUP", "PREFIXED", reader, ("READ", "DESCRIBE"), "mirrorflow's readers (assign, never commit)")
    add("source", "CLUSTER", "LITERAL", CLUSTER, ("DESCRIBE",), "list groups; read topic ACLs for the ACL sync")

    for pt, name in src_topics:
        remote = name if name == "*" else f.remote_topic(name)
        add("target", "TOPIC", pt, remote, TARGET_TOPIC_OPS, "create, configure and write the remote topics")
    add("target", "TOPIC", "PREFIXED", state_topic_prefix(flow), STATE_TOPIC_OPS, "the flow's state topics")
    internal = {f.policy.checkpoints_topic(flow.source), hb}
    if f.heartbeats_replication:
        internal.add(f.remote_topic(hb))
    for name in sorted(internal):
        add("target", "TOPIC", "LITERAL", name, INTERNAL_TOPIC_OPS, "checkpoints and heartbeats")
    add(
        "target",
        "TRANSACTIONAL_ID",
        "PREFIXED",
        client_prefix(flow),
        ("WRITE", "DESCRIBE"),
        "exactly-once copy transactions",
    )
    add("target", "GROUP", "PREFIXED", reader, ("READ", "DESCRIBE"), "mirrorflow's own readers")
    if props.get("sync.group.offsets.enabled"):
        for pt, name in src_groups:
            add("target", "GROUP", pt, name, ("READ", "DESCRIBE"), "commit the synced groups' offsets")
    cluster_ops = ["IDEMPOTENT_WRITE", "DESCRIBE"] + (["ALTER"] if props.get("sync.topic.acls.enabled") else [])
    add("target", "CLUSTER", "LITERAL", CLUSTER, cluster_ops, "idempotent writes; list groups; ALTER: ACL sync")
    return needs, p


def _current_names(cfg: Config, flow: FlowConfig) -> tuple[list[str], list[str]]:
    """Topic and group names on the source now (for regexes that are not a name or a prefix)."""
    admin = cluster_connection(cfg.clusters[flow.source]).admin()
    try:
        topics = list(admin.list_topics(timeout=30).topics)
        groups = [g.group_id for g in admin.list_consumer_groups(request_timeout=30).result(30).valid]
    except KafkaException as exc:
        raise cluster_connection(cfg.clusters[flow.source]).describe_failure(exc) from None
    return topics, groups


def flow_acls(
    cfg: Config,
    flow: FlowConfig,
    apply: bool = False,
    principals: dict[str, str] | None = None,
    admins: dict[str, str] | None = None,
    check: bool = True,
) -> AclsReport:
    """The report of what the flow's principals need; with `check`, what each cluster has; with
    `apply`, creates the missing bindings (through the `admins` aliases' connections if given)."""
    needs_plain = any(not _simple(rx) for rx in [*flow.props["topics"], *flow.props["groups"]])
    topics, groups = _current_names(cfg, flow) if needs_plain else ([], [])
    needs, p = required_acls(cfg, flow, topics, groups, principals)
    report = AclsReport(flow.name, p, needs)
    if not (check or apply):
        return report
    admins = admins or {}
    for side, alias in (("source", flow.source), ("target", flow.target)):
        use = admins.get(side) or alias
        if use not in cfg.clusters:
            raise ConfigError([(f"--{side}-admin", f"unknown cluster alias {use!r}")])
        conn = cluster_connection(cfg.clusters[use])
        admin = conn.admin()
        idx = [i for i, n in enumerate(needs) if n.side == side]
        if not mark_present(admin, conn, report, idx):
            report.notes.append(unreadable(side, alias, use, apply))
            continue
        if apply:
            create_missing(admin, conn, report, idx)
    report.applied = apply
    return report


def _simple(rx: str) -> bool:
    rx = str(rx)
    return rx in (".*", ".+") or bool(_PLAIN.fullmatch(rx)) or (rx.endswith(".*") and bool(_PLAIN.fullmatch(rx[:-2])))


def unreadable(side: str, alias: str, use: str, apply: bool) -> str:
    """The note for a cluster whose ACLs cannot be read."""
    return (
        f"{side} cluster {alias!r}: its ACLs cannot be read as {use!r} (no authorizer, or not allowed "
        "to describe ACLs)" + ("; nothing created there" if apply else "")
    )


def mark_present(admin: AdminClient, conn: ClusterConnection, report: AclsReport, idx: list[int]) -> bool:
    """Marks the needs at `idx` present or missing on the cluster; False (nothing marked) when its
    ACLs cannot be read. Only ALLOW bindings for any host count."""
    have: set[AclBinding] = set()
    for principal in sorted({report.needs[i].acl.principal for i in idx}):
        try:
            found, why = read_acls(admin, 30, principal=principal, permission="ALLOW")
        except KafkaException as exc:
            raise conn.describe_failure(exc) from None
        if why is not None:
            return False
        have |= {b for b in found if b.host == "*"}
    for i in idx:
        report.status[i] = "present" if report.needs[i].acl in have else "missing"
    return True


def create_missing(admin: AdminClient, conn: ClusterConnection, report: AclsReport, idx: list[int]) -> None:
    """Creates the needs at `idx` marked missing, marking each created or error (the error in the notes)."""
    todo = [i for i in idx if report.status.get(i) == "missing"]
    if not todo:
        return
    try:
        futures = create_acls(admin, [report.needs[i].acl for i in todo], 30)
    except KafkaException as exc:
        raise conn.describe_failure(exc) from None
    for i in todo:
        try:
            futures[report.needs[i].acl].result(30)
            report.status[i] = "created"
        except KafkaException as exc:
            report.status[i] = "error"
            report.notes.append(f"{report.needs[i].describe()}: {conn.describe_failure(exc)}")


def acls_error(report: AclsReport) -> MirrorflowError | None:
    """An error naming what could not be created (None: all present or created)."""
    bad = [n for i, n in enumerate(report.needs) if report.status.get(i) == "error"]
    if not bad:
        return None
    return MirrorflowError(f"flow {report.flow}: {len(bad)} ACL(s) could not be created:\n" + "\n".join(report.notes))
