"""OpenLineage for mirrorflow's tasks, through Airflow's hook-level lineage.

A task that moves data or consumer groups between topics reports each source topic as an input
and each topic it writes to as an output with `get_hook_lineage_collector()` (the hook is the
task's MirrorflowHook). With apache-airflow-providers-openlineage installed and configured, its
listener turns them into the task's OpenLineage events: the job is the task of the flow's DAG
(`mirrorflow_<kind>__<flow id>.<task>`, its parent the DAG), the datasets are named as the Kafka
provider names a topic's Asset (namespace `kafka://<first bootstrap server>`, name = the topic;
mirrorflow_airflow.assets). Without the provider the collector is a no-op.

* replicate and backfill: the task that copies (`replicate` / `backfill` with spark.remote, else `copy`):
  the plan's units (source topic -> remote topic), after the copy;
* sync `topics_and_partitions`: the source topics the flow selects now -> their remote topics;
* failover `commit`: the replicated partitions whose groups move (source -> remote topic);
* failback `start`: the reverse flow's source topics (on the failed-over target) -> its remote topics.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from mirrorflow.config import Config, FlowConfig
from mirrorflow.replication.plan.run_plan import Plan
from mirrorflow_airflow.assets import asset_uri, cluster_server
from mirrorflow_airflow.hooks import MirrorflowHook

log = logging.getLogger(__name__)


def report_lineage(
    cfg: Config, flow: FlowConfig, pairs: Iterable[tuple[str, str]], hook: MirrorflowHook | None = None
) -> None:
    """Each (source topic, target topic) of `flow`: the source topic (on flow.source) an input,
    the target topic (on flow.target) an output of the running task. Never fails the task."""
    try:
        from airflow.sdk.lineage import get_hook_lineage_collector

        collector = get_hook_lineage_collector()
        context = hook or MirrorflowHook(str(cfg.path) if cfg.path else None)
        source, target = cluster_server(cfg, flow.source), cluster_server(cfg, flow.target)
        for src, tgt in sorted(set(pairs)):
            collector.add_input_asset(context=context, uri=asset_uri(source, src))
            collector.add_output_asset(context=context, uri=asset_uri(target, tgt))
    except Exception:  # noqa: BLE001 - lineage is metadata: it must never fail a copy or a failover
        log.warning("%s: lineage not reported", flow.name, exc_info=True)


def failback_pairs(reverse: FlowConfig, seeds: Iterable[Any]) -> list[tuple[str, str]]:
    """(source topic, remote topic) of the reverse flow a failback started, from its seeds."""
    from mirrorflow.mm2.filters import FlowFilters

    filters = FlowFilters.for_flow(reverse)
    return sorted({(s.topic, filters.remote_topic(s.topic)) for s in seeds})


def after_failover(cfg: Config, flow: FlowConfig, report: Any) -> None:
    """The groups' topics, after a failover's commit."""
    report_lineage(cfg, flow, [(p.topic, p.target_topic) for p in report.plan.partitions])


def after_failback(cfg: Config, flow: FlowConfig, report: Any) -> None:
    """The reverse flow's topics, from the failed-over target back to the source, after a failback's start."""
    reverse = cfg.flow(report.reverse)
    report_lineage(cfg, reverse, failback_pairs(reverse, report.seeds))


# what an approved operation's commit reports as lineage (gated_tasks.commit_task), by operation
AFTER = {"failover": after_failover, "failback": after_failback}


def plan_pairs(plan: Plan) -> list[tuple[str, str]]:
    """The (source topic, remote topic) of every unit of a replication plan."""
    return sorted({(u.topic, u.target_topic) for u in plan.units})


def report_plan_lineage(plan: Plan | None, config_path: str | None = None) -> None:
    """The lineage of a copy task from its plan (its flow and config are named in it)."""
    if plan is None:
        return
    try:
        cfg = MirrorflowHook(config_path or plan.config_path).get_conn()
        flow = cfg.flow(plan.flow)
    except Exception:  # noqa: BLE001 - see report_lineage
        log.warning("lineage not reported: the plan's flow could not be loaded", exc_info=True)
        return
    report_lineage(cfg, flow, plan_pairs(plan))
