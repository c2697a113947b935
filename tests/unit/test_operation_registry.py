"""The operations registry (mirrorflow.ops.registry) and the doors it feeds: each entry's CLI module
registers its command, its DAG kind has a builder and a file in dags/, the history accepts exactly the
kinds the operations write (state sits below ops and keeps its own tuple: this test ties them), the
generated DAGs and the status page's links are the registry's, and nothing is left out of it."""
from __future__ import annotations

import importlib
from pathlib import Path

import mirrorflow
from mirrorflow.ops.registry import OPERATIONS, cli_modules, dag_kinds, history_kinds, linked_dag_kinds

ROOT = Path(mirrorflow.__file__).parents[2]
BUILDERS = ROOT / "include" / "mirrorflow_airflow" / "dag_builders"
NOT_A_KIND = {"__init__", "timers"}  # dag_builders/ modules every builder shares
CLI_OWN = {"config", "acls", "status", "history"}  # the CLI's command groups that are no operation


def test_names_are_unique_and_only_a_dag_is_linked():
    names = [op.name for op in OPERATIONS]
    assert len(names) == len(set(names))
    kinds = [k for op in OPERATIONS for k in op.history]
    assert len(kinds) == len(set(kinds)), "a history kind belongs to one operation"
    assert len(dag_kinds()) == len(set(dag_kinds()))
    assert all(op.dag for op in OPERATIONS if op.linked)
    assert all(op.doc and "\n" not in op.doc for op in OPERATIONS)


def test_the_history_accepts_exactly_the_operations_kinds():
    from mirrorflow.state.history import KINDS

    assert len(KINDS) == len(set(KINDS))
    assert set(KINDS) == history_kinds(), "state/history.py KINDS and ops/registry.py disagree"


def test_every_operations_cli_module_registers_its_command():
    from mirrorflow.cli import COMMAND_MODULES, HELP_ORDER
    from mirrorflow.cli.registry import COMMANDS

    for op in OPERATIONS:
        importlib.import_module(f"mirrorflow.cli.{op.cli}")
    registered = {name: fn.__module__ for name, _, _, fn in COMMANDS}
    for op in OPERATIONS:
        assert registered.get(op.command) == f"mirrorflow.cli.{op.cli}", op
    # every module of the help order is an operation's or one of the CLI's own; every operation's is loaded
    assert set(HELP_ORDER) == set(cli_modules()) | CLI_OWN
    assert set(cli_modules()) <= set(COMMAND_MODULES)


def test_every_dag_kind_has_its_builder_and_its_dag_file_and_nothing_else_does():
    for kind in dag_kinds():
        builder = BUILDERS / f"{kind}.py"
        assert f"def build_{kind}_dags(" in builder.read_text(), builder
        dag_file = ROOT / "dags" / f"mirrorflow_{kind}.py"
        assert f"build_{kind}_dags()" in dag_file.read_text(), dag_file
    assert {p.stem for p in BUILDERS.glob("*.py")} - NOT_A_KIND == set(dag_kinds())
    assert {p.stem.removeprefix("mirrorflow_") for p in (ROOT / "dags").glob("mirrorflow_*.py")} == set(dag_kinds())


def test_the_generated_dags_and_the_status_pages_links_are_the_registrys():
    text = (ROOT / "include" / "mirrorflow_airflow" / "generated_dags.py").read_text()
    assert "KINDS = dag_kinds()" in text
    status = (ROOT / "include" / "mirrorflow_airflow" / "plugins" / "status.py").read_text()
    assert "LINKED = linked_dag_kinds()" in status
    # the order Airflow's users know: scheduled DAGs first; the schemas DAG (not every flow has one) unlinked
    assert dag_kinds() == ("replicate", "sync", "checkpoint", "heartbeat", "schemas", "translate", "verify",
                           "backfill", "control", "failover", "failback", "takeover", "reseed", "drill")
    assert linked_dag_kinds() == tuple(k for k in dag_kinds() if k != "schemas")


def declared(op):
    """The inputs an operation declares (its `inputs`, "module:NAME")."""
    module, _, name = op.inputs.partition(":")
    return getattr(importlib.import_module(module), name)


def test_an_operations_declared_inputs_are_its_commands_flags():
    """Each input an operation declares is a flag of its command, as the field says (a flag a switch, a
    choice its choices, a required text required), or its positional argument (`mirrorflow flow ACTION`: its
    choices the field's and `list`): the CLI cannot drift from the form."""
    import argparse

    from mirrorflow.cli.registry import COMMANDS

    for op in OPERATIONS:
        importlib.import_module(f"mirrorflow.cli.{op.cli}")
    with_inputs = [op for op in OPERATIONS if op.inputs]
    assert {op.name for op in with_inputs} >= {"replicate", "backfill", "verify", "failover", "failback", "drill",
                                               "takeover", "reseed", "control"}
    for op in with_inputs:
        parser = argparse.ArgumentParser()
        next(args for name, _, args, _ in COMMANDS if name == op.command)(parser)
        options = {s: a for a in parser._actions for s in a.option_strings}
        positional = {a.dest: a for a in parser._actions if not a.option_strings}
        for f in declared(op):
            if f.name in positional:
                assert f.kind == "choice" and set(f.choices) <= set(positional[f.name].choices), (op.name, f.name)
                continue
            action = options.get(f.flag)
            assert action is not None, f"{op.name}: {f.flag} ({f.name}) is not a flag of `mirrorflow {op.command}`"
            assert action.dest == f.name, (op.name, f.flag, action.dest)
            assert action.help == f.help, (op.name, f.flag)
            if f.kind == "flag":
                assert isinstance(action, argparse._StoreTrueAction), (op.name, f.flag)
            if f.kind == "choice":
                assert list(action.choices) == list(f.choices) and action.default == f.default, (op.name, f.flag)
            if f.kind == "text":
                assert action.required == f.required, (op.name, f.flag)
