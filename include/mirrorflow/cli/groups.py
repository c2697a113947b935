"""`mirrorflow checkpoint`, `mirrorflow translate`, `mirrorflow heartbeat`: consumer groups for DR."""
from __future__ import annotations

import argparse
import sys

from mirrorflow.cli.registry import command, load_config, print_json
from mirrorflow.errors import MirrorflowError


def _flow_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--flow", required=True, help="the flow, e.g. A->B")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _checkpoint_args(p: argparse.ArgumentParser) -> None:
    _flow_arg(p)
    p.add_argument("--group", action="append", help="only this group (repeatable; default: the flow's groups)")
    p.add_argument("--no-sync", action="store_true", help="emit checkpoints only, even if sync.group.offsets.enabled")


@command("checkpoint", "translate committed source group offsets, write MM2 checkpoints, sync group offsets",
         _checkpoint_args)
def _checkpoint(args: argparse.Namespace) -> int:
    from mirrorflow.groups.checkpoint import emit_checkpoints
    from mirrorflow.groups.offset_sync import sync_group_offsets
    from mirrorflow.groups.render import translation_table

    cfg = load_config(args)
    flow = cfg.flow(args.flow)
    run = emit_checkpoints(cfg, flow, groups=args.group)
    sync = None if args.no_sync else sync_group_offsets(cfg, flow, store=run.store, groups=args.group)
    if args.json:
        print_json({"checkpoints": run.to_dict(), "group_sync": sync.to_dict() if sync else None})
    else:
        if run.skipped_reason:
            print(f"{flow.name}: checkpoints skipped: {run.skipped_reason}")
        else:
            print(f"{flow.name}: {len(run.groups)} group(s), {len(run.emitted)} checkpoint(s) written to "
                  f"{run.topic} on {flow.target}" + (" (topic created)" if run.created_topic else ""))
            for g in run.groups:
                mine = [(r, a) for r, a in run.rows if r.group == g]
                print(f"\ngroup {g}")
                print(translation_table([r for r, _ in mine], [a for _, a in mine]))
        if sync is not None:
            print()
            _print_sync(flow.name, sync)
    errors = {**run.errors, **(sync.errors if sync else {})}
    for g, e in sorted(errors.items()):
        print(f"mirrorflow: error: group {g!r}: {e}", file=sys.stderr)
    return 1 if errors else 0


def _print_sync(name: str, sync) -> None:  # noqa: ANN001 - GroupSyncRun
    if sync.skipped_reason:
        print(f"{name}: group offset sync skipped: {sync.skipped_reason}")
        return
    print(f"{name}: group offset sync on the target: {sum(sync.committed.values())} offset(s) committed "
          f"for {len(sync.committed)} group(s)")
    for p in sync.plans:
        if p.action == "left-alone":
            print(f"  {p.group}: left alone ({p.reason})")
            continue
        skipped = [x for x in p.partitions if x.action == "skip-ahead"]
        line = f"  {p.group}: {len(p.writes)} partition(s) committed" if p.writes else f"  {p.group}: up to date"
        if skipped:
            line += (f"; kept {len(skipped)} target offset(s) that are ahead: "
                     + ", ".join(f"{x.topic}[{x.partition}] {x.target_offset} > {x.checkpoint_offset}" for x in skipped))
        no_topic = [x for x in p.partitions if x.action == "skip-no-topic"]
        if no_topic:
            line += ("; not on the target (run `mirrorflow sync`): "
                     + ", ".join(f"{x.topic}[{x.partition}]" for x in no_topic))
        print(line)


def _translate_args(p: argparse.ArgumentParser) -> None:
    _flow_arg(p)
    p.add_argument("--group", required=True, help="the consumer group (as named on the source)")
    p.add_argument("--from-checkpoints", action="store_true",
                   help="read the checkpoints on the target only (works when the source is down)")


@command("translate", "show where a consumer group resumes on the target, per partition, exactly", _translate_args)
def _translate(args: argparse.Namespace) -> int:
    from mirrorflow.groups.checkpoint import translate_group
    from mirrorflow.clients import mirror_client
    from mirrorflow.groups.render import render_table, status_notes, translation_table

    cfg = load_config(args)
    flow = cfg.flow(args.flow)
    if args.from_checkpoints:
        offsets = mirror_client(cfg, flow.target).translate_offsets(flow.source, args.group)
        if not offsets:
            raise MirrorflowError(f"no checkpoints for group {args.group!r} of cluster {flow.source!r} on "
                                  f"cluster {flow.target!r}")
        if args.json:
            print_json([{"target_topic": tp.topic, "partition": tp.partition, "target_offset": om.offset,
                         "metadata": om.metadata} for tp, om in sorted(offsets.items())])
        else:
            print(render_table(("target topic", "partition", "target offset"),
                               [(tp.topic, tp.partition, om.offset) for tp, om in sorted(offsets.items())]))
        return 0
    rows = translate_group(cfg, flow, args.group)
    if args.json:
        from dataclasses import asdict

        print_json([asdict(r) for r in rows])
        return 0
    print(f"group {args.group}, flow {flow.name}")
    print(translation_table(rows))
    for note in status_notes(rows):
        print(f"  {note}")
    return 0


def _heartbeat_args(p: argparse.ArgumentParser) -> None:
    _flow_arg(p)


@command("heartbeat", "emit the flow's MM2 heartbeats once and show its replication latency", _heartbeat_args)
def _heartbeat(args: argparse.Namespace) -> int:
    from mirrorflow.groups.heartbeat import emit_heartbeats, replication_latency
    from mirrorflow.clients import mirror_client

    cfg = load_config(args)
    flow = cfg.flow(args.flow)
    emitted = emit_heartbeats(cfg, flow)
    latency = replication_latency(cfg, flow)
    upstream = sorted(mirror_client(cfg, flow.target).upstream_clusters())
    if args.json:
        print_json({"flow": flow.name, "emitted": [e.__dict__ for e in emitted], "latency": latency.to_dict(),
                    "upstream_clusters": upstream})
        return 0
    if not emitted:
        print(f"{flow.name}: heartbeats disabled (emit.heartbeats.enabled=false)")
    for e in emitted:
        print(f"{flow.name}: heartbeat ({e.source},{e.target}) written to {e.topic} on {e.cluster}")
    if latency.latency_ms is None:
        print(f"{flow.name}: no replicated heartbeat in {latency.topic} on {flow.target} yet")
    else:
        print(f"{flow.name}: replication latency {latency.latency_ms} ms (newest heartbeat in {latency.topic})")
    print(f"{flow.target}: upstream clusters: {', '.join(upstream) or 'none'}")
    return 0
