"""The core package's layers: a package (and a room of `ops`) imports only from the layers below it
(docs/architecture.md), and no module of mirrorflow or mirrorflow_airflow takes part in an import cycle."""
from __future__ import annotations

import ast
from pathlib import Path

import mirrorflow

PKG = Path(mirrorflow.__file__).parent
BELOW_OPS = {"errors", "process", "reporting", "kafka", "mm2", "config", "clients", "state", "replication", "metadata",
             "groups"}
# the rooms of ops (ops/<room>/): each its own layer; the modules directly in ops/ sit above them
ROOMS = {"ops.acls", "ops.verify", "ops.observe", "ops.dr"}
# package -> the mirrorflow packages it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "process": set(),
    "reporting": set(),
    "kafka": {"errors"},
    "mm2": {"errors", "kafka"},
    "config": {"errors", "kafka", "mm2"},
    "clients": {"errors", "kafka", "mm2", "config"},
    "state": {"errors", "process", "kafka", "mm2", "config", "clients"},
    "replication": {"errors", "process", "reporting", "kafka", "mm2", "config", "clients", "state"},
    "metadata": {"errors", "reporting", "kafka", "mm2", "config", "clients", "state"},
    "groups": {"errors", "reporting", "kafka", "mm2", "config", "clients", "state"},
    "ops.acls": BELOW_OPS,
    "ops.verify": BELOW_OPS,
    "ops.observe": BELOW_OPS,
    "ops.dr": BELOW_OPS | {"ops.verify"},
    "ops": BELOW_OPS | ROOMS,
    "dev": {"errors", "process", "kafka", "config"},
    "cli": BELOW_OPS | {"ops", "dev"} | ROOMS,
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
