"""An operation's inputs, declared once: the CLI's flags (`add_flags`), the DAG's trigger form
(mirrorflow_airflow.params.form) and the check of a value whichever door it came through (`checked`)
are made from the same `Field`s, so the doors cannot drift apart in name, default or rule.

The failover, the failback and the drill declare theirs in ops.dr.inputs (the first two's `OPERATION`s,
ops.dr.gated, check them; the drill checks its own), the take-over from MM2 in ops.takeover.inputs, verify
in ops.verify.inputs, a flow's pause, resume and stop in ops.control.inputs, replicate, backfill and the re-seed
in ops.inputs. What only one door has stays there: the CLI's
`--copy-mode`, `--plan-id`, `--yes` and `--json`; the DAG's approval timeout and approvers.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mirrorflow.errors import ConfigError

KINDS = ("flag", "count", "number", "regex", "choice", "text")


@dataclass(frozen=True)
class Field:
    """One input: `name` is the Param's key and, with dashes, the CLI's flag (`max_lag`: `--max-lag`).

    kind `flag` (a boolean, off by default), `count` (an integer from `minimum`, or none), `number` (a
    number from `minimum`, `default` unless given), `regex` (a pattern, or none: no filter), `choice`
    (one of `choices`, `default` unless given) or `text` (a string, `default` unless given; `required`: it
    must be given; with `blank` set, a given string that is empty or spaces only is refused with that
    reason)."""

    name: str
    title: str
    help: str
    kind: str
    default: Any = None
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    blank: str = ""  # text: why a given empty string is refused ("": it counts as none)
    aliases: tuple[str, ...] = ()  # the CLI's other names of the flag (kept for older command lines)
    required: bool = False  # text: it must be given (the CLI's flag is required, the form's field too)
    # text: the form's JSON-schema pattern (refused before any task runs); the operation's own parse checks
    # the value again whichever door it came through, with the reason (e.g. a time without a zone)
    pattern: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"field {self.name}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind == "flag" and self.default is None:
            object.__setattr__(self, "default", False)
        if self.kind == "choice" and self.default not in self.choices:
            raise ValueError(f"field {self.name}: default {self.default!r} is not one of {self.choices}")

    @property
    def flag(self) -> str:
        return named(self.name)


def named(name: str, via: str = "cli") -> str:
    """An input as the door `via` calls it: the CLI's flag (`--max-lag`), else the DAG's `Param max_lag`."""
    return "--" + name.replace("_", "-") if via == "cli" else f"Param {name}"


def add_flags(parser: argparse.ArgumentParser, fields: Sequence[Field]) -> None:
    """Each field as a flag of `parser`, its help the field's."""
    for f in fields:
        if f.kind == "flag":
            parser.add_argument(f.flag, action="store_true", help=f.help)
        elif f.kind == "count":
            parser.add_argument(f.flag, type=int, metavar="N", help=f.help)
        elif f.kind == "choice":
            parser.add_argument(f.flag, choices=list(f.choices), default=f.default, help=f.help)
        elif f.kind == "number":
            parser.add_argument(f.flag, *f.aliases, type=float, default=f.default, metavar="N", help=f.help)
        elif f.kind == "text":
            parser.add_argument(f.flag, *f.aliases, required=f.required, help=f.help)
        else:
            parser.add_argument(f.flag, metavar="REGEX", help=f.help)


def from_args(args: argparse.Namespace, fields: Sequence[Field]) -> dict[str, Any]:
    """The fields' values as the CLI parsed them."""
    return {f.name: getattr(args, f.name) for f in fields}


def checked(fields: Sequence[Field], values: Mapping[str, Any], via: str = "cli") -> dict[str, Any]:
    """The fields' values from `values` (what a door handed over: a form, the CLI's flags, an operator's
    arguments), defaults filled in, empty text as none. ConfigError naming each value that breaks its
    field's rule as the door `via` calls it (the CLI: `--max-lag`; Airflow: `Param max_lag`), and the
    rule; other keys are left to the door."""
    out: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    for f in fields:
        value = values.get(f.name)
        key = named(f.name, via)
        if f.kind == "text" and f.blank and isinstance(value, str) and not value.strip():
            problems.append((key, f"must not be empty: {f.blank}"))
            continue
        if value is None or value == "":
            if f.required:
                problems.append((key, f"must be given: {f.help}"))
            out[f.name] = f.default
            continue
        if f.kind == "flag":
            if not isinstance(value, bool):
                problems.append((key, f"must be true or false, got {value!r}"))
        elif f.kind in ("count", "number"):
            kinds = (int,) if f.kind == "count" else (int, float)
            if isinstance(value, bool) or not isinstance(value, kinds):
                problems.append((key, f"must be a {'whole ' if f.kind == 'count' else ''}number, got {value!r}"))
            elif f.minimum is not None and value < f.minimum:
                problems.append((key, f"must be at least {f.minimum}, got {value}"))
        elif f.kind == "choice":
            if value not in f.choices:
                problems.append((key, f"must be one of {', '.join(f.choices)}, got {value!r}"))
        elif f.kind == "text":
            if not isinstance(value, str):
                problems.append((key, f"must be text, got {value!r}"))
        else:
            try:
                re.compile(str(value))
            except re.error as exc:
                problems.append((key, f"not a valid regular expression ({exc}): {value!r}"))
        out[f.name] = value
    if problems:
        raise ConfigError(problems)
    return out
