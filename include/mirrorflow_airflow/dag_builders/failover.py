"""Failover DAGs: one per enabled flow, `mirrorflow_failover__<flow.id>`, manual trigger only.

Moves the flow's consumer groups to its target cluster and stops the flow -- the same core
functions as `mirrorflow failover` (mirrorflow.ops.dr.failover: plan_failover, commit_failover):

* `preflight`: in *planned* mode first drains (topic sync, replicate until lag 0, a last
  checkpoint) and verifies (what was copied since the last verify that passed); then the **plan**
  (id derived from its content): per partition replicated up to, source end (when the source
  answers), offsets not replicated and seconds behind (the RPO); per group the exact target
  offsets it will commit, and the groups left alone and why.
  The plan travels in XCom (about 40 bytes per group partition). A plan that cannot be committed
  (planned: verify found mismatches) fails here.
  A planned drain that cannot reach lag 0 fails here naming the partitions and their lag, unless
  `max_lag` accepts that much.
* `go_on`: ends the run here for a dry run, or when the flow was already failed over and there is
  no group to move (the preflight's log says when, by whom, and which groups are still left alone).
  On a flow already failed over, `groups` plans moving the groups the failover left alone (active
  members on B then) or did not choose: approved and committed the same way, the flow stays stopped.
* `approve_failover`: Airflow's human-in-the-loop approval (Required Actions) shows the report as
  the preflight prints it, with the plan id. Reject fails the run with "rejected by <user>"; no
  answer within `approval_timeout_minutes` fails it too; nothing is committed either way.
* `commit`: commits exactly the approved plan: it re-reads what the plan was built from and, if
  anything moved, fails naming what moved (nothing committed: trigger a new preflight); else commits
  the plan's offsets on the target, sets the flow to `stopped` and writes the failover record with
  the approver's Airflow user name.
* `client_switch.<step>` (a flow with `client.switch.failover`): one task per client-switch step,
  in order, after the commit (mirrorflow_airflow.switch_tasks): approved with the plan (the approval
  page lists them), each timed and recorded in the operations history. A failing step fails its
  task naming it, the failover stands; clear the task to run it (and the steps after it) again.
  A dry run runs them as a dry run in the preflight (its report says what each would do).

Params: `mode` (unplanned: the source is lost; planned: the source is up and its producers are
stopped), `groups` (a regex; empty: every group the flow checkpoints), `max_lag` (planned: offsets
the drain may leave not replicated; empty: 0), `take_over` (a run holds the flow's lease or another
deployment owns it: take the flow over -- the approval page says so -- instead of failing), `dry_run`,
`approval_timeout_minutes` (default 60), `approvers` (Airflow user ids allowed to answer; empty: any
user who may act on the DAG).
"""

from __future__ import annotations

from airflow.sdk import DAG

from mirrorflow.config import Config, FlowConfig
from mirrorflow.ops.dr import inputs
from mirrorflow_airflow.common import flow_dag, flow_dags, task_config_path
from mirrorflow_airflow.gated_tasks import gated_chain
from mirrorflow_airflow.operators.approval import FailoverApproval, approval_params
from mirrorflow_airflow.params import dry_run, form


def build_failover_dag(cfg: Config, flow: FlowConfig) -> DAG:
    path = task_config_path(cfg)
    with flow_dag(
        "failover",
        flow,
        f"move the consumer groups to {flow.target} and stop the flow (disaster recovery)",
        None,
        params={
            **form(inputs.FAILOVER),
            "dry_run": dry_run("Preflight report only"),
            **approval_params(),
        },
        doc_md=__doc__,
    ) as dag:
        approve = FailoverApproval(
            task_id="approve_failover",
            subject=f"Fail over {flow.name} to {flow.target}: plan "
            "{{ ti.xcom_pull(task_ids='preflight')['plan_id'] }}",
            body="{{ ti.xcom_pull(task_ids='preflight')['markdown'] }}",
            retries=0,
        )
        gated_chain("failover", flow, approve, "commit", path)
    return dag


def build_failover_dags(cfg: Config | None = None) -> dict[str, DAG]:
    """One failover DAG per enabled flow, keyed by dag_id."""
    return flow_dags(cfg, build_failover_dag)
