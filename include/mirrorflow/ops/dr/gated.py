"""An operation a person approves, as one protocol: preflight -> plan (id, blocking reasons) -> confirm ->
commit exactly that plan -> the flow's client-switch steps.

Failover and failback are such operations. Each declares a `GatedOperation` (its `OPERATION`, in its own
module): how it plans from the form's values, how it commits a plan, how a plan is read back from XCom,
and whether a plan is followed by the client switch. What they share is here, once:

* `preflight`: the client-switch steps are resolved first (a step that cannot be imported fails before
  anything is drained or planned), then the plan; a plan that is not `plan_id` stops with PlanMovedError;
  a dry run says so and runs the steps as a dry run.
* `carry_out` (the CLI): the preflight, then the confirmation (the terminal's question), then the commit of
  that plan, then the steps. A plan that cannot be committed, or one not confirmed, changes nothing and
  says why in the report.
* The Airflow DAGs run `preflight` as their preflight task and `commit` as their commit task, with
  Airflow's Required Action between (mirrorflow_airflow.gated_tasks).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar

from mirrorflow.config import Config, FlowConfig
from mirrorflow.ops.dr.caller import CLI, Caller
from mirrorflow.ops.dr.client_switch import ClientSwitchError, SwitchReport, plan_switch, run_client_switch
from mirrorflow.ops.dr.failover_plan import PlanMovedError
from mirrorflow.params import Field, checked
from mirrorflow.state.lease import whoami


class GatedPlan(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def blocked(self) -> str | None: ...
    def to_dict(self) -> dict[str, Any]: ...


class GatedReport(Protocol):
    note: str | None
    done: bool
    approved_by: str | None
    switch_steps: list[str]
    switch: SwitchReport | None

    @property
    def plan(self) -> GatedPlan | None: ...
    def render(self) -> str: ...
    def markdown(self) -> str: ...
    def figures(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=GatedReport)


def settled(report: GatedReport) -> bool:
    """The operation is done: by this commit, or before it ("nothing to do": another door did it)."""
    return report.done or (report.note or "").startswith("nothing to do")


@dataclass(frozen=True)
class GatedOperation(Generic[R]):
    """What one approved operation declares; `name` is its client-switch direction and registry name."""

    name: str
    verb: str  # what its commit does to a plan, in the notes: "committed", "started"
    plan: Callable[[Config, FlowConfig, Mapping[str, Any], Caller], R]  # (cfg, flow, params, caller)
    commit: Callable[[Config, FlowConfig, Any, str, R | None, str], R]  # (cfg, flow, plan, approver, report, via)
    read_plan: Callable[[dict[str, Any]], Any]  # a plan back from its to_dict() (XCom)
    switches: Callable[[R], bool] = lambda report: True  # the client switch follows this report's plan
    fields: tuple[Field, ...] = ()  # its inputs (ops.dr.inputs): checked whichever door they came through

    def refuse_unknown(self, params: Mapping[str, Any], extra: tuple[str, ...] = ()) -> None:
        """TypeError naming the inputs this operation does not take (a caller's mistyped keyword)."""
        known = {f.name for f in self.fields} | set(extra)
        unknown = sorted(set(params) - known)
        if unknown:
            raise TypeError(
                f"{self.name}() got unexpected inputs {', '.join(unknown)} (it takes {', '.join(sorted(known))})"
            )

    def preflight(self, cfg: Config, flow: FlowConfig, params: Mapping[str, Any], caller: Caller = CLI) -> R:
        """The plan and its report (`report.plan` None: nothing to do, the report's note says why).
        ConfigError naming the input when one breaks its field's rule (mirrorflow.params.checked)."""
        params = {**params, **checked(self.fields, params, caller.via)}
        steps = plan_switch(flow, self.name)
        report = self.plan(cfg, flow, params, caller)
        if report.plan is None:
            return report
        if self.switches(report):
            report.switch_steps = steps
        if caller.plan_id and caller.plan_id != report.plan.id:
            raise PlanMovedError(
                f"{self.name} of {flow.name}: the plan is {report.plan.id} now, not {caller.plan_id}: the state moved "
                f"since that preflight (see this report); nothing {self.verb}"
            )
        if caller.dry_run:
            report.note = "dry run: nothing changed"
            if report.switch_steps:
                report.switch = self.switch_after(cfg, flow, report, caller)
        return report

    def carry_out(
        self,
        cfg: Config,
        flow: FlowConfig,
        params: Mapping[str, Any],
        caller: Caller = CLI,
        confirm: Callable[[R], bool] = lambda report: True,
    ) -> R:
        """Plan, confirm, commit that plan, switch the clients (the CLI). Never raises for a refusal the
        report explains; raises MirrorflowError for bad input, PlanMovedError when the state moved after
        the plan or the plan is not `caller.plan_id`."""
        report = self.preflight(cfg, flow, params, caller)
        if report.plan is None or caller.dry_run:
            return report
        if report.plan.blocked or not confirm(report):
            report.note = (
                f"plan {report.plan.id} cannot be {self.verb}: {report.plan.blocked}; nothing changed"
                if report.plan.blocked
                else "not confirmed: nothing changed"
            )
            return report
        report = self.commit(cfg, flow, report.plan, caller.by or whoami(), report, caller.via)
        if report.done and report.switch_steps:
            report.switch = self.switch_after(cfg, flow, report, replace(caller, by=report.approved_by))
        return report

    def switch_after(self, cfg: Config, flow: FlowConfig, report: R, caller: Caller) -> SwitchReport:
        """The client-switch steps after this operation's plan of `report`: what they did, a failed step
        included (its error in the SwitchReport: the operation stands)."""
        caller = replace(caller, plan_id=report.plan.id if report.plan else None)
        try:
            return run_client_switch(cfg, flow, self.name, caller)
        except ClientSwitchError as exc:
            return exc.report
