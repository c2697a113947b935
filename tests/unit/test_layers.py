"""The core package's layers: a package (and a room of `ops`) imports only from the layers below it
(docs/architecture.md), no module of mirrorflow or mirrorflow_airflow takes part in an import cycle, and
the product imports nothing from the development harness (devtools/mirrorflow_dev)."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import mirrorflow

PKG = Path(mirrorflow.__file__).parent
BELOW_OPS = {"errors", "process", "reporting", "params", "kafka", "mm2", "config", "clients", "state", "replication", "metadata",
             "groups", "schemas"}
# the rooms of ops (ops/<room>/): each its own layer; the modules directly in ops/ sit above them
ROOMS = {"ops.acls", "ops.verify", "ops.dr", "ops.takeover", "ops.control"}
ROOT = PKG.parents[1]
# what ships and runs in production: the core, the Airflow adapters, the DAG files, the plugins, the Spark job
PRODUCT = ("include/mirrorflow", "include/mirrorflow_airflow", "dags", "plugins", "spark_jobs")
# package -> the mirrorflow packages it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "process": set(),
    "reporting": set(),
    "params": {"errors"},  # an operation's inputs, declared once for the CLI, the DAG's form and the check
    "kafka": {"errors"},
    "mm2": {"errors", "kafka"},
    "config": {"errors", "kafka", "mm2"},
    "clients": {"errors", "kafka", "mm2", "config"},
    "state": {"errors", "process", "kafka", "mm2", "config", "clients"},
    "replication": {"errors", "process", "reporting", "kafka", "mm2", "config", "clients", "state"},
    "metadata": {"errors", "reporting", "kafka", "mm2", "config", "clients", "state"},
    "groups": {"errors", "reporting", "kafka", "mm2", "config", "clients", "state"},
    "schemas": {"errors", "reporting", "kafka", "mm2", "config", "clients", "state"},
    # read-only views of flows (status, metrics, the RPO): beside the operations, not one of them
    "observe": BELOW_OPS,
    "ops.acls": BELOW_OPS,
    "ops.verify": BELOW_OPS,
    "ops.takeover": BELOW_OPS,
    "ops.dr": BELOW_OPS | {"ops.verify"},
    "ops.control": BELOW_OPS | {"ops.dr"},
    "ops": BELOW_OPS | ROOMS,
    "cli": BELOW_OPS | {"observe", "ops"} | ROOMS,
}


def _layer(path: Path) -> str:
    rel = path.relative_to(PKG)
    if rel.parts[0] == "ops" and len(rel.parts) > 2:
        return f"ops.{rel.parts[1]}"
    return rel.parts[0].removesuffix(".py")


def _package(name: str) -> str:
    """The layer of an imported mirrorflow module: its package, or its room of ops."""
    parts = name.split(".")
    if parts[1] == "ops" and len(parts) > 2 and f"ops.{parts[2]}" in ROOMS:
        return f"ops.{parts[2]}"
    return parts[1]


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported mirrorflow package) of every import in the file, lazy ones included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}:{node.lineno}: relative import (use absolute mirrorflow.* imports)")
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] if node.module != "mirrorflow" else [f"mirrorflow.{a.name}" for a in node.names]
        for n in names:
            parts = n.split(".")
            if parts[0] == "mirrorflow" and len(parts) > 1:
                out.append((node.lineno, _package(n)))
    return out


def test_every_package_is_in_a_layer():
    packages = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in PKG.glob("*.py") if p.stem != "__init__"}
    rooms = {f"ops.{p.name}" for p in (PKG / "ops").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages | modules | rooms == set(ALLOWED)


def test_no_package_imports_a_higher_layer():
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        if path == PKG / "__init__.py":
            continue
        layer = _layer(path)
        for line, imported in _imports(path):
            if imported != layer and imported not in ALLOWED[layer]:
                bad.append(f"{path.relative_to(PKG.parent)}:{line} ({layer}) imports mirrorflow.{imported}")
    assert not bad, "\n".join(bad)


# the rooms of replication (replication/<room>/), by stage: each imports only the rooms before it
REPLICATION_ROOMS = ("plan", "task", "executors", "run")


def test_the_rooms_of_replication_import_only_the_stages_before_them():
    rep = PKG / "replication"
    assert {p.name for p in rep.iterdir() if p.is_dir() and (p / "__init__.py").exists()} == set(REPLICATION_ROOMS)
    assert [p.name for p in rep.glob("*.py")] == ["__init__.py"], "every module of replication is in a room"
    bad = []
    for room in REPLICATION_ROOMS:
        below = set(REPLICATION_ROOMS[: REPLICATION_ROOMS.index(room) + 1])
        for path in sorted((rep / room).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                for name in names:
                    if name.startswith("mirrorflow.replication.") and name.split(".")[2] not in below:
                        bad.append(f"{path.relative_to(PKG.parent)}:{node.lineno} ({room}) imports {name}")
    assert not bad, "\n".join(bad)


def _module_imports(root: Path) -> dict[str, dict[str, int]]:
    """module -> {imported module of the same packages: line}, for every import in the file,
    those inside functions included. `from P import x` names the submodule P.x when there is one,
    else P itself; a module's own package (__init__) is not counted as imported by it."""
    files = {}
    for pkg in (root / "mirrorflow", root / "mirrorflow_airflow"):
        for path in pkg.rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def known(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for mod, path in files.items():
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [known(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in files else known(node.module)
                           for a in node.names]
            for t in targets:
                if t is not None and t != mod:
                    edges.setdefault(t, node.lineno)
        graph[mod] = edges
    return graph


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_not_even_inside_functions():
    """A cycle hidden in a function-level import is still a cycle: two modules that need each other
    are one module in two files, or a third module waiting to be named."""
    graph = _module_imports(PKG.parent)
    problems = [
        " <-> ".join(comp) + ": " + "; ".join(
            f"{a} imports {b} (line {graph[a][b]})" for a in comp for b in comp if b in graph[a]
        )
        for comp in _cycles(graph)
    ]
    assert not problems, "\n".join(problems)


DEV_MODULE = re.compile(r"^mirrorflow_dev(\.|$)")


def _dev_references(path: Path, root: Path = ROOT) -> list[str]:
    """Every import of the development harness in a file (inside functions too), and every string
    naming one of its modules (an importlib.import_module or entry point written by hand)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value.strip()]
        out += [f"{path.relative_to(root)}:{node.lineno} names {n}" for n in names if DEV_MODULE.match(n)]
    return out


def test_the_product_imports_nothing_from_the_development_harness():
    files = [f for d in PRODUCT for f in sorted((ROOT / d).rglob("*.py"))]
    assert len(files) > 100 and ROOT / "spark_jobs" / "mirrorflow_copy.py" in files
    bad = [ref for f in files for ref in _dev_references(f)]
    assert not bad, "the product must not import the development harness:\n" + "\n".join(bad)
    assert not (PKG / "dev").exists(), "the harness lives in devtools/mirrorflow_dev, not in the product"


def test_the_check_finds_an_import_of_the_harness_even_inside_a_function(tmp_path):
    (tmp_path / "m.py").write_text(
        "def f():\n    from mirrorflow_dev.cluster import DevClusters\n"
        "import importlib\nX = importlib.import_module('mirrorflow_dev.spark')\n"
    )
    assert _dev_references(tmp_path / "m.py", tmp_path) == [
        "m.py:2 names mirrorflow_dev.cluster", "m.py:4 names mirrorflow_dev.spark"]


# The CLI in a process where the harness cannot be imported (a production install): every command of
# the product is there, `dev` and `demo` are not, and the group that could not load is named once.
NO_HARNESS = r"""
import contextlib, io, sys

class NoHarness:
    def find_spec(self, name, path=None, target=None):
        if name == "mirrorflow_dev" or name.startswith("mirrorflow_dev."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, NoHarness())
from mirrorflow.cli import build_parser

out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        build_parser().parse_args(["--help"])
    except SystemExit:
        pass
print(out.getvalue().splitlines()[1])
"""


def test_the_cli_works_without_the_harness_and_finds_its_commands_through_the_entry_point():
    proc = subprocess.run([sys.executable, "-c", NO_HARNESS], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    choices = proc.stdout.strip().splitlines()[-1]
    assert "replicate" in choices and "failover" in choices and "dev" not in choices.replace("{", ",").split(",")
    assert "demo" not in choices, choices
    assert sorted(line.split(" (")[0] for line in proc.stderr.splitlines()) == [
        "mirrorflow: commands 'demo'", "mirrorflow: commands 'dev'"], proc.stderr
    # installed (scripts/bootstrap), the harness registers both groups under the entry point
    from importlib.metadata import entry_points

    from mirrorflow.cli import COMMAND_GROUP
    assert {(ep.name, ep.value) for ep in entry_points(group=COMMAND_GROUP)} == {
        ("dev", "mirrorflow_dev.cli.dev"), ("demo", "mirrorflow_dev.cli.demo")}
