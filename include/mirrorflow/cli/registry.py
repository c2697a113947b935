"""The command registry: each `cli/<command>.py` module registers its commands with `@command`."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from mirrorflow import config as config_mod

Handler = Callable[[argparse.Namespace], int]
# (name, help, add_arguments, handler) of every command, in registration order.
COMMANDS: list[tuple[str, str, Callable[[argparse.ArgumentParser], None], Handler]] = []


def command(name: str, help: str, args: Callable[[argparse.ArgumentParser], None] = lambda p: None):
    def deco(fn: Handler) -> Handler:
        COMMANDS.append((name, help, args, fn))
        return fn

    return deco


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


def load_config(args: argparse.Namespace) -> config_mod.Config:
    return config_mod.load(args.config)


def split_list(v: str | None) -> list[str]:
    """`a, b,` -> ["a", "b"] (comma-separated option values)."""
    return [x.strip() for x in (v or "").split(",") if x.strip()]
