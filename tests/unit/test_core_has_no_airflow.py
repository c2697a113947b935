"""The core imports nothing from Airflow: every `mirrorflow` module imports in a process where
`airflow` cannot be imported (Airflow reaches the core only through `mirrorflow_airflow`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import mirrorflow

PKG = Path(mirrorflow.__file__).parent
SKIP = {"mirrorflow.cli.__main__"}  # importing it runs the CLI

# Run in a fresh interpreter: a finder first on sys.meta_path refuses `airflow` and `airflow.*`
# and records which mirrorflow module (file:line) asked, even when the module catches the error.
PROBE = r"""
import importlib, json, sys

attempts = []

class NoAirflow:
    def find_spec(self, name, path=None, target=None):
        if name != "airflow" and not name.startswith("airflow."):
            return None
        frame = sys._getframe(1)
        while frame and not str(frame.f_globals.get("__name__", "")).startswith("mirrorflow"):
            frame = frame.f_back
        where = f"{frame.f_globals['__name__']}:{frame.f_lineno}" if frame else "?"
        attempts.append(f"{where} imports {name}")
        raise ImportError(f"{name} is not importable in this test")

sys.meta_path.insert(0, NoAirflow())
failed = []
for module in json.loads(sys.argv[1]):
    try:
        importlib.import_module(module)
    except BaseException as exc:
        failed.append(f"{module}: {type(exc).__name__}: {exc}")
print(json.dumps({"attempts": sorted(set(attempts)), "failed": failed}))
"""


def core_modules() -> list[str]:
    names = []
    for path in sorted(PKG.rglob("*.py")):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name not in SKIP:
            names.append(name)
    return names


def probe(modules: list[str]) -> dict[str, list[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(modules)], capture_output=True, text=True, cwd=PKG.parent, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_core_module_imports_without_airflow():
    modules = core_modules()
    assert "mirrorflow.groups.render" in modules and "mirrorflow.cli.groups" in modules
    result = probe(modules)
    assert result["attempts"] == [], "the core imports Airflow:\n" + "\n".join(result["attempts"])
    assert result["failed"] == [], "core modules that do not import without Airflow:\n" + "\n".join(result["failed"])


def test_the_probe_names_the_module_that_imports_airflow():
    result = probe(["mirrorflow_airflow.hooks"])
    assert any(a.startswith("mirrorflow_airflow.hooks.mirrorflow:") for a in result["attempts"]), result
    assert result["failed"] and result["failed"][0].startswith("mirrorflow_airflow.hooks: ImportError")
