"""Run Java's RemoteClusterUtils (connect-mirror-client, from the cached MirrorMaker 2 jars) against a cluster."""
from __future__ import annotations

import subprocess
from pathlib import Path

from mirrorflow_dev import kafka_dist

SRC = Path(__file__).with_name("java") / "RcuProbe.java"


def compile_probe(out_dir: Path) -> Path:
    """Compile RcuProbe.java into out_dir (javac 17) and return out_dir."""
    cp = f"{kafka_dist.mm2_libs_dir()}/*"
    proc = subprocess.run(["javac", "-d", str(out_dir), "-cp", cp, str(SRC)], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    return out_dir


def run_probe(classes: Path, bootstrap: str, *args: str) -> list[list[str]]:
    cp = f"{classes}:{kafka_dist.mm2_libs_dir()}/*"
    proc = subprocess.run([kafka_dist.java_binary(), "-cp", cp, "RcuProbe", bootstrap, *args],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and "done" in proc.stdout.splitlines(), proc.stdout + proc.stderr
    return [line.split("\t") for line in proc.stdout.splitlines()
            if line.split("\t")[0] in ("offset", "upstream", "heartbeats", "checkpoints", "hops")]


def java_translate(classes: Path, bootstrap: str, remote_alias: str, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    return {(t, int(p)): (int(o), m) for _, t, p, o, m in
            (row + [""] * (5 - len(row)) for row in run_probe(classes, bootstrap, "translate", remote_alias, group))}
