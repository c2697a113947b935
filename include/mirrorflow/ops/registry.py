"""The operations over a flow, named once: each one's CLI module, history kinds, DAG and status-page link.

Airflow providers say what they offer in one place (`get_provider_info`); this is mirrorflow's. The
shells read it instead of keeping lists of their own:

* the CLI (`mirrorflow.cli`) loads every operation's `cli` module (`mirrorflow.cli.<cli>`,
  which registers `command`); `cli.COMMAND_MODULES` only orders `mirrorflow --help`;
* the generated DAGs (`mirrorflow_airflow.generated_dags.KINDS`) are the operations' `dag` kinds in
  this order (scheduled ones first): the builder `mirrorflow_airflow.dag_builders.<dag>` with
  `build_<dag>_dags(cfg)`, DAG ids `mirrorflow_<dag>__<flow.id>`, this repository's
  `dags/mirrorflow_<dag>.py`;
* the status page (`mirrorflow_airflow.plugins.status.LINKED`) links the `linked` ones' DAGs;
* the operations history (`state.history.KINDS`) accepts every `history` kind; `state` sits below
  `ops` and cannot read this, so tests/unit/test_operation_registry.py fails when they disagree (as it
  does for a CLI module, a builder or a DAG file an entry names that does not exist).

Adding an operation: docs/architecture.md, "Adding an operation". Plain data: no import of mirrorflow.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Operation:
    """One operation: what each door calls it."""

    name: str
    doc: str  # one line
    cli: str  # its CLI module: mirrorflow.cli.<cli> registers the command
    command: str = ""  # the `mirrorflow <command>` that module registers for it ("": its name)
    history: tuple[str, ...] = ()  # the kinds it appends to the flow's operations history (state.history)
    dag: str | None = None  # its generated DAG kind (dag_builders/<dag>.py, dags/mirrorflow_<dag>.py), if any
    linked: bool = False  # the status page links its DAG (only a DAG every flow has)
    # its inputs declared once (mirrorflow.params.Field), "module:NAME": the CLI's flags and the DAG's form are
    # made from them (tests/unit/test_operation_registry.py, tests/airflow/test_dag_params.py hold the doors to it)
    inputs: str = ""

    def __post_init__(self) -> None:
        if not self.command:
            object.__setattr__(self, "command", self.name)


# in the order of the generated DAGs: scheduled ones first, then the manual ones; operations without a DAG last
OPERATIONS = (
    Operation(
        "replicate",
        "copy the records not yet copied",
        cli="replicate",
        dag="replicate",
        linked=True,
        inputs="mirrorflow.ops.inputs:REPLICATE",
    ),
    Operation("sync", "remote topics, partitions, topic configs and ACLs", cli="sync", dag="sync", linked=True),
    Operation("checkpoint", "exact MM2 checkpoints and group offset sync", cli="groups", dag="checkpoint", linked=True),
    Operation(
        "heartbeat", "MM2 heartbeats and the replication latency they show", cli="groups", dag="heartbeat", linked=True
    ),
    # the schemas DAG exists only for flows whose clusters name registries: not linked
    Operation(
        "schemas", "replicate the schema registries' subjects", cli="schemas", history=("schemas",), dag="schemas"
    ),
    Operation(
        "translate",
        "where consumer groups resume on the target",
        cli="groups",
        history=("translate",),
        dag="translate",
        linked=True,
    ),
    Operation(
        "verify",
        "compare source and target over the copied ranges",
        cli="verify",
        dag="verify",
        linked=True,
        inputs="mirrorflow.ops.verify.inputs:VERIFY",
    ),
    Operation(
        "backfill",
        "copy a historical time or offset range",
        cli="backfill",
        dag="backfill",
        linked=True,
        inputs="mirrorflow.ops.inputs:BACKFILL",
    ),
    Operation(
        "control",
        "pause, resume or stop a flow",
        cli="flow",
        command="flow",
        history=("pause", "resume", "stop"),
        dag="control",
        linked=True,
        inputs="mirrorflow.ops.control.inputs:CONTROL",
    ),
    Operation(
        "failover",
        "move a flow's applications to its target",
        cli="failover",
        history=("failover", "promote"),
        dag="failover",
        linked=True,
        inputs="mirrorflow.ops.dr.inputs:FAILOVER",
    ),
    Operation(
        "failback",
        "the reverse flow, seeded from the failover",
        cli="failback",
        history=("failback",),
        dag="failback",
        linked=True,
        inputs="mirrorflow.ops.dr.inputs:FAILBACK",
    ),
    Operation(
        "takeover",
        "continue where a stopped MM2 left off",
        cli="takeover",
        history=("takeover",),
        dag="takeover",
        linked=True,
        inputs="mirrorflow.ops.takeover.inputs:TAKEOVER",
    ),
    Operation(
        "reseed",
        "restart a stopped topic",
        cli="reseed",
        history=("reseed",),
        dag="reseed",
        linked=True,
        inputs="mirrorflow.ops.inputs:RESEED",
    ),
    Operation(
        "drill",
        "a failover rehearsed, nothing moved",
        cli="drill",
        history=("drill",),
        dag="drill",
        linked=True,
        inputs="mirrorflow.ops.dr.inputs:DRILL",
    ),
    # run by the failover and failback DAGs (mirrorflow_airflow.switch_tasks), no DAG of its own
    Operation(
        "client-switch",
        "switch the applications' clients after a failover or failback",
        cli="client_switch",
        history=("client-switch",),
    ),
)


def cli_modules() -> tuple[str, ...]:
    """The CLI modules of the operations, each once, in registry order."""
    return tuple(dict.fromkeys(op.cli for op in OPERATIONS))


def dag_kinds() -> tuple[str, ...]:
    """Every kind of generated DAG, in registry order (scheduled ones first)."""
    return tuple(op.dag for op in OPERATIONS if op.dag)


def linked_dag_kinds() -> tuple[str, ...]:
    """The DAG kinds the status page links (DAGs every flow has)."""
    return tuple(op.dag for op in OPERATIONS if op.dag and op.linked)


def history_kinds() -> frozenset[str]:
    """Every kind an operation appends to the flow's operations history."""
    return frozenset(kind for op in OPERATIONS for kind in op.history)
