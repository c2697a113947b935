"""Benchmark: the control plane at scale (plan, checkpoint, translate, sync), each against 1/10 of its size.

    .venv/bin/python bench/bench_control_plane.py [--partitions 10000] [--groups 1000]
                                                  [--group-partitions 100] [--topics 2000]
                                                  [--only plan,checkpoint,translate,sync] [--profile PARTS]

Starts its own local clusters A (source) and B (target) in a temporary home and creates, as set-up
(not timed):

* plan:       PARTITIONS partitions on A (topics of 100 partitions, `cp.plan.t*`), one record each;
* checkpoint: one topic of GROUP_PARTITIONS partitions (`cp.grp`), synced and replicated to B (so
  the offset map covers it), and GROUPS consumer groups (`cp-g*`) with a committed offset on
  every partition, plus GROUPS/10 more (`cpb-g*`) for the baseline;
* translate:  the first of those groups, and a group on 1/10 of the partitions for the baseline;
* sync:       TOPICS topics of 1 partition (`cp.sync.t*`) and TOPICS/10 (`cp.syncb.t*`) on A.

Then it times, each with fresh clients as a CLI or DAG task would have: planning the flow
(`make_plan`: metadata, offsets, progress, topic ids), one checkpoint pass emitting a checkpoint
for every (group, partition) (`emit_checkpoints`), `translate` of one group (`translate_group`)
and a topic sync (`sync_flow`, topics and configs; ACL sync is off: the dev clusters have no
authorizer). Each line prints the figure, its goal (docs/benchmarks.md), the baseline at 1/10 of the
size and the ratio (10x the work at the same cost per item gives 10). A missed goal says so.
`--profile PARTS` prints the 25 most expensive functions (cProfile, cumulative) of those parts'
figures. The brokers stop when the benchmark ends. It prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "devtools"), str(ROOT)]

import yaml  # noqa: E402
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from mirrorflow_dev.cluster import DevClusters  # noqa: E402

PARTS = ("plan", "checkpoint", "translate", "sync")
GOALS = {"plan": 5.0, "checkpoint": 10.0, "translate": 1.0, "sync": 30.0}


def create_topics(admin: AdminClient, names: list[str], partitions: int) -> None:
    """Create topics in batches and wait until the metadata shows all of them (set-up). KRaft refuses
    a request of more than 10,000 records (max.records.per.user.op): 2,000 partitions a request."""
    batch = max(1, 2000 // partitions)
    for i in range(0, len(names), batch):
        futs = admin.create_topics([NewTopic(n, partitions, 1) for n in names[i : i + batch]], request_timeout=120)
        for fut in futs.values():
            fut.result(180)
    want = set(names)
    deadline = time.time() + 300
    while time.time() < deadline:
        md = admin.list_topics(timeout=60).topics
        if all(n in md and len(md[n].partitions) == partitions for n in want):
            return
        time.sleep(1)
    raise SystemExit("topics did not appear")


def write_one(cluster: Any, tps: list[tuple[str, int]]) -> None:
    p = Producer({**cluster.client_config(), "linger.ms": 50, "enable.idempotence": True})
    for t, part in tps:
        p.produce(t, b"v", b"k", part)
        p.poll(0)
    assert p.flush(300) == 0


def commit_groups(admin: AdminClient, groups: list[str], topic: str, partitions: int, offset: int = 1) -> None:
    """Commit `offset` on every partition of `topic` for each group (set-up; one request per group)."""
    tps = [TopicPartition(topic, p, offset) for p in range(partitions)]
    for i in range(0, len(groups), 200):
        futs = []
        for g in groups[i : i + 200]:
            futs += list(admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, tps)]).values())
        for f in futs:
            f.result(120)


def write_config(home: Path, name: str, clusters: dict[str, Any], topics: str, **props: Any) -> Path:
    raw = {
        "clusters": {x.alias: x.client_config() for x in clusters.values()},
        "defaults": {"topics": topics, "sync.topic.acls.enabled": False, "tasks.max": 2, **props},
        "flows": {"A->B": {}},
    }
    path = home / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def timed(fn: Callable[[], Any], profile: bool = False) -> tuple[float, Any]:
    prof = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if prof is not None:
        prof.enable()
    out = fn()
    if prof is not None:
        prof.disable()
    took = time.perf_counter() - t0
    if prof is not None:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25)
        print(s.getvalue())
    return took, out


class Bench:
    def __init__(self, home: Path, clusters: dict[str, Any], args: argparse.Namespace) -> None:
        self.home, self.clusters, self.args = home, clusters, args
        self.a, self.b = clusters["A"], clusters["B"]
        self.admin_a = AdminClient(self.a.client_config())
        self.rows: list[tuple[str, str, float, float, str, str]] = []

    def load(self, path: Path) -> Any:
        from mirrorflow import config as config_mod

        return config_mod.load(path)

    def record(self, part: str, what: str, figure: float, baseline: float, base_what: str) -> None:
        self.rows.append((part, what, figure, baseline, base_what, ""))
        goal = GOALS[part]
        verdict = "met" if figure <= goal else f"MISSED by {figure - goal:.1f} s ({figure / goal:.1f}x the goal)"
        print(
            f"{part:10} {what:38} {figure:7.2f} s  goal <= {goal:g} s: {verdict}; baseline {base_what} "
            f"{baseline:.2f} s, ratio {figure / max(baseline, 1e-6):.1f}x",
            flush=True,
        )

    # -- plan ---------------------------------------------------------------------------------
    def plan(self) -> None:
        from mirrorflow.clients import FlowClients
        from mirrorflow.replication.plan.planner import make_plan

        per_topic = 100
        n_topics = max(1, self.args.partitions // per_topic)
        topics = [f"cp.plan.t{i:04d}" for i in range(n_topics)]
        t0 = time.time()
        create_topics(self.admin_a, topics, per_topic)
        write_one(self.a, [(t, p) for t in topics for p in range(per_topic)])
        print(f"set-up plan: {n_topics * per_topic:,} partitions created and seeded in {time.time() - t0:.0f} s")
        base_n = max(1, n_topics // 10)
        base_re = "|".join(t.replace(".", r"\.") for t in topics[:base_n])
        full = self.load(write_config(self.home, "plan", self.clusters, r"cp\.plan\..*"))
        base = self.load(write_config(self.home, "plan-base", self.clusters, base_re))

        def plan_of(cfg: Any) -> Callable[[], Any]:
            def go() -> Any:
                with FlowClients(cfg, cfg.flow("A->B")) as c:
                    return make_plan(c)

            return go

        timed(plan_of(base))  # warm-up: state topics on B, imports
        bs, bp = timed(plan_of(base))
        fs, fp = timed(plan_of(full), "plan" in self.args.profile)
        assert len(fp.partitions) == n_topics * per_topic and len(bp.partitions) == base_n * per_topic
        self.record("plan", f"plan {len(fp.partitions):,} partitions", fs, bs, f"{len(bp.partitions):,} partitions")

    # -- checkpoint and translate ---------------------------------------------------------------
    def groups_setup(self) -> tuple[Any, list[str], list[str]]:
        from mirrorflow.metadata.sync import sync_flow
        from mirrorflow.replication.run.runner import run_once

        gp = self.args.group_partitions
        t0 = time.time()
        create_topics(self.admin_a, ["cp.grp"], gp)
        write_one(self.a, [("cp.grp", p) for p in range(gp)])
        cfg = self.load(
            write_config(
                self.home, "groups", self.clusters, r"cp\.grp", groups="cp.*", **{"sync.group.offsets.enabled": False}
            )
        )
        assert sync_flow(cfg, "A->B").ok
        rep = run_once(cfg, cfg.flow("A->B"), mode="direct")
        assert rep.ok and rep.records == gp, rep.render()
        groups = [f"cp-g{i:05d}" for i in range(self.args.groups)]
        base = [f"cpb-g{i:05d}" for i in range(max(1, self.args.groups // 10))]
        commit_groups(self.admin_a, groups + base, "cp.grp", gp)
        commit_groups(self.admin_a, ["cpt-small"], "cp.grp", max(1, gp // 10))
        print(
            f"set-up groups: topic of {gp} partitions replicated, {len(groups) + len(base) + 1:,} groups committed "
            f"in {time.time() - t0:.0f} s"
        )
        return cfg, groups, base

    def checkpoint(self, cfg: Any, groups: list[str], base: list[str]) -> None:
        from mirrorflow.groups.checkpoint import emit_checkpoints

        gp = self.args.group_partitions
        flow = cfg.flow("A->B")
        emit_checkpoints(cfg, flow, only="cpt-small")  # warm-up: creates the checkpoints topic
        bs, br = timed(lambda: emit_checkpoints(cfg, flow, only=r"cpb-g\d+"))
        fs, fr = timed(lambda: emit_checkpoints(cfg, flow, only=r"cp-g\d+"), "checkpoint" in self.args.profile)
        assert len(fr.emitted) == len(groups) * gp and len(br.emitted) == len(base) * gp, (
            len(fr.emitted),
            len(br.emitted),
            fr.errors,
        )
        self.record(
            "checkpoint",
            f"{len(groups):,} groups x {gp} partitions",
            fs,
            bs,
            f"{len(base):,} groups",
        )
        again, ar = timed(lambda: emit_checkpoints(cfg, flow, only=r"cp-g\d+"), "checkpoint" in self.args.profile)
        print(f"{'':10} (the same pass again, nothing changed: {again:.2f} s, {len(ar.emitted)} emitted)")

    def translate(self, cfg: Any, groups: list[str]) -> None:
        from mirrorflow.groups.checkpoint import translate_group

        gp = self.args.group_partitions
        flow = cfg.flow("A->B")
        bs, br = timed(lambda: translate_group(cfg, flow, "cpt-small"))
        fs, fr = timed(lambda: translate_group(cfg, flow, groups[0]), "translate" in self.args.profile)
        assert len(fr) == gp and all(t.status == "exact" or t.status == "end" for t in fr), fr[:3]
        self.record("translate", f"translate a group of {gp} partitions", fs, bs, f"{len(br)} partitions")

    # -- sync -----------------------------------------------------------------------------------
    def sync(self) -> None:
        from mirrorflow.metadata.sync import sync_flow

        n = self.args.topics
        full_t = [f"cp.sync.t{i:05d}" for i in range(n)]
        base_t = [f"cp.syncb.t{i:05d}" for i in range(max(1, n // 10))]
        t0 = time.time()
        create_topics(self.admin_a, full_t + base_t, 1)
        print(f"set-up sync: {len(full_t) + len(base_t):,} topics created in {time.time() - t0:.0f} s")
        full = self.load(write_config(self.home, "sync", self.clusters, r"cp\.sync\..*"))
        base = self.load(write_config(self.home, "sync-base", self.clusters, r"cp\.syncb\..*"))
        bs, br = timed(lambda: sync_flow(base, "A->B"))
        fs, fr = timed(lambda: sync_flow(full, "A->B"), "sync" in self.args.profile)
        assert br.ok and fr.ok, fr.headline()
        self.record("sync", f"sync {n:,} new topics", fs, bs, f"{len(base_t):,} topics")
        again, _ = timed(lambda: sync_flow(full, "A->B"))
        print(f"{'':10} (the same sync again, nothing to create: {again:.2f} s)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=10_000, help="partitions to plan (topics of 100)")
    ap.add_argument("--groups", type=int, default=1000, help="consumer groups to checkpoint")
    ap.add_argument("--group-partitions", type=int, default=100, help="partitions each group committed on")
    ap.add_argument("--topics", type=int, default=2000, help="topics to sync")
    ap.add_argument("--only", default=",".join(PARTS), help="parts to run (comma-separated)")
    ap.add_argument("--profile", default="", help="print a cProfile of these parts' figures (comma-separated)")
    args = ap.parse_args()
    args.profile = [p.strip() for p in args.profile.split(",") if p.strip()]
    only = [p.strip() for p in args.only.split(",") if p.strip()]
    home = Path(tempfile.mkdtemp(prefix="mirrorflow-bench-cp-"))
    os.environ["MIRRORFLOW_RUN_DIR"] = str(home / "runs")
    dev = DevClusters(home)
    try:
        clusters = dev.up(["A", "B"], attached=True)
        bench = Bench(home, clusters, args)
        print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start\n")
        if "plan" in only:
            bench.plan()
        if "checkpoint" in only or "translate" in only:
            cfg, groups, base = bench.groups_setup()
            if "checkpoint" in only:
                bench.checkpoint(cfg, groups, base)
            if "translate" in only:
                bench.translate(cfg, groups)
        if "sync" in only:
            bench.sync()
        missed = [r[0] for r in bench.rows if r[2] > GOALS[r[0]]]
        print(f"\nload average {os.getloadavg()[0]:.1f} at the end; goals missed: {', '.join(missed) or 'none'}")
        return 0
    finally:
        dev.down()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
