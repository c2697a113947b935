"""`mirrorflow config validate|import|compat`: check a config file, convert an MM2 / Strimzi one, or print
the MM2 compatibility table."""

from __future__ import annotations

import argparse
import sys

from mirrorflow.cli.registry import command, load_config


def _config_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="config_cmd", required=True)
    sub.add_parser(
        "validate",
        help="check the config file and report every problem with its key (flows with mirror.read.only: true "
        "also check their target: an authorizer, a principal that may alter ACLs and is a super user)",
    )
    imp = sub.add_parser(
        "import",
        help="convert an mm2.properties, a Strimzi KafkaMirrorMaker2 resource or MM2 connector configs (the JSON "
        "posted to Kafka Connect's REST API, or connector .properties)",
    )
    imp.add_argument("file")
    imp.add_argument(
        "--connect-worker",
        metavar="FILE",
        help="with connector configs: the Connect worker's properties (its offset.storage.topic is where the "
        "takeover reads MM2's offsets)",
    )
    imp.add_argument("-o", "--output", help="write the YAML here instead of printing it")
    compat = sub.add_parser(
        "compat", help="print the MM2/Strimzi compatibility table (docs/mm2-compatibility.md) as Markdown"
    )
    compat.add_argument("--markdown", action="store_true", help="Markdown (the only format; the default)")
    compat.add_argument("-o", "--output", help="write it here instead of printing it")


@command("config", "validate or import configuration", _config_args)
def _config(args: argparse.Namespace) -> int:
    if args.config_cmd == "validate":
        from mirrorflow.errors import ConfigError
        from mirrorflow.metadata.read_only import check_flows

        cfg = load_config(args)
        problems = check_flows(cfg)
        if problems:
            raise ConfigError(problems, str(cfg.path))
        print(
            f"{cfg.path}: OK ({len(cfg.clusters)} clusters, {len(cfg.flows)} flows: {', '.join(cfg.flows) or 'none'})"
        )
        return 0
    if args.config_cmd == "compat":  # needs no config file
        from mirrorflow.config import compat

        text = compat.markdown()
    else:
        from mirrorflow.config import mm2_import

        text = mm2_import.import_file(args.file, args.connect_worker)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0
