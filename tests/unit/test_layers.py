"""The core package's layers: a package imports only from the layers below it (docs/architecture.md)."""
from __future__ import annotations

import ast
from pathlib import Path

import mirrorflow

PKG = Path(mirrorflow.__file__).parent
# package -> the mirrorflow packages it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "process": set(),
    "kafka": {"errors"},
    "mm2": {"errors", "kafka"},
    "config": {"errors", "kafka", "mm2"},
    "clients": {"errors", "kafka", "mm2", "config"},
    "state": {"errors", "process", "kafka", "mm2", "config", "clients"},
    "replication": {"errors", "process", "kafka", "mm2", "config", "clients", "state"},
    "metadata": {"errors", "kafka", "mm2", "config", "clients", "state"},
    "groups": {"errors", "kafka", "mm2", "config", "clients", "state"},
    "ops": {"errors", "process", "kafka", "mm2", "config", "clients", "state", "replication", "metadata", "groups"},
    "dev": {"errors", "process", "kafka", "config"},
    "cli": {"errors", "process", "kafka", "mm2", "config", "clients", "state", "replication", "metadata", "groups",
            "ops", "dev"},
}


def _layer(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0].removesuffix(".py")


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
                out.append((node.lineno, parts[1]))
    return out


def test_every_package_is_in_a_layer():
    packages = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in PKG.glob("*.py") if p.stem != "__init__"}
    assert packages | modules == set(ALLOWED)


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
