"""Every Kafka name of a flow, in one place: its state topics, the transactional ids its writers
fence with, the consumer groups its readers use, and the Airflow DAG ids of its operations.

Names depend on the flow's `state_name` (topics: `<namespace>.<flow id>` under a `state.namespace`)
and `client_name` (ids and groups: `<namespace>-<flow id>`), so two deployments with their own
namespaces never share one (docs/configuration.md, `state.namespace`). A `/` occurs in no topic
name, so a copy task's id never equals the per-partition id of the scheme before task slots.
"""

from __future__ import annotations

from mirrorflow.config import FlowConfig

# the readers' roles: each its own consumer group (none commits offsets: groups only name clients)
COPIER, STATE_READER, SLOTS, LEASE, VERIFY = "copier", "state-reader", "slots", "lease", "verify"


# -- state topics (state.state_topics creates them) ------------------------------------------------
def state_topic(flow: FlowConfig, kind: str) -> str:
    """One of the flow's state topics (state.state_topics): `mirrorflow.<flow id>.<kind>.internal`."""
    return f"mirrorflow.{flow.state_name}.{kind}.internal"


def progress_topic(flow: FlowConfig) -> str:
    return state_topic(flow, "progress")


def offset_map_topic(flow: FlowConfig) -> str:
    return state_topic(flow, "offset-map")


def snapshot_topic(flow: FlowConfig) -> str:
    """The folded offset map (state.snapshot): one record per source partition, compacted."""
    return state_topic(flow, "offset-map-snapshot")


def lease_topic(flow: FlowConfig) -> str:
    return state_topic(flow, "lease")


def runs_topic(flow: FlowConfig) -> str:
    return state_topic(flow, "runs")


def results_topic(flow: FlowConfig) -> str:
    return state_topic(flow, "results")


def history_topic(flow: FlowConfig) -> str:
    """The operations history (state.history): appended, never compacted."""
    return state_topic(flow, "operations")


# -- transactional ids -----------------------------------------------------------------------------
def task_transactional_id(flow: FlowConfig, generation: int, slot: int) -> str:
    """A copy task slot's id (state.task_slots), under the prefix the flow's ACLs grant."""
    return f"mirrorflow-{flow.client_name}-task/g{generation}/{slot}"


def transactional_id(flow: FlowConfig, topic: str, partition: int) -> str:
    """The per-partition copy id of the scheme before task slots (fenced once, state.fencing)."""
    return f"mirrorflow-{flow.client_name}-{topic}-{partition}"


def state_transactional_id(flow: FlowConfig) -> str:
    """The id of `state_writer.write_partition_state` (takeover, reseed, failback seeds)."""
    return f"mirrorflow-{flow.client_name}-state/write"


def fold_transactional_id(flow_id: str) -> str:
    """The offset-map fold's id (state.compaction)."""
    return f"mirrorflow-{flow_id}-offset-map-fold"


# -- consumer groups -------------------------------------------------------------------------------
def reader_group(flow: FlowConfig, role: str) -> str:
    """The group.id of the flow's readers of one role (COPIER, STATE_READER, ...)."""
    return f"mirrorflow-{flow.client_name}-{role}"


# -- Airflow ---------------------------------------------------------------------------------------
def dag_id(kind: str, flow_id: str) -> str:
    """The DAG of operation `kind` (replicate, sync, checkpoint, failover, ...) of a flow."""
    return f"mirrorflow_{kind}__{flow_id}"


# -- prefixes (the ACLs a flow needs: ops.acls.required_acls) --------------------------------------
def state_topic_prefix(flow: FlowConfig) -> str:
    """What every state topic name of the flow starts with."""
    return f"mirrorflow.{flow.state_name}."


def client_prefix(flow: FlowConfig) -> str:
    """What every transactional id and consumer group of the flow starts with."""
    return f"mirrorflow-{flow.client_name}-"
