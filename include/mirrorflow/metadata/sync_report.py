"""What a sync did (or, in a dry run, would do): changes, findings and skips, as text or JSON.

One report type for every concern (topics, configs, ACLs) so the CLI, the Airflow tasks and the
tests read the same thing. `summary()` is small on purpose: it is what goes to XCom.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from mirrorflow.reporting import Report

CONCERNS = ("topics", "configs", "acls")

PLANNED, DONE, FAILED = "planned", "done", "failed"

# change kinds
CREATE_TOPIC = "create-topic"
ADD_PARTITIONS = "add-partitions"
SET_CONFIG = "set-config"
DELETE_CONFIG = "delete-config"
ADD_ACL = "add-acl"
DENY_WRITE = "deny-write"  # mirror.read.only: the remote topic's DENY WRITE for User:* (metadata.read_only)
# finding kinds
ORPHAN = "orphan"
MORE_PARTITIONS = "target-has-more-partitions"

_LABELS = {
    CREATE_TOPIC: "create topic",
    ADD_PARTITIONS: "add partitions",
    SET_CONFIG: "set config",
    DELETE_CONFIG: "delete config",
    ADD_ACL: "add ACL",
    DENY_WRITE: "deny writes",
    ORPHAN: "orphan",
    MORE_PARTITIONS: "more partitions",
}


@dataclass
class Change:
    """One change on the target: planned by the planner, then done or failed when applied."""

    concern: str
    kind: str
    resource: str  # the remote topic
    detail: str
    status: str = PLANNED
    error: str | None = None


@dataclass
class Finding:
    """Something an operator should know that sync deliberately does not change."""

    concern: str
    kind: str
    resource: str
    message: str


@dataclass
class Skip:
    """Something sync left alone on purpose, with the reason."""

    concern: str
    resource: str
    reason: str


@dataclass
class SyncReport(Report):
    flow: str
    dry_run: bool
    concerns: list[str]
    changes: list[Change] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    state_skip: str | None = None  # the flow's state stopped the sync: why, and the next step (FlowState)
    topics: list[tuple[str, str]] = field(default_factory=list)  # (source, remote) the topics concern selected

    def change(self, concern: str, kind: str, resource: str, detail: str) -> Change:
        c = Change(concern, kind, resource, detail)
        self.changes.append(c)
        return c

    def find(self, concern: str, kind: str, resource: str, message: str) -> None:
        self.findings.append(Finding(concern, kind, resource, message))

    def skip(self, concern: str, resource: str, reason: str) -> None:
        self.skipped.append(Skip(concern, resource, reason))

    @property
    def failed(self) -> list[Change]:
        return [c for c in self.changes if c.status == FAILED]

    @property
    def ok(self) -> bool:
        return not self.failed

    def counts(self) -> dict[str, int]:
        applied = [c for c in self.changes if c.status != FAILED]
        kinds = Counter(c.kind for c in applied)
        config_topics = {c.resource for c in applied if c.kind in (SET_CONFIG, DELETE_CONFIG)}
        found = Counter(f.kind for f in self.findings)
        return {
            "topics_created": kinds[CREATE_TOPIC],
            "topics_expanded": kinds[ADD_PARTITIONS],
            "configs_changed": kinds[SET_CONFIG] + kinds[DELETE_CONFIG],
            "topics_with_config_changes": len(config_topics),
            "acls_added": kinds[ADD_ACL],
            "writes_denied": kinds[DENY_WRITE],
            "failed": len(self.failed),
            "skipped": len(self.skipped),
            "orphans": found[ORPHAN],
            "targets_with_more_partitions": found[MORE_PARTITIONS],
        }

    @property
    def changed_nothing(self) -> bool:
        return not self.changes

    def _outcome(self) -> dict[str, Any]:
        """What the full report and the XCom summary both start with."""
        return {
            "flow": self.flow,
            "dry_run": self.dry_run,
            "concerns": list(self.concerns),
            "ok": self.ok,
            "counts": self.counts(),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self._outcome(),
            "changes": [asdict(c) for c in self.changes],
            "findings": [asdict(f) for f in self.findings],
            "skipped": [asdict(s) for s in self.skipped],
        }

    def summary(self, limit: int = 10) -> dict[str, Any]:
        """A small dict for XCom: counts plus the first few failures and findings."""
        return {
            **self._outcome(),
            "headline": self.headline(),
            "failures": [f"{c.resource}: {c.error}" for c in self.failed[:limit]],
            "findings": [f"{f.resource}: {f.message}" for f in self.findings[:limit]],
        }

    def headline(self) -> str:
        n = self.counts()
        if self.changed_nothing:
            body = "nothing to change: the target is in sync"
        else:
            verb = "would be" if self.dry_run else ""
            parts = [
                (n["topics_created"], "topic created", "topics created"),
                (n["topics_expanded"], "topic expanded", "topics expanded"),
                (n["configs_changed"], "config changed", "configs changed"),
                (n["acls_added"], "ACL added", "ACLs added"),
                (n["writes_denied"], "remote topic made read-only", "remote topics made read-only"),
            ]
            said = [f"{k} {one if k == 1 else many}" for k, one, many in parts if k]
            if self.dry_run:
                said = [
                    s.replace(" created", " to create")
                    .replace(" expanded", " to expand")
                    .replace(" changed", " to change")
                    .replace(" added", " to add")
                    .replace(" made read-only", " to make read-only")
                    for s in said
                ]
            body = ", ".join(said) or f"{len(self.changes)} changes {verb}".strip()
        extra = [
            f"{n['failed']} failed" if n["failed"] else "",
            f"{n['skipped']} skipped" if n["skipped"] else "",
            f"{n['orphans']} orphaned" if n["orphans"] else "",
            f"{n['targets_with_more_partitions']} with more partitions on the target"
            if n["targets_with_more_partitions"]
            else "",
        ]
        return "; ".join([body, *[e for e in extra if e]])

    def lines(self, max_skips_per_reason: int = 5) -> list[str]:
        mode = "dry run, nothing was changed" if self.dry_run else "applied"
        lines = [f"sync {self.flow} ({', '.join(self.concerns)}): {mode}"]
        if self.changes:
            lines.append("changes:" if not self.dry_run else "plan:")
            for c in self.changes:
                status = "" if c.status == DONE or (self.dry_run and c.status == PLANNED) else f" [{c.status.upper()}]"
                lines.append(
                    f"  {_LABELS.get(c.kind, c.kind):<15} {c.resource}: {c.detail}{status}"
                    + (f": {c.error}" if c.error else "")
                )
        if self.findings:
            lines.append("findings (left as they are):")
            for f in self.findings:
                lines.append(f"  {_LABELS.get(f.kind, f.kind):<15} {f.resource}: {f.message}")
        if self.skipped:
            lines.append("skipped:")
            by_reason: dict[tuple[str, str], list[str]] = {}
            for s in self.skipped:
                by_reason.setdefault((s.concern, s.reason), []).append(s.resource)
            for (concern, reason), names in by_reason.items():
                shown = ", ".join(names[:max_skips_per_reason])
                more = f" and {len(names) - max_skips_per_reason} more" if len(names) > max_skips_per_reason else ""
                lines.append(f"  {concern}: {reason}: {shown}{more}")
        lines.append(f"result: {self.headline()}")
        return lines


def settle(change: Change, future: Any, timeout: float) -> None:
    """Wait for an admin future and record on `change` whether it was done or failed (and why)."""
    try:
        future.result(timeout)
        change.status = DONE
    except KafkaException as exc:
        err = exc.args[0] if exc.args else exc
        change.status = FAILED
        change.error = err.str() if hasattr(err, "str") else str(err)
        logging.getLogger("mirrorflow.metadata.sync").warning(
            "%s %s failed: %s", change.kind, change.resource, change.error
        )
    except Exception as exc:  # noqa: BLE001 - a timeout or a client bug: record it, go on with the rest
        change.status = FAILED
        change.error = f"{type(exc).__name__}: {exc}"
