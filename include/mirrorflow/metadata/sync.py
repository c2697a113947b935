"""Sync one flow's metadata (topics and partitions, topic configs, topic ACLs) from source to target.

The entry point the CLI and the Airflow tasks share: it resolves the flow, connects to both
clusters (one clear ClusterError if either is unreachable or refuses our credentials), runs the
requested concerns in order and returns one SyncReport. MM2's `*.enabled` toggles are honoured:
a disabled concern is reported as skipped, not silently left out.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from confluent_kafka import KafkaException

from mirrorflow.clients import FlowClients, flow_clients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import MirrorflowError
from mirrorflow.metadata import acl_sync, read_only
from mirrorflow.metadata.sync_report import CONCERNS, SyncReport
from mirrorflow.metadata.topic_sync import TopicSync
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.state.flow_state import flow_state

log = logging.getLogger(__name__)

TOGGLES = {"configs": "sync.topic.configs.enabled", "acls": "sync.topic.acls.enabled"}


def parse_concerns(text: str | Iterable[str] | None) -> list[str]:
    """`topics,configs` -> ["topics", "configs"] in canonical order; unknown names are an error."""
    if text is None:
        return list(CONCERNS)
    items = [x.strip() for x in (text.split(",") if isinstance(text, str) else text) if x.strip()]
    unknown = [x for x in items if x not in CONCERNS]
    if unknown or not items:
        raise MirrorflowError(
            f"--only: unknown concern(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(CONCERNS)}"
        )
    return [c for c in CONCERNS if c in items]


def sync_flow(
    cfg: Config,
    flow: FlowConfig | str,
    concerns: Iterable[str] | str | None = None,
    dry_run: bool = False,
    clients: FlowClients | None = None,
) -> SyncReport:
    """Plan (and unless `dry_run`, apply) the sync of `flow`; never deletes anything."""
    flow = cfg.flow(flow) if isinstance(flow, str) else flow
    wanted = parse_concerns(concerns)
    if not flow.enabled and not dry_run:
        raise MirrorflowError(f"flow {flow.name} is disabled (enabled: false); enable it or use --dry-run")
    with flow_clients(cfg, flow, clients) as c:
        return _sync(c, wanted, dry_run)


def _sync(clients: FlowClients, wanted: list[str], dry_run: bool) -> SyncReport:
    flow = clients.flow
    report = SyncReport(flow.name, dry_run, wanted)
    filters = FlowFilters.for_flow(flow)
    timeout = flow.props["admin.timeout.ms"] / 1000.0
    source, target = clients.admin("source"), clients.admin("target")
    topics = TopicSync(filters, source, target, flow.replication_factor, timeout)
    state_skip = report.state_skip = None if dry_run else flow_state(clients).skip_reason(flow.name, "sync")
    if read_only.is_read_only(flow) and not state_skip and {"topics", "acls"} & set(wanted):
        # before the topics: a remote topic is created read-only, never writable for a moment
        try:
            read_only.deny_writes(clients, report, dry_run)
        except KafkaException as exc:
            raise MirrorflowError(f"read-only sync of {flow.name} failed: {exc}") from None
    for concern in wanted:
        if state_skip:
            report.skip(concern, "*", state_skip)
            continue
        toggle = TOGGLES.get(concern)
        if toggle and not flow.props[toggle]:
            report.skip(concern, "*", f"disabled by {toggle}=false")
            continue
        # a failure talking to a cluster mid-way names the cluster (auth, reachability, rights)
        step = {
            "topics": lambda: topics.sync_topics(report, dry_run),
            "configs": lambda: topics.sync_configs(report, dry_run),
            "acls": lambda: acl_sync.sync_acls(filters, source, target, report, dry_run, timeout),
        }[concern]
        try:
            step()
        except KafkaException as exc:  # reads name their cluster; anything else still says where
            err = exc.args[0] if exc.args else exc
            raise MirrorflowError(
                f"{concern} sync of {flow.name} failed: {err.str() if hasattr(err, 'str') else err}"
            ) from None
    log.info("sync %s: %s", flow.name, report.headline())
    return report
