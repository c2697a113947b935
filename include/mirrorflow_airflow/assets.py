"""Airflow Assets of mirrorflow's topics: data-aware scheduling on "new records replicated to B".

A topic is an Asset in the Kafka provider's URI form, `kafka://<bootstrap server>/<topic>`
(apache-airflow-providers-apache-kafka, `assets/kafka.py`; the server is the cluster's first
bootstrap server, `host:port`), so the provider's OpenLineage converter names it as lineage does
(namespace `kafka://host:port`, name = the topic). Each run of the replicate or backfill DAG that
wrote records emits one Asset event per remote topic it wrote to, through the DAG's AssetAlias
(its dag_id), with what it copied in the event's extra (mirrorflow.replication.run.copied); a run that
copied nothing emits none. A user's DAG scheduled on `remote_topic_asset(...)` (or on the URI)
runs after each such event.
"""

from __future__ import annotations

from typing import Any

from mirrorflow.config import Config, FlowConfig
from mirrorflow.replication.run.copied import copied_per_topic


def cluster_server(cfg: Config, alias: str) -> str:
    """The first bootstrap server of a configured cluster: the host:port of its Assets' URIs. A
    cluster with `airflow.conn.id` has its servers in that connection (read here, secrets unused)."""
    cluster = cfg.cluster(alias)
    servers = cluster.bootstrap_servers or cluster.client_config().get("bootstrap.servers", "")
    return servers.split(",")[0].strip()


def asset_uri(server: str, topic: str) -> str:
    return f"kafka://{server}/{topic}"


def topic_asset(cfg: Config, alias: str, topic: str) -> Any:
    """The Asset of `topic` on the configured cluster `alias`."""
    from airflow.sdk import Asset

    return Asset(asset_uri(cluster_server(cfg, alias), topic))


def remote_topic_asset(cfg: Config, flow: FlowConfig, source_topic: str) -> Any:
    """The Asset of the remote topic `flow` copies `source_topic` to (on its target cluster): what
    a downstream DAG schedules on, e.g. `schedule=[remote_topic_asset(cfg, flow, "orders")]`."""
    from mirrorflow.mm2.filters import FlowFilters

    return topic_asset(cfg, flow.target, FlowFilters.for_flow(flow).remote_topic(source_topic))


def emit_copied(
    outlet_events: Any, alias: str, cfg: Config, flow: FlowConfig, results: list[dict[str, Any]], kind: str, run: str
) -> list[str]:
    """One Asset event per remote topic the run wrote records to, through the AssetAlias `alias`;
    the extra says which flow and run, and per partition the source and target offset ranges
    (`[from, to)`) and records. Returns the remote topics (none: no event)."""
    from airflow.sdk import AssetAlias

    copied = copied_per_topic(results)
    for topic in copied:
        extra = {"flow": flow.name, "source_cluster": flow.source, "target_cluster": flow.target, "kind": kind}
        extra |= {"run": run, **topic.to_dict()}
        outlet_events[AssetAlias(alias)].add(topic_asset(cfg, flow.target, topic.target_topic), extra=extra)
    return [t.target_topic for t in copied]
