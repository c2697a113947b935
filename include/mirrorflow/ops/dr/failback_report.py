"""What a failback found and did (`FailbackReport`, a `reporting.Report`): its plan (failback_plan:
the records on the failed-over flow's source that are not on its target, where the reverse flow
starts in each partition, what the target no longer holds), whether it started and who approved it;
as text, as JSON and as the markdown of Airflow's approval step."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from mirrorflow.ops.dr.client_switch import SwitchReport, switch_lines, switch_markdown
from mirrorflow.ops.dr.failback_plan import (
    Divergence,
    FailbackPlan,
    Loss,
    Seed,
    divergence_dict,
    loss_dict,
    seed_dict,
)
from mirrorflow.reporting import Report, iso


@dataclass
class FailbackReport(Report):
    flow: str  # the failed-over flow X->Y
    reverse: str  # Y->X, started by the failback
    identity: bool
    dry_run: bool
    failover_at: int = 0
    at_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    divergence: list[Divergence] = field(default_factory=list)
    split_brain: list[Divergence] = field(default_factory=list)
    seeds: list[Seed] = field(default_factory=list)
    done: bool = False
    note: str | None = None
    reseed: bool = False  # the source was rebuilt: the reverse flow copies all of the target's topics
    losses: list[Loss] = field(default_factory=list)  # what the target no longer holds (accepted, or blocking)
    plan: FailbackPlan | None = None
    approved_by: str | None = None
    split_since_plan: int = 0  # split-brain records the source accepted between the plan and the start
    split_by: str = "offsets"  # how the split brain was told from the divergence
    read_only: list[str] | None = None  # mirror.read.only: the remote topics the start made read-only (new DENYs)
    switch_steps: list[str] = field(default_factory=list)  # the client-switch steps approved with the plan
    switch: SwitchReport | None = None  # what they did after the start (a dry run: what they would do)

    @property
    def diverged(self) -> int:
        return sum(d.records for d in self.divergence)

    @property
    def split(self) -> int:
        return sum(d.records for d in self.split_brain)

    @property
    def to_copy(self) -> int:
        return sum(s.to_copy for s in self.seeds)

    def show(self, plan: FailbackPlan) -> None:
        """Take the plan's findings as this report's."""
        self.plan = plan
        self.divergence, self.split_brain = list(plan.divergence), list(plan.split_brain)
        self.seeds, self.losses = list(plan.seeds), list(plan.losses)
        self.split_by = plan.split_by

    def status(self) -> str:
        if self.done:
            if self.switch is not None and not self.switch.ok:
                failed = next((s.name for s in self.switch.steps if not s.ok), "?")
                return f"STARTED; the client switch FAILED at step {failed!r} (see below)"
            return "STARTED"
        if self.note:
            return self.note
        if self.plan is not None and self.plan.blocked:
            return f"plan {self.plan.id} CANNOT be started: {self.plan.blocked}"
        return f"plan {self.plan.id}, nothing started yet" if self.plan else "preflight"

    def lines(self) -> list[str]:
        return self._findings() + switch_lines(self.switch_steps, self.switch)

    def _findings(self) -> list[str]:
        head = f"failback of flow {self.flow}: reverse flow {self.reverse}" + (" (dry run)" if self.dry_run else "")
        src, tgt = self.flow.split("->", 1) if "->" in self.flow else (self.flow, self.flow)
        out = [f"{head}: {self.status()}"]
        if self.plan is not None:
            out.append(f"  plan: {self.plan.id}" + (f", approved by {self.approved_by}" if self.approved_by else ""))
        if self.failover_at:
            out.append(f"  failed over at {iso(self.failover_at)}")
        if self.read_only is not None:
            out.append(f"  made read-only (mirror.read.only): {len(self.read_only)} remote topic(s) of {self.reverse}")
        how = (
            "IdentityReplicationPolicy: the reverse flow copies every record on the target that the flow "
            "did not write (its offset map), and maps the others back"
            if self.identity
            else "the reverse flow copies the target's own topics under MM2's remote names"
        )
        if self.reseed:
            how = (
                f"--reseed: {src} was rebuilt; {self.reverse} copies every record of {tgt}'s topics from their "
                f"log start in a new map epoch, and {self.flow}'s state (of the old {src}) starts a new epoch"
            )
        out.append(f"  {how}")
        if self.reseed:
            for s in self.seeds:
                a, b = s.to_copy_ranges[0] if s.to_copy_ranges else (s.start, s.start)
                out.append(
                    f"    {s.topic}[{s.partition}]: copies offsets {a}..{b} ({b - a:,} offsets) into an empty {src}"
                )
            return out
        out += self._seed_lines(src, tgt)
        if self.losses:
            accepted = self.plan is not None and self.plan.accept_loss
            out.append(
                f"  lost on {tgt}: {len(self.losses)} partition(s) no longer hold what {self.reverse} would copy, "
                f"or no longer tell it from {self.flow}'s records: "
                + ("ACCEPTED (--accept-loss)" if accepted else "STOPPED until accepted (--accept-loss)")
            )
            out += [f"    {x.line()}" for x in self.losses]
        out += self._kept_lines(src, tgt)
        if self.split_by != "offsets":
            out.append(
                f"  ({src} did not answer when the failover plan was made: the split brain was told from the "
                "divergence by the records' timestamps, which a producer stamping event time can put on the wrong side)"
            )
        return out

    def _seed_lines(self, src: str, tgt: str) -> list[str]:
        """Per partition of the reverse flow's source: what it copies and from where."""
        out = [f"  written on {tgt} outside {self.flow}: {self.to_copy:,} records, will be copied to {src}"]
        for s in self.seeds:
            if s.absent:
                out.append(
                    f"    {s.topic}[{s.partition}]: not on {tgt} yet; {src}'s records there are kept, "
                    f"{self.reverse} copies {tgt}'s partition from its beginning after them once it exists"
                )
                continue
            where = ", ".join(f"{a}..{b}" for a, b in s.to_copy_ranges) or "-"
            line = (
                f"    {s.topic}[{s.partition}]: {s.to_copy:,} records (offsets {where}); {self.reverse} copies "
                f"from offset {s.start}"
            )
            if self.identity:
                line += f", {s.mapped:,} records of {self.flow} mapped back"
            if s.pruned_below >= 0:
                line += (
                    f" (offset map pruned: offsets below {s.pruned_below} taken as {self.flow}'s, mapped back as "
                    "its map kept them: a group there may re-read, never skip)"
                )
            out.append(line)
        return out

    def _kept_lines(self, src: str, tgt: str) -> list[str]:
        """The divergence and the split brain: records kept on the old source, never copied."""
        out: list[str] = []
        for name, total, parts, what in (
            (
                "divergence",
                self.diverged,
                self.divergence,
                f"written on {src} before the failover, not on {tgt}",
            ),
            ("split brain", self.split, self.split_brain, f"accepted by {src} after the failover"),
        ):
            keep = f" (kept on {src}, not deleted; not copied to {tgt})" if total else ""
            since = (
                f", {self.split_since_plan:,} of them since the plan"
                if name == "split brain" and (self.split_since_plan)
                else ""
            )
            out.append(f"  {name}: {total:,} records {what}{keep}{since}")
            for d in parts:
                ranges = ", ".join(f"{a}..{b}" for a, b in d.ranges)
                out.append(f"    {d.topic}[{d.partition}]: {d.records:,} records at offsets {ranges}")
        return out

    def figures(self) -> dict[str, Any]:
        """What a DAG's preflight and start tasks put beside the plan in XCom."""
        return {
            "to_copy": self.to_copy,
            "diverged": self.diverged,
            "split": self.split,
            "client_switch_steps": self.switch_steps,
        }

    def markdown(self) -> str:
        """The report for Airflow's Required Actions page: as printed, in a code block, headed by the plan id."""
        text = self.render()
        fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
        if self.plan is None:
            return f"Failback of flow `{self.flow}`\n\n{fence}text\n{text}\n{fence}\n"
        head = (
            f"**Failback plan `{self.plan.id}`** of flow `{self.flow}`: starts `{self.reverse}`. Approve writes "
            f"exactly this plan to `{self.reverse}`'s state and starts it; if what the plan was built from moves "
            "before the start, nothing is written and the run fails (trigger a new preflight)."
        )
        return f"{head}{switch_markdown(self.switch_steps)}\n\n{fence}text\n{text}\n{fence}\n"

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "reverse": self.reverse,
            "identity": self.identity,
            "dry_run": self.dry_run,
            "failover_at": self.failover_at,
            "at_ms": self.at_ms,
            "done": self.done,
            "note": self.note,
            "reseed": self.reseed,
            "plan_id": self.plan.id if self.plan else None,
            "blocked": self.plan.blocked if self.plan else None,
            "approved_by": self.approved_by,
            "accept_loss": bool(self.plan and self.plan.accept_loss),
            "diverged": self.diverged,
            "split": self.split,
            "split_by": self.split_by,
            "to_copy": self.to_copy,
            "divergence": [divergence_dict(d) for d in self.divergence],
            "split_brain": [divergence_dict(d) for d in self.split_brain],
            "seeds": [seed_dict(s) for s in self.seeds],
            "losses": [loss_dict(x) for x in self.losses],
            "read_only": self.read_only,
            "client_switch_steps": self.switch_steps,
            "client_switch": self.switch.to_dict() if self.switch else None,
        }
