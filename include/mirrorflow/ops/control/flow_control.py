"""Pause, resume or stop a flow: the one core function behind `mirrorflow flow`, the control DAG and
the status page's buttons, so every door checks the same things and leaves the same history line.

A resume is refused where it would be unsafe (ops.dr.failback.resume_problem: a flow failed over and
not restarted since, unless forced; the identity policy both ways; a reverse flow failed over since
this one last ran); nothing is written then. A flow its failover stopped refuses a pause and a stop
too, whoever asks: a stop would replace the state that says it was failed over (every skipped run and
the status then name a resume instead of the failback), and a pause would let its checkpoints and
group sync run again over the groups the failover moved; the failback needs the flow as its failover
left it. A forced resume (the applications never moved) is recorded in the history as forced.
"""

from __future__ import annotations

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ConfigError, StateError
from mirrorflow.ops.control.inputs import ACTION
from mirrorflow.ops.dr.failback import resume_problem
from mirrorflow.reporting import iso
from mirrorflow.state.flow_state import (
    FlowState,
    flow_state,
    read_control,
    read_controls,
    set_flow_state,
    stored_state,
)

# action (ops.control.inputs.ACTION) -> the state it leaves the flow in
ACTIONS = dict(zip(ACTION.choices, ("paused", "running", "stopped"), strict=True))
VIA = ("cli", "airflow", "status-page")


def control_flow(
    cfg: Config, flow: FlowConfig, action: str, by: str, via: str, reason: str = "", force: bool = False
) -> FlowState:
    """Apply `action` (pause, resume, stop) to `flow` on its target, recorded in its operations
    history with `by` and `via`; returns the state that applies afterwards (the config may declare
    a stronger one). `force`: resume a flow its failover stopped (its applications never moved)."""
    problems = []
    if action not in ACTIONS:
        problems.append(("action", f"expected one of {', '.join(ACTIONS)}, got {action!r}"))
    if via not in VIA:
        problems.append(("via", f"expected one of {', '.join(VIA)}, got {via!r}"))
    if not by.strip():
        problems.append(("by", "who asks must be known (an Airflow user name, or user@host)"))
    if problems:
        raise ConfigError(problems)
    state = ACTIONS[action]
    with FlowClients(cfg, flow) as clients:
        controls = read_controls(clients, ["flow-state"])
        # the change applies only over the state it was decided on (state.flow_state.applies), read
        # before anything is checked: a failover that commits after this read fails the write, one that
        # committed before it is what the checks below see. (A resume checked first and read the state
        # after: a failover in between was overwritten by the resume, found by the model-based search.)
        stored, now = stored_state(clients, controls), flow_state(clients, controls)
        if state == "running":
            why = resume_problem(cfg, flow, force)
            if why is not None:
                raise StateError(f"cannot resume flow {flow.name}: {why}")
        summary = ""
        if now.failed_over and state != "running":
            harm = (
                "a pause would let its checkpoints and group sync run again over the groups its failover moved"
                if state == "paused"
                else "a stop would replace the record that its failover stopped it"
            )
            raise StateError(
                f"cannot {action} flow {flow.name}: it is {now.describe()}; {harm}, and its failback needs it "
                f"as the failover left it. Next step: {now.next_step(flow.name)}"
            )
        if now.failed_over and force:
            record = read_control(clients, "failover") or {}
            summary = (
                f"forced resume of a failed-over flow (failed over to {flow.target!r} at "
                f"{iso(int(record.get('at', now.at)))}, plan {record.get('plan', '?')}): its failback is not done"
            )
        return set_flow_state(clients, state, reason.strip(), by, via=via, summary=summary, expect=stored)
