"""The result of an import: the config document, the environment variables that replace secrets,
the notes (what was left out and why) and the takeover steps, rendered as commented YAML."""

from __future__ import annotations

import io
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

import yaml

from mirrorflow.config.secrets import SECRET_KEY_RE


@dataclass
class Imported:
    """The result of an import: the config document plus what the user must know about it."""

    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)
    flows: dict[str, dict[str, Any]] = field(default_factory=dict)
    env_vars: dict[str, str] = field(default_factory=dict)  # VAR -> what to put in it
    notes: list[str] = field(default_factory=list)
    # flow -> the takeover's options for where this MM2 deployment keeps its offsets (none: dedicated defaults)
    takeover: dict[str, dict[str, str]] = field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"clusters": self.clusters}
        if self.defaults:
            doc["defaults"] = self.defaults
        doc["flows"] = self.flows
        return doc

    def takeover_steps(self) -> str:
        """How to move each flow from the running MM2 to mirrorflow without copying a record twice
        (ops.takeover), as comment lines of the imported file."""
        flows = [name for name, f in self.flows.items() if f.get("enabled", True) is not False]
        if not flows:
            return ""
        lines = [
            "Taking over from the running MirrorMaker 2 (each partition continues right after the last",
            "record MM2 copied; its checkpoints stay the groups' floor):",
            "  1. stop MirrorMaker 2 (all its nodes); its heartbeats into the targets must stop",
        ]
        for name in flows:
            opts = "".join(f" --{k} {shlex.quote(v)}" for k, v in self.takeover.get(name, {}).items())
            lines.append(f"  2. mirrorflow takeover --flow '{name}'{opts} --dry-run, then again with --yes")
        lines += [
            "  3. mirrorflow replicate --flow FLOW --once (or unpause the flow's DAGs); mirrorflow status",
            "  (--mm2-offsets-topic: the offset.storage.topic MM2's Connect workers used; see docs/operations.md)",
        ]
        return "# " + "\n# ".join(lines) + "\n"

    def to_yaml(self, origin: str) -> str:
        out = io.StringIO()
        out.write(f"# mirrorflow configuration imported from {origin} by `mirrorflow config import`.\n")
        if self.env_vars:
            out.write("# Secrets are not copied: export these variables where mirrorflow runs:\n")
            for var, what in self.env_vars.items():
                out.write(f"#   {var}: {what}\n")
        if self.notes:
            out.write("# Notes:\n")
            for note in self.notes:
                out.write(f"#   - {note}\n")
        out.write(self.takeover_steps())
        yaml.safe_dump(self.document(), out, sort_keys=False, default_flow_style=False, allow_unicode=True)
        return out.getvalue()

    def env(self, alias: str, what: str, description: str) -> str:
        """A `${env:MM2_<ALIAS>_<WHAT>}` reference in place of a secret of cluster `alias`."""
        var = "MM2_" + re.sub(r"[^A-Za-z0-9]+", "_", alias).upper().strip("_") + "_" + what
        self.env_vars[var] = description
        return "${env:" + var + "}"

    def secret_ref(self, full: str, key: str, value: str) -> str:
        """`value`, or an `${env:...}` reference named after `full` when `key` names a secret."""
        if looks_secret(key):
            var = "MM2_" + re.sub(r"[^A-Za-z0-9]+", "_", full).upper().strip("_")
            self.env_vars[var] = f"the value of {full}"
            return "${env:" + var + "}"
        return value


def looks_secret(key: str) -> bool:
    return bool(SECRET_KEY_RE.search(key))
