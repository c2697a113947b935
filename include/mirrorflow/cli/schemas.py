"""`mirrorflow schemas --flow A->B [--dry-run] [--json]`: copy the flow's schemas with their ids."""

from __future__ import annotations

import argparse

from mirrorflow.cli.registry import command, load_config, print_report


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--flow", required=True, help="the flow whose schemas to copy, e.g. A->B")
    p.add_argument("--dry-run", action="store_true", help="print what would be copied, write nothing")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


@command(
    "schemas",
    "copy the source registry's schemas to the target's with their ids (subjects renamed by the flow's policy)",
    _args,
)
def _schemas(args: argparse.Namespace) -> int:
    from mirrorflow.cli.progress import spinner
    from mirrorflow.schemas.replicate import replicate_schemas

    with spinner(args, f"schemas of {args.flow}{' (dry run)' if args.dry_run else ''}"):
        run = replicate_schemas(load_config(args), args.flow, dry_run=args.dry_run, via="cli")
    print_report(run, args.json)
    return 0
