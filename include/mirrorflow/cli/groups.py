"""`mirrorflow checkpoint`, `mirrorflow translate` (a group, or `--offsets` of a consumer outside groups),
`mirrorflow heartbeat`: consumer groups for DR."""

from __future__ import annotations

import argparse
import sys

from mirrorflow.cli.registry import command, load_flow, print_json, print_report
from mirrorflow.errors import ConfigError, MirrorflowError


def _flow_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--flow", required=True, help="the flow, e.g. A->B")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _checkpoint_args(p: argparse.ArgumentParser) -> None:
    _flow_arg(p)
    p.add_argument("--group", action="append", help="only this group (repeatable; default: the flow's groups)")
    p.add_argument("--no-sync", action="store_true", help="emit checkpoints only, even if sync.group.offsets.enabled")


@command(
    "checkpoint",
    "translate committed source group offsets, write MM2 checkpoints, sync group offsets",
    _checkpoint_args,
)
def _checkpoint(args: argparse.Namespace) -> int:
    from mirrorflow.groups.checkpoint import emit_checkpoints
    from mirrorflow.groups.offset_sync import sync_group_offsets

    cfg, flow = load_flow(args)
    run = emit_checkpoints(cfg, flow, groups=args.group)
    sync = None if args.no_sync else sync_group_offsets(cfg, flow, store=run.store, groups=args.group)
    if args.json:
        print_json({"checkpoints": run.to_json(), "group_sync": sync.to_json() if sync else None})
    else:
        print(run.render())
        if sync is not None:
            print()
            print(sync.render())
    errors = {**run.errors, **(sync.errors if sync else {})}
    for g, e in sorted(errors.items()):
        print(f"mirrorflow: error: group {g!r}: {e}", file=sys.stderr)
    return 1 if errors else 0


def _translate_args(p: argparse.ArgumentParser) -> None:
    _flow_arg(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--group", help="the consumer group (as named on the source)")
    which.add_argument(
        "--offsets",
        metavar="JSON",
        help="positions kept outside consumer groups (Spark, Flink, assign() consumers) in Spark's startingOffsets "
        'form keyed by source topic, e.g. \'{"orders": {"0": 42, "1": 17}}\' (-2 earliest, -1 latest): answers the '
        "same form keyed by the target topic, for startingOffsets on the target; reads the target only",
    )
    p.add_argument(
        "--from-checkpoints",
        action="store_true",
        help="with --group: read the checkpoints on the target only (works when the source is down)",
    )


@command(
    "translate",
    "show where a consumer group, or a consumer outside groups (--offsets), resumes on the target, per partition: "
    "exactly, or earlier (reread) where the offset map cannot say",
    _translate_args,
)
def _translate(args: argparse.Namespace) -> int:
    from mirrorflow.clients import mirror_client
    from mirrorflow.groups.checkpoint import translate_group
    from mirrorflow.groups.offset_sync import checkpoint_rereads
    from mirrorflow.groups.render import CheckpointedOffsets
    from mirrorflow.groups.translation import Translation, translate_offsets
    from mirrorflow.reporting import Report

    cfg, flow = load_flow(args)
    report: Report
    if args.offsets is not None:
        if args.from_checkpoints:
            raise ConfigError(
                [("--from-checkpoints", "only with --group: --offsets reads the offset map on the target already")]
            )
        report = translate_offsets(cfg, flow, args.offsets)
        from mirrorflow.groups.translation import record_translation
        from mirrorflow.state.lease import whoami

        record_translation(cfg, flow, report, whoami(), "cli")
    elif args.from_checkpoints:
        offsets = mirror_client(cfg, flow.target).translate_offsets(flow.source, args.group)
        if not offsets:
            raise MirrorflowError(
                f"no checkpoints for group {args.group!r} of cluster {flow.source!r} on cluster {flow.target!r}"
            )
        report = CheckpointedOffsets(offsets, checkpoint_rereads(cfg, flow, args.group))
    else:
        report = Translation(args.group, flow.name, translate_group(cfg, flow, args.group))
    print_report(report, args.json)
    return 0


def _heartbeat_args(p: argparse.ArgumentParser) -> None:
    _flow_arg(p)


@command("heartbeat", "emit the flow's MM2 heartbeats once and show its replication latency", _heartbeat_args)
def _heartbeat(args: argparse.Namespace) -> int:
    from mirrorflow.clients import mirror_client
    from mirrorflow.groups.heartbeat import HeartbeatRun, emit_heartbeats, replication_latency

    cfg, flow = load_flow(args)
    emitted = emit_heartbeats(cfg, flow)
    latency = replication_latency(cfg, flow)
    upstream = sorted(mirror_client(cfg, flow.target).upstream_clusters())
    print_report(HeartbeatRun(flow.name, flow.target, emitted, latency, upstream), args.json)
    return 0
