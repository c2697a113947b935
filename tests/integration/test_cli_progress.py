"""CLI progress (rich): on a terminal `replicate` draws a bar of the planned records that ends at
N/N; through a pipe or with --json nothing but the report is printed. The replicate flags that
mirror the DAG's Params (--topics, --max-records-per-partition, --dry-run) narrow the run."""
from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import time

import pytest

from mirrorflow.replication.plan.run_plan import Unit
from mirrorflow.replication.run.run_progress import copied_offsets
from mirrorflow.state.records import Progress
from tests.support import consume_all, create_topic, produce, write_config

pytestmark = pytest.mark.integration

CLI = [os.path.join(os.path.dirname(sys.executable), "mirrorflow")]
NOW = int(time.time() * 1000) - 60_000


def test_copied_offsets_counts_the_ledger_inside_the_planned_units():
    units = [Unit("t", 0, "A.t", 10, 20), Unit("t", 0, "A.t", 20, 30), Unit("t", 1, "A.t", 0, 5)]
    progress = {("t", 0): Progress("t", 0, 25, ((0, 25),), 25), ("t", 1): Progress("t", 1, -1, (), -1)}
    assert copied_offsets(units, progress) == 15
    assert copied_offsets(units, {}) == 0


def _on_a_terminal(args: list[str]) -> tuple[int, str]:
    """Run the CLI with stdout and stderr on a pseudo-terminal; returns (exit code, what it drew)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(args, stdout=follower, stderr=follower, stdin=subprocess.DEVNULL,
                            env={**os.environ, "COLUMNS": "160", "TERM": "xterm-256color"})
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    return proc.wait(300), out.decode(errors="replace")


@pytest.fixture
def flow_cfg(source, target, unique, tmp_path):
    src, tgt = unique("PA"), unique("PB")  # its own flow: these runs change only their own state
    topic = unique("cli")
    create = f"{src}.{topic}"
    create_topic(source, topic, 2)
    create_topic(target, create, 2)
    cfg = write_config(tmp_path / "mf.yaml", {src: source, tgt: target},
                       {f"{src}->{tgt}": {"topics": f"{topic}|{topic}-other", "tasks.max": 2,
                                          "heartbeats.replication.enabled": False}})
    return cfg, f"{src}->{tgt}", topic, create


def test_replicate_draws_a_bar_on_a_terminal_and_nothing_through_a_pipe(flow_cfg, source, target):
    cfg, flow, topic, remote = flow_cfg
    produce(source, topic, [{"partition": i % 2, "value": b"v%d" % i, "timestamp": NOW + i} for i in range(400)])
    base = [*CLI, "--config", str(cfg.path), "replicate", "--flow", flow, "--mode", "direct"]

    # through a pipe: the report only, no escape codes, no bar; a dry run copies nothing
    piped = subprocess.run([*base, "--dry-run"], capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0, piped.stderr
    assert "\x1b[" not in piped.stdout + piped.stderr and "rec/s" not in piped.stderr
    assert "dry run: would copy 400 offsets" in piped.stderr
    assert consume_all(target, remote) == []

    # --json: exactly one JSON document on stdout, nothing of ours on stderr (librdkafka's own log lines,
    # "%4|...", e.g. a transaction coordinator still loading on fresh clusters, are the client library's)
    capped = subprocess.run([*base, "--json", "--max-records-per-partition", "50"], capture_output=True, text=True,
                            timeout=300)
    ours = [line for line in capped.stderr.splitlines() if not re.match(r"%\d\|", line)]
    assert capped.returncode == 0 and ours == [], capped.stderr
    assert json.loads(capped.stdout)["records"] == 100
    assert len(consume_all(target, remote)) == 100

    # on a terminal: a bar of the 300 planned records that ends complete
    code, drawn = _on_a_terminal([*base, "--topics", re.escape(topic)])
    assert code == 0, drawn
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn)
    assert re.search(rf"{re.escape(flow)} records .*300/300 .*100%", plain), plain
    assert "\x1b[" in drawn  # drawn with rich, not printed
    assert len(consume_all(target, remote)) == 400


def test_cli_refuses_a_bad_topics_regex_and_cap(flow_cfg):
    cfg, flow, _, _ = flow_cfg
    base = [*CLI, "--config", str(cfg.path), "replicate", "--flow", flow, "--mode", "direct"]
    bad = subprocess.run([*base, "--topics", "orders("], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--topics: not a valid regular expression" in bad.stderr, bad.stderr
    bad = subprocess.run([*base, "--max-records-per-partition", "0"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--max-records-per-partition: must be at least 1, got 0" in bad.stderr, bad.stderr
