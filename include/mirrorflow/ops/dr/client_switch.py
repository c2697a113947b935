"""The client switch: the runbook's step that moves the applications, run as a step of the failover
and the failback (issue 40 item 3).

A flow names its steps in the config, in order, as Airflow names a `python_callable` and its
`op_kwargs` (config.properties `client.switch.failover`, `client.switch.failback`):

```yaml
flows:
  A->B:
    client.switch.failover:
      - name: bootstrap-alias
        callable: mirrorflow.ops.dr.client_switch:bootstrap_file
        args: {path: /etc/kafka/orders.properties, key: bootstrap.servers}
      - mypkg.dns:repoint          # a path alone: the step is named `repoint`, no args
```

Each step is a callable `fn(ctx: SwitchContext, **args) -> str | None`: `ctx` says which operation
of which flow runs it, the cluster the clients move to (`ctx.cluster`, its configured
`ctx.bootstrap_servers`) and whether it is a dry run (`ctx.dry_run`: check what it would do and
say so, change nothing); it returns one line saying what it did (or would do), and raises to fail.

* **approved**: the steps are part of what the operator approves: the failover's (failback's)
  report, the CLI's confirmation and the DAG's approval page list them (`plan_switch`); every
  callable is imported before anything is committed (a step that cannot be imported is a
  ConfigError naming it, nothing changed).
* **run after the commit**, in order (`run_client_switch`): the failover's commit (its applications
  move to the target), the failback's start (clients move to the old source, the reverse flow's
  target). The CLI runs them in the same process; the DAGs run one task per step after the commit
  (the `client_switch` task group).
* **timed and recorded**: each step's seconds and its line go into the report and, one
  `client-switch` record per step, into the operations history of the flow the operation recorded
  itself in (the failover: the flow; the failback: the reverse flow).
* **a failing step** stops the steps there: one `ClientSwitchError` naming the step, what it
  raised, that the operation stands (committed, nothing undone), the steps not run and how to run
  them again (`mirrorflow client-switch --flow F --after failover --from STEP`, or clear the step's
  task in Airflow); recorded in the history as failed.
* **rehearsed**: the drill runs the failover's steps as a dry run and counts their time in its RTO.

`bootstrap_file` is the built-in example: it flips a bootstrap alias in a file the applications read.
"""

from __future__ import annotations

import importlib
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.config.secrets import resolve_env
from mirrorflow.errors import ConfigError, MirrorflowError, StateError
from mirrorflow.ops.dr.caller import CLI, Caller
from mirrorflow.process import background
from mirrorflow.reporting import Report
from mirrorflow.state.history import record_operation
from mirrorflow.state.lease import whoami

PROPERTIES = {"failover": "client.switch.failover", "failback": "client.switch.failback"}  # operation -> property


def property_name(operation: str) -> str:
    """The flow property that lists the steps of `operation`."""
    if operation not in PROPERTIES:
        raise ConfigError([("--after", f"expected failover or failback, got {operation!r}")])
    return PROPERTIES[operation]


def switch_steps(flow: FlowConfig, operation: str) -> list[dict[str, Any]]:
    """The steps `flow` runs after `operation`: [{"name", "callable", "args"}] (config.properties)."""
    return list(flow.props.get(property_name(operation)) or [])


def destination(flow: FlowConfig, operation: str) -> str:
    """The cluster the clients move to: the failover's target, the failback's reverse flow's target
    (the failed-over flow's source, the mirror from then on)."""
    return flow.target if operation == "failover" else flow.source


@dataclass(frozen=True)
class SwitchContext:
    """What a step is told. Never holds secrets: `bootstrap_servers` is the cluster's address only."""

    flow: str  # the flow whose operation runs the step (the failed-over flow, also for its failback)
    operation: str  # failover | failback
    source: str
    target: str
    cluster: str  # the cluster alias the clients move to
    bootstrap_servers: str  # that cluster's bootstrap.servers as configured
    step: str  # this step's name
    dry_run: bool  # check and say what would be done; change nothing
    by: str  # who approved the operation
    plan_id: str | None = None  # the operation's plan (None: run again, or a drill)
    log: Callable[[str], None] = lambda s: None


@dataclass
class StepResult:
    name: str
    callable: str
    seconds: float
    ok: bool
    said: str = ""  # the step's own line: what it did (or would do)
    error: str | None = None


@dataclass
class SwitchReport(Report):
    """The client-switch steps of one operation: each with its time and its line, the ones not run."""

    flow: str
    operation: str
    cluster: str
    dry_run: bool
    steps: list[StepResult] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)  # after a failed step
    error: str | None = None  # the ClientSwitchError's message

    DERIVED = ("ok", "seconds")

    @property
    def ok(self) -> bool:
        return self.error is None and all(s.ok for s in self.steps)

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    def lines(self) -> list[str]:
        head = (
            f"client switch after the {self.operation} of {self.flow} (clients to {self.cluster!r}"
            + (", dry run" if self.dry_run else "")
            + f"): {len(self.steps)} step(s) in {self.seconds:.2f} s"
            + ("" if self.ok else ", FAILED")
        )
        out = [head]
        for s in self.steps:
            what = s.said if s.ok else f"FAILED: {s.error}"
            out.append(f"  {s.name} ({s.callable}) {s.seconds:.2f} s: {what}")
        out += [f"  {n}: not run" for n in self.not_run]
        if self.error and all(s.ok for s in self.steps):  # refused before any step ran (an import)
            out.append(f"  {self.error}")
        return out


def switch_lines(steps: list[str], switch: SwitchReport | None) -> list[str]:
    """A failover's or failback's client-switch steps in its report: as approved, then what they did."""
    if switch is not None:
        return ["  " + line for line in switch.lines()]
    if not steps:
        return []
    return [f"  client switch after the commit ({len(steps)} step(s), in order):"] + [f"    {s}" for s in steps]


def switch_markdown(steps: list[str]) -> str:
    """The approval page's sentence about the client-switch steps (empty: none)."""
    if not steps:
        return ""
    return (
        f" **Approve also runs {len(steps)} client-switch step(s)** after the commit, in order (each timed and "
        "recorded in the operations history; a failing step fails its task and leaves the commit standing): "
        + "; ".join(f"`{s}`" for s in steps)
        + "."
    )


class ClientSwitchError(MirrorflowError):
    """A client-switch step failed; `report` holds every step's result. The operation stands."""

    def __init__(self, message: str, report: SwitchReport):
        super().__init__(message)
        self.report = report


def describe(step: dict[str, Any]) -> str:
    """`bootstrap-alias: mirrorflow.ops.dr.client_switch:bootstrap_file(path='/etc/app.properties')`"""
    args = ", ".join(f"{k}={v!r}" for k, v in step["args"].items())
    return f"{step['name']}: {step['callable']}({args})"


def resolve(flow: FlowConfig, step: dict[str, Any], operation: str) -> Callable[..., Any]:
    """The step's callable, imported; ConfigError naming the property and the step otherwise."""
    path = str(step["callable"])
    module, _, attr = path.rpartition(":") if ":" in path else path.rpartition(".")
    key = f"flows.{flow.name}.{property_name(operation)}"
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError([(key, f"step {step['name']!r}: {path!r} cannot be imported: {exc}")]) from None
    if not callable(found):
        raise ConfigError([(key, f"step {step['name']!r}: {path!r} is a {type(found).__name__}, not a callable")])
    return found


def plan_switch(flow: FlowConfig, operation: str) -> list[str]:
    """The steps as the approval shows them, each callable imported first (ConfigError: nothing changed)."""
    steps = switch_steps(flow, operation)
    for s in steps:
        resolve(flow, s, operation)
    return [describe(s) for s in steps]


def history_flow(cfg: Config, flow: FlowConfig, operation: str) -> FlowConfig:
    """The flow whose operations history holds the operation (the failback: its reverse flow's)."""
    if operation == "failback":
        reverse = f"{flow.target}->{flow.source}"
        if reverse in cfg.flows:
            return cfg.flows[reverse]
    return flow


def run_client_switch(
    cfg: Config,
    flow: FlowConfig,
    operation: str,
    caller: Caller = CLI,
    *,
    start: str | None = None,
    only: str | None = None,
) -> SwitchReport:
    """Run `flow`'s client-switch steps of `operation` in order (module docstring): all of them, from
    `start` on, or the one step `only` (a DAG's task), as `caller` asked (a dry run changes nothing).
    Each step is timed and, unless a dry run, recorded in the operations history. ClientSwitchError at
    the first step that fails (recorded; the later steps are not run); ConfigError for a step that is
    not in the config or cannot be imported (nothing run)."""
    dry_run, via, plan_id, log = caller.dry_run, caller.via, caller.plan_id, caller.log
    names = [s["name"] for s in switch_steps(flow, operation)]
    chosen = _chosen(flow, operation, start, only)
    callables = [resolve(flow, s, operation) for s in chosen]  # all imported before the first runs
    cluster = destination(flow, operation)
    report = SwitchReport(flow.name, operation, cluster, dry_run)
    by = caller.by or whoami()
    servers = cfg.cluster(cluster).bootstrap_servers
    hflow = history_flow(cfg, flow, operation)
    with FlowClients(cfg, hflow) if not dry_run else _nothing() as clients:
        for i, (step, fn) in enumerate(zip(chosen, callables, strict=True)):
            ctx = SwitchContext(
                flow.name, operation, flow.source, flow.target, cluster, servers, step["name"], dry_run, by, plan_id
            )
            ctx = replace(ctx, log=log)
            log(f"client switch {step['name']}" + (" (dry run)" if dry_run else ""))
            result = _run_step(flow, operation, step, fn, ctx)
            report.steps.append(result)
            if clients is not None:
                _record(clients, report, result, by, via, plan_id)
            if not result.ok:
                after = names[names.index(step["name"]) + 1 :]
                report.not_run = [s["name"] for s in chosen[i + 1 :]]
                report.error = _failure(flow, operation, result, after, plan_id, dry_run)
                raise ClientSwitchError(report.error, report)
    return report


def _chosen(flow: FlowConfig, operation: str, start: str | None, only: str | None) -> list[dict[str, Any]]:
    """The steps to run: all, from `start` on, or the one step `only`; ConfigError naming one not there."""
    steps = switch_steps(flow, operation)
    names = [s["name"] for s in steps]
    for wanted, what in ((start, "--from"), (only, "step")):
        if wanted is not None and wanted not in names:
            raise ConfigError(
                [
                    (
                        what,
                        f"flow {flow.name} has no client-switch step {wanted!r} after the {operation} "
                        f"(its steps: {', '.join(names) or 'none'})",
                    )
                ]
            )
    first = names.index(only if only is not None else start) if (only or start) else 0
    return steps[first : first + 1] if only is not None else steps[first:]


def _run_step(
    flow: FlowConfig, operation: str, step: dict[str, Any], fn: Callable[..., Any], ctx: SwitchContext
) -> StepResult:
    """One step run within its timeout, timed: any failure of a user's step is its result, named."""
    began = time.monotonic()
    try:
        said = within(step["timeout_seconds"], fn, ctx, **step_args(flow, step, operation))
        return StepResult(step["name"], step["callable"], time.monotonic() - began, True, str(said or "done"))
    except Exception as exc:  # noqa: BLE001 - a user's step: any failure is reported, named
        error = f"{type(exc).__name__}: {exc}" if not isinstance(exc, MirrorflowError) else str(exc)
        return StepResult(step["name"], step["callable"], time.monotonic() - began, False, error=error)


def step_args(flow: FlowConfig, step: dict[str, Any], operation: str) -> dict[str, Any]:
    """The step's keyword arguments with `${env:VAR}` references resolved (a token, a password): the
    values reach the callable only, never the config's text, the approval, the report or the history,
    which show the references (`describe`)."""
    key = f"flows.{flow.name}.{property_name(operation)}"
    return {
        k: resolve_env(v, f"{key} ({step['name']}.args.{k})") if isinstance(v, str) else v
        for k, v in step["args"].items()
    }


def within(limit_s: float, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)`, its result or its exception; StepTimeoutError when it takes longer than
    `limit_s` (the call may still be running then, which the error says; the operation it follows
    stands either way)."""
    wait = background(lambda: fn(*args, **kwargs), "mirrorflow-client-switch")
    try:
        return wait(limit_s)
    except TimeoutError:
        raise StepTimeoutError(
            f"it did not finish within {limit_s:g} s (timeout_seconds); it may still be running: check what it "
            "changes before running it again"
        ) from None


class StepTimeoutError(MirrorflowError):
    """A client-switch step that took longer than its timeout_seconds."""


class _nothing:
    """No clients (a dry run writes no history)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _failure(
    flow: FlowConfig, operation: str, result: StepResult, after: list[str], plan_id: str | None, dry_run: bool
) -> str:
    head = (
        f"{operation} of {flow.name}: client-switch step {result.name!r} ({result.callable}) failed"
        + (" in its dry run" if dry_run else "")
        + f": {result.error}"
    )
    if dry_run:
        return head
    stands = "committed" if operation == "failover" else "the reverse flow started"
    return (
        head
        + f". The {operation} stands ({stands}"
        + (f", plan {plan_id}" if plan_id else "")
        + "; nothing undone)"
        + (f"; steps not run: {', '.join(after)}" if after else "")
        + f". Fix the cause, then run the steps from {result.name!r} again: `mirrorflow client-switch --flow "
        f"{flow.name} --after {operation} --from {result.name}` (Airflow: clear the task "
        f"client_switch.{result.name} of this run)"
    )


def _record(
    clients: FlowClients, report: SwitchReport, result: StepResult, by: str, via: str, plan_id: str | None
) -> None:
    what = result.said if result.ok else f"FAILED: {result.error}"
    try:
        record_operation(
            clients,
            "client-switch",
            by,
            via=via,
            summary=f"step {result.name} ({result.callable}) after the {report.operation} of {report.flow}"
            + (f", plan {plan_id}" if plan_id else "")
            + f", clients to {report.cluster!r}: {what}",
            figures={"step": result.name, "ok": result.ok, "seconds": round(result.seconds, 3)},
        )
    except StateError as exc:
        ran = "ran" if result.ok else "failed"
        raise StateError(f"client-switch step {result.name!r} of {report.flow} {ran}, but {exc}") from None


def check_switch_allowed(cfg: Config, flow: FlowConfig, operation: str) -> str | None:
    """Why the steps of `operation` must not run now (None: they may): the failover's steps move the
    applications to the target, so only once the flow is failed over; the failback's once it started."""
    from mirrorflow.ops.dr.failover_record import failed_over
    from mirrorflow.state.flow_state import read_control

    if operation == "failover":
        with FlowClients(cfg, flow) as clients:
            if failed_over(clients) is None:
                return f"flow {flow.name} is not failed over: its applications stay on {flow.source!r}"
        return None
    reverse = history_flow(cfg, flow, operation)
    with FlowClients(cfg, reverse) as rc:
        record = read_control(rc, "failback")
    if reverse is flow or record is None or record.get("of") != flow.name:
        return f"flow {flow.name} was not failed back (no failback of it started {flow.target}->{flow.source})"
    return None


# The built-in example step -------------------------------------------------------------------


def bootstrap_file(
    ctx: SwitchContext,
    path: str,
    key: str = "bootstrap.servers",
    value: str | None = None,
    values: dict[str, str] | None = None,
) -> str:
    """Flip a bootstrap alias in a file the applications read: the line `key=...` of the properties
    (or .env) file at `path` is set to the servers of the cluster the clients move to -- `value`, else
    `values[<cluster alias>]` (e.g. {A: kafka-a.prod:9092, B: kafka-b.prod:9092}), else that cluster's
    `bootstrap.servers` from this config. Every other line is kept; the file is replaced atomically
    (written beside it, then renamed), its mode kept. The file must exist (it is what the
    applications read). A dry run checks it can be rewritten and says what it would set."""
    target = Path(path)
    new = value or (values or {}).get(ctx.cluster) or ctx.bootstrap_servers
    if not new:
        raise MirrorflowError(f"no servers for cluster {ctx.cluster!r}: give value or values[{ctx.cluster}]")
    try:
        text = target.read_text()
    except OSError as exc:
        raise MirrorflowError(f"cannot read {path}: {exc.strerror or exc}") from None
    lines = text.splitlines(keepends=True)
    old = None
    for i, line in enumerate(lines):
        name, sep, rest = line.partition("=")
        if sep and name.strip() == key and not line.lstrip().startswith(("#", "!")):
            old = rest.strip()
            lines[i] = f"{name}{sep}{new}\n" if not name.endswith(" ") else f"{name}{sep} {new}\n"
            break
    else:
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        lines.append(f"{key}={new}\n")
    if old == new:
        return f"{key} in {path} is {new} already"
    writable = os.access(target.parent, os.W_OK) and os.access(target, os.W_OK)
    if ctx.dry_run:
        if not writable:
            raise MirrorflowError(f"{path} cannot be rewritten (no write permission on the file or its directory)")
        return f"would set {key}={new} in {path} (now {old if old is not None else 'unset'})"
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as out:
            out.write("".join(lines))
        os.chmod(tmp, target.stat().st_mode & 0o7777)
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise MirrorflowError(f"cannot rewrite {path}: {exc.strerror or exc}") from None
    return f"set {key}={new} in {path} (was {old if old is not None else 'unset'})"
