"""The benches import the core lazily, inside functions (a bench's --help needs no Kafka): a name
moved in the core breaks a bench only when someone runs it. Every such import resolves here."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def imports_of(path: Path) -> list[tuple[str, str]]:
    tree = ast.parse(path.read_text(), str(path))
    return [
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0].startswith("mirrorflow")
        for alias in node.names
    ]


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.py")), ids=lambda p: p.name)
def test_every_core_name_a_bench_imports_exists(path):
    missing = []
    for module, name in imports_of(path):
        if name == "*":
            continue
        mod = importlib.import_module(module)
        if not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"from {module} import {name}")
    assert not missing, f"{path.name}: {missing}"
