"""What a failover did or would do (`FailoverReport`, a `reporting.Report`): its drain, its plan
with the RPO and the groups, the planned mode's verify, what was committed; as text, as JSON and as
the markdown of Airflow's approval step."""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from mirrorflow.groups.offset_sync import GroupSyncRun
from mirrorflow.groups.render import resume_note
from mirrorflow.ops.dr.client_switch import SwitchReport, switch_lines, switch_markdown
from mirrorflow.ops.dr.failover_plan import FailoverPlan, PartitionRPO
from mirrorflow.ops.verify.verify_report import VerifyReport
from mirrorflow.reporting import Report


def read_committed_note(target: str) -> str:
    """What a failover's plan and report tell the application owners about reading the target."""
    return (
        f"consumers of the replicated topics on {target!r} must read with isolation.level=read_committed "
        "(mirrorflow copies in transactions: the log also holds the records of aborted copies and, where a "
        "transaction was left open, mirrorflow's aborted fencing records; a read_uncommitted consumer reads them "
        "as duplicates or foreign records). Java's default is read_uncommitted, librdkafka's read_committed"
    )


@dataclass
class FailoverReport(Report):
    flow: str
    target: str
    mode: str
    dry_run: bool
    at_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    source_error: str | None = None  # why the source could not tell its ends (unplanned)
    drain: list[str] = field(default_factory=list)  # what the planned drain did
    plan: FailoverPlan | None = None
    verify: VerifyReport | None = None  # planned mode: the target checked against the source
    committed: dict[str, int] = field(default_factory=dict)  # group -> partitions committed
    promoted: list[str] | None = None  # mirror.read.only: the remote topics whose DENY the commit lifted
    approved_by: str | None = None
    done: bool = False  # the groups were committed and the flow stopped
    note: str | None = None  # why nothing was done (already failed over, not confirmed, dry run)
    take_over: str | None = None  # what the take-over takes the flow from (preflight) or did (commit)
    switch_steps: list[str] = field(default_factory=list)  # the client-switch steps approved with the plan
    switch: SwitchReport | None = None  # what they did after the commit (a dry run: what they would do)
    # schema versions registered on the source's registry and not on the target's, which consumers on the
    # target cannot decode (None: unknown, schemas_note says why; both None: the clusters name no registries)
    schemas_missing: int | None = None
    schemas_note: str | None = None

    @property
    def partitions(self) -> list[PartitionRPO]:
        return list(self.plan.partitions) if self.plan else []

    @property
    def groups(self) -> GroupSyncRun | None:
        if self.plan is None:
            return None
        return GroupSyncRun(self.flow, list(self.plan.groups), dict(self.committed), dict(self.plan.errors))

    @property
    def not_replicated(self) -> int | None:
        values = [p.not_replicated for p in self.partitions]
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    def status(self) -> str:
        if self.done:
            if self.plan is not None and self.plan.moves_after:
                return f"DONE, groups moved after failover {self.plan.moves_after}"
            if self.switch is not None and not self.switch.ok:
                failed = next((s.name for s in self.switch.steps if not s.ok), "?")
                return f"DONE, the flow is stopped; the client switch FAILED at step {failed!r} (see below)"
            return "DONE, the flow is stopped"
        if self.note:
            return self.note
        if self.plan is not None and self.plan.blocked:
            return f"plan {self.plan.id} CANNOT be committed: {self.plan.blocked}"
        return f"plan {self.plan.id}, nothing committed yet" if self.plan else "preflight"

    def lines(self) -> list[str]:
        nr = self.not_replicated
        out = [
            f"failover of flow {self.flow} to cluster {self.target!r} ({self.mode}"
            + (", dry run" if self.dry_run else "")
            + "): "
            + self.status()
        ]
        if self.plan is not None:
            out.append(f"  plan: {self.plan.id}" + (f", approved by {self.approved_by}" if self.approved_by else ""))
        if self.take_over:
            out.append(f"  take-over: {self.take_over}")
        if self.promoted is not None:
            shown = ", ".join(self.promoted[:10]) + (", ..." if len(self.promoted) > 10 else "")
            out.append(f"  read-only mirror promoted: writes allowed on {len(self.promoted)} remote topic(s) {shown}")
        out += [f"  drain: {d}" for d in self.drain]
        if self.source_error:
            out.append(f"  source: {self.source_error} (offsets not replicated: unknown)")
        out.append(
            "  RPO: "
            + ("unknown" if nr is None else f"{nr:,} offsets not replicated")
            + f" over {len(self.partitions)} partitions"
        )
        if self.schemas_missing is not None or self.schemas_note:
            out.append(
                "  schemas: "
                + (
                    f"unknown ({self.schemas_note})"
                    if self.schemas_missing is None
                    else f"{self.schemas_missing} version(s) registered on {self.flow.split('->')[0]} not yet in "
                    f"{self.target}'s registry (records using them cannot be decoded there)"
                )
            )
        for p in self.partitions:
            behind = p.seconds_behind(self.at_ms)
            out.append(
                f"  {p.topic}[{p.partition}] -> {p.target_topic}[{p.partition}]: replicated up to {p.replicated_to}"
                + ("" if p.source_end is None else f", source end {p.source_end}, {p.not_replicated:,} not replicated")
                + ("" if behind is None else f", {behind:.0f} s behind")
                + f"; target end {p.target_end}"
            )
        if self.verify is not None:
            out += ["  verify: " + line for line in self.verify.lines()]
        if self.plan is not None:
            out += self._group_lines(self.plan)
            out.append(f"  applications: {read_committed_note(self.target)}")
        out += switch_lines(self.switch_steps, self.switch)
        return out

    def _group_lines(self, plan: FailoverPlan) -> list[str]:
        verb = "committed" if self.done else "to commit"
        out = [
            f"  groups: {sum(len(g.writes) for g in plan.groups)} offset(s) {verb} for {len(plan.commits())} group(s)"
        ]
        for g in plan.groups:
            if g.action == "left-alone":
                out.append(f"    {g.group}: left alone ({g.reason})")
                continue
            ahead = [x for x in g.partitions if x.action == "skip-ahead"]
            no_topic = [x for x in g.partitions if x.action == "skip-no-topic"]
            out.append(
                f"    {g.group}: "
                + (f"{len(g.writes)} partition(s) {verb}" if g.writes else "up to date")
                + "".join(f"; keeps {x.topic}[{x.partition}] at {x.target_offset} (ahead)" for x in ahead)
                + "".join(f"; {x.topic}[{x.partition}] not on the target (run `mirrorflow sync`)" for x in no_topic)
            )
            for x in g.partitions:
                if x.action in ("write", "skip-equal", "skip-ahead"):
                    resume = max(x.checkpoint_offset, x.target_offset or -1)
                    out.append(f"    {g.group} resumes {x.topic}[{x.partition}] at {resume}" + resume_note(x))
        out += [f"    {g}: CANNOT be read on the target: {e}" for g, e in sorted(plan.errors.items())]
        return out

    def figures(self) -> dict[str, Any]:
        """What a DAG's preflight and commit tasks put beside the plan in XCom."""
        return {"not_replicated": self.not_replicated, "client_switch_steps": self.switch_steps}

    def markdown(self) -> str:
        """The report for Airflow's Required Actions page: as printed, in a code block, headed by the plan id."""
        text = self.render()
        fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
        after = self.plan is not None and self.plan.moves_after
        what = ", groups left alone at the failover" if after else ""
        does = "" if after else " and stops the flow"
        takes = (
            " **It first takes the flow over** (confirmed with `take_over`): it takes the flow's lease from whoever "
            "holds it and fences the flow's copy transactions on the target, so that run can never write to it "
            f"again, and this deployment owns the flow from then on ({self.take_over or 'see the report'})."
            if self.plan is not None and self.plan.take_over
            else ""
        )
        apps = (
            f" **Application owners**: consumers of the replicated topics on `{self.target}` must read with "
            "`isolation.level=read_committed` (Java's default is `read_uncommitted`): the log also holds aborted "
            "copies, which a `read_uncommitted` consumer reads as duplicates."
        )
        head = (
            f"**Failover plan `{self.plan.id}`** of flow `{self.flow}` to cluster `{self.target}` ({self.mode}{what}). "
            f"Approve commits exactly these offsets on the target{does}; if what the plan was "
            "built from moves before the commit, nothing is committed and the run fails (trigger a new preflight)."
            + takes
            + apps
            if self.plan is not None
            else f"Failover of flow `{self.flow}` to cluster `{self.target}`"
        )
        return f"{head}{switch_markdown(self.switch_steps)}\n\n{fence}text\n{text}\n{fence}\n"

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "target": self.target,
            "mode": self.mode,
            "dry_run": self.dry_run,
            "at_ms": self.at_ms,
            "done": self.done,
            "note": self.note,
            "plan_id": self.plan.id if self.plan else None,
            "blocked": self.plan.blocked if self.plan else None,
            "approved_by": self.approved_by,
            "take_over": self.take_over,
            "promoted": self.promoted,
            "source_error": self.source_error,
            "drain": self.drain,
            "not_replicated": self.not_replicated,
            "partitions": [
                {**asdict(p), "not_replicated": p.not_replicated, "seconds_behind": p.seconds_behind(self.at_ms)}
                for p in self.partitions
            ],
            "groups": self.groups.to_dict() if self.groups else None,
            "verify": self.verify.to_dict() if self.verify else None,
            "applications": read_committed_note(self.target) if self.plan else None,
            "client_switch_steps": self.switch_steps,
            "client_switch": self.switch.to_dict() if self.switch else None,
        }
