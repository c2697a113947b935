"""One replicate run of a flow, in one place: its steps, whoever runs them.

A run is of one KIND (replication.run.run_kinds): `Once` (the flow's new records: `mirrorflow
replicate`, a scheduled DAG run), `Continuous` (every partition until a deadline), `Interval` (the
records of an Airflow backfill run's data interval) or `Backfill` (a historical range, ops.backfill);
the kind plans, the run does every other step the same way. Its steps:

1. `begin`: wait for both clusters (a broker restarting as the run starts is waited for, not
   failed), read the flow's state (paused or stopped: the run is skipped, with the reason), take
   the flow's lease (state.lease; a DAG's run of `airflow backfill create` waits for it on the
   triggerer, polling state.run_lease.blocking_holder);
2. `make_plan`: what to copy, as a plan (replication.plan.planner), handed on as `handoff()`: the plan's
   one encoding (replication.executors.handoff), with the run's id and the lease's owner -- never secrets;
3. `copy`: the plan's tasks in a copy mode (replication.executors.copy_modes: spark-submit, an in-process
   SparkSession, a Spark Connect server, threads);
4. `report`: the copy's results against the plan, to the flow's run log (replication.run.run_report);
5. `release`: the lease freed (a crashed run's lapses after lease.timeout.seconds).

The CLI runs every step in one process (`run`), and so does a replicate or backfill DAG whose copy
runs on a Spark Connect server (`spark.remote`: the copy happens on the server, so the DAG's one
task runs `begin`, then `carry_out`). With spark-submit the copy is a Spark application of its own
and the DAG runs plan, copy and report as three tasks, each maybe on its own machine: the plan task
hands `handoff()` on in XCom, and the copy and report tasks rebuild the run from it
(`from_handoff`); the results come back through the target (replication.executors.handoff), never through a
shared disk.

Nothing imports the Spark Connect client (PySpark, pandas, pyarrow: ~0.8 s of CPU) before the plan
has something to copy: a run with nothing new never pays it.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import MirrorflowError
from mirrorflow.replication.executors.copy_modes import executor
from mirrorflow.replication.executors.handoff import collect_results, new_run_id, write_plan_file
from mirrorflow.replication.plan.backfill_plan import BackfillPartition
from mirrorflow.replication.plan.planner import source_offsets, wait_for_clusters
from mirrorflow.replication.plan.run_options import RunOptions
from mirrorflow.replication.plan.run_plan import Plan
from mirrorflow.replication.run.run_kinds import Once, RunKind
from mirrorflow.replication.run.run_report import RunReport, build_report
from mirrorflow.replication.run.scratch import Scratch
from mirrorflow.state import run_log
from mirrorflow.state.flow_state import flow_state, read_controls
from mirrorflow.state.lease import FlowLease, local_owner
from mirrorflow.state.names import lease_topic
from mirrorflow.state.run_lease import take_lease
from mirrorflow.state.state_drift import STATE_TOPICS_CONTROL, check_state_topics
from mirrorflow.state.state_topics import ensure_state_topics
from mirrorflow.state.state_writer import prepare_acknowledged_writes


class RunSkipped(MirrorflowError):
    """The run copies nothing on purpose: the flow is paused or stopped (the message says so)."""


@dataclass
class ReplicationRun:
    """One run of `flow` (see the module doc); `owner`/`who`: its lease's (state.lease)."""

    cfg: Config
    flow: FlowConfig
    kind: RunKind = field(default_factory=Once)
    owner: str = ""
    who: str = ""
    options: RunOptions = field(default_factory=RunOptions)
    label: str = "cli"  # what the run's id starts with (a DAG run's id)
    log: Callable[[str], None] = lambda s: None
    started: float = field(default_factory=time.time)
    lease: FlowLease | None = None
    plan: Plan | None = None  # with the run's id once planned (`handoff` encodes it)
    parts: list[BackfillPartition] = field(default_factory=list)  # interval and backfill runs' view
    results: list[dict] = field(default_factory=list)  # the units' results, once copied in this process
    _plan_file: bool = False  # the plan file is in the scratch directory already
    _controls: dict[str, Any] | None = None  # the control records `begin` read (flow state, state topics)
    target_away: bool = False  # the copy gave up on the target: the run's last writes to it get one short try

    @classmethod
    def local(cls, cfg: Config, flow: FlowConfig, purpose: str, **kw: Any) -> ReplicationRun:
        """A run whose lease lives in this process (the CLI: state.lease.local_owner)."""
        owner, who = local_owner(purpose)
        return cls(cfg, flow, owner=owner, who=who, **kw)

    @classmethod
    def from_handoff(cls, cfg: Config, text: str) -> ReplicationRun:
        """The run a plan task handed on (a DAG's copy or report task, in another process)."""
        plan = Plan.decode(text)
        lease = plan.lease or {}
        run = cls(cfg, cfg.flow(plan.flow), owner=lease.get("owner", ""), who=lease.get("who", ""), plan=plan)
        run.started = float(plan.planned_at)
        return run

    @property
    def dry_run(self) -> bool:
        return self.options.dry_run

    # -- the steps ----------------------------------------------------------------------------------
    def begin(self, clients: FlowClients, cluster_wait_s: float | None = None) -> None:
        """Wait for the clusters (up to `cluster_wait_s`, default broker.outage.max.seconds: then
        BrokerUnavailableError), check the flow's state (RunSkipped), take the lease (LeaseError
        naming its holder). A dry backfill takes no lease."""
        self.kind.check(self.options)  # before the lease: an option this kind of run cannot honour
        leased = self.kind.leased(self.dry_run)
        if leased:  # the lease is its first write
            prepare_acknowledged_writes(clients, lease_topic(self.flow))
        wait_for_clusters(clients, cluster_wait_s)
        # one read of the control records: the flow's state, and the record of its state topics as created
        self._controls = read_controls(clients, ["flow-state", STATE_TOPICS_CONTROL])
        skip = flow_state(clients, self._controls).skip_reason(self.flow.name, "copy")
        if skip:
            raise RunSkipped(skip)
        if leased:
            self.lease = take_lease(clients, self.owner, self.who)

    def make_plan(self, clients: FlowClients) -> Plan:
        """Plan the run (a dry run's plan holds no tasks; its summary says what would be copied)."""
        checked = None
        if self.lease is not None:
            ensure_state_topics(clients)
            checked = check_state_topics(clients, self._controls)  # StateError: a state topic is not as created
        opts = self.options
        plan, self.parts = self.kind.plan(clients, opts, self.lease is not None)
        if self.dry_run:
            plan.narrowed([])
        if self.lease is not None:
            plan.lease = {"owner": self.owner, "who": self.who}
        if checked is not None and not self.dry_run:
            checked.record(clients)  # first run (or state topics from before the record): as created
        plan.run = new_run_id(self.label)
        self.plan = plan
        if opts.on_plan is not None:
            opts.on_plan(plan)
        return plan

    def plan_for_handoff(self, clients: FlowClients) -> Plan:
        """`make_plan` in a run whose other steps run elsewhere (a DAG's plan task): a plan that
        fails frees the lease `begin` took, as no later step of this run will."""
        try:
            plan = self.make_plan(clients)
        except BaseException:
            self.release_lease(clients)
            raise
        self._say_planned(plan)
        return plan

    def handoff(self) -> str:
        """The plan as the copy and report tasks get it (XCom; spark-submit's plan file)."""
        assert self.plan is not None, "make_plan first"
        return self.plan.encode()

    def plan_summary(self) -> dict[str, Any]:
        """What a person reads of the plan: the run's id, its units, the offsets they cover and (a
        dry run) the offsets it would copy."""
        assert self.plan is not None, "make_plan first"
        return {
            "run": self.plan.run,
            "units": len(self.plan.units),
            "offsets": sum(u.records for u in self.plan.units),
            "would_copy": sum(p["planned"] for p in self.plan.partitions),
        }

    def copy(self, clients: FlowClients, mode: str, master: str | None, scratch: Scratch) -> tuple[list[dict], float]:
        """Copy the plan's tasks in `mode`; the units' results and how long the copy took."""
        if self.plan is None or not self.plan.units:
            return [], 0.0
        t0 = time.time()
        self._plan_file = mode == "submit"  # spark-submit ships the plan file it gets from here
        self.results = executor(mode, master).copy(clients, self.plan, scratch.path, self.log)
        return self.results, time.time() - t0

    def report(self, clients: FlowClients, results: list[dict], spark_s: float = 0.0) -> RunReport:
        """The run's report: the plan's partitions, the units' results and the source ends now. Its
        summary goes to the flow's run log (state.run_log) for the status page and metrics."""
        partitions = self.plan.partitions if self.plan is not None else []
        keys = [(p["topic"], p["partition"]) for p in partitions]
        ends, unknown = None, None
        try:
            ends = source_offsets(clients, keys, OffsetSpec.latest()) if keys else {}
        except MirrorflowError as exc:  # the source away now: every lag is unknown, never 0
            unknown = f"the source's end could not be read: {exc}"
        rep = build_report(
            self.flow.name,
            bool(self.flow.exactly_once),
            partitions,
            results,
            ends,
            time.time() - self.started,
            spark_s,
            unknown,
        )
        self.target_away = self.target_away or gave_up_on(self.flow.target, results)
        run_log.append(clients, rep.run_record(int(time.time() * 1000)), once=self.target_away)
        return rep

    def collect_and_report(self, report: bool = True) -> tuple[RunReport | None, list[dict]]:
        """The DAG's report task: the results the copy wrote to the target (a planned unit without
        one: MirrorflowError naming it), reported unless `report` is false (a dry backfill); the
        lease released whatever happens."""
        with FlowClients(self.cfg, self.flow) as clients:
            try:
                results = collect_results(clients, self.plan) if self.plan is not None else []
                return (self.report(clients, results) if report else None), results
            finally:
                self.release_lease(clients)

    def release_lease(self, clients: FlowClients | None = None) -> None:
        """Free the run's lease (best effort: it lapses anyway); from any task of the run."""
        if self.lease is not None:
            self.lease.release(once=self.target_away)
            return
        if not self.owner or self.plan is None or not self.plan.lease:
            return
        if clients is None:
            with FlowClients(self.cfg, self.flow) as own:
                FlowLease(own, self.owner, self.who).release()
        else:
            FlowLease(clients, self.owner, self.who).release()

    # -- all of it, in this process -----------------------------------------------------------------
    def run(
        self, mode: str, master: str | None = None, directory: Path | None = None, scratch: Scratch | None = None
    ) -> RunReport:
        """Every step in this process (the CLI): begin, plan, copy, report, release."""
        scratch = scratch or Scratch.of(self.flow, directory)
        with FlowClients(self.cfg, self.flow) as clients:
            try:
                self.begin(clients)
            except RunSkipped as skipped:
                return RunReport(self.flow.name, bool(self.flow.exactly_once), skipped=str(skipped))
            return self.carry_out(clients, mode, master, scratch)

    def carry_out(self, clients: FlowClients, mode: str, master: str | None, scratch: Scratch) -> RunReport:
        """After `begin`: plan, copy, report and release, the lease renewed meanwhile (the CLI's
        replicate and backfill, and a DAG's one task when the copy runs on a Spark Connect server)."""
        try:
            with self.lease.renewed() if self.lease is not None else contextlib.nullcontext():
                plan = self.make_plan(clients)
                self._say_planned(plan)
                results, spark_s = self.copy(clients, mode, master, scratch)
                return self.finish(clients, scratch, results, spark_s)
        finally:
            self.release_lease(clients)

    def finish(self, clients: FlowClients, scratch: Scratch, results: list[dict], spark_s: float) -> RunReport:
        """Write the run's plan, results and report files (this process's copy, for inspection),
        report, and remove the files of a run that went well (unless kept)."""
        if self.plan is not None and not self._plan_file:  # spark-submit's copy wrote it already
            write_plan_file(self.plan, scratch.path)
        (scratch.path / "results.json").write_text(json.dumps({"flow": self.flow.name, "results": results}))
        rep = self.report(clients, results, spark_s)
        (scratch.path / "report.json").write_text(json.dumps(rep.to_dict()))
        scratch.done(rep.ok)
        return rep

    def _say_planned(self, plan: Plan) -> None:
        for line in self.kind.planned(plan, self.flow.name, self.dry_run):
            self.log(line)

    def idle_wait_s(self) -> float:
        """How long a DAG run with nothing to copy waits before it ends (a continuous one: so that
        Airflow does not start run after run; 0: at once)."""
        return self.kind.idle_wait_s(self.flow, self.plan, self.dry_run) if self.plan is not None else 0.0


def gave_up_on(cluster: str, results: list[dict]) -> bool:
    """Whether a unit failed because `cluster` did not answer within broker.outage.max.seconds: the run
    has spent its outage budget on it, and its summary and lease release try once instead of riding the
    same outage out again, one after the other."""
    mark = f"cluster {cluster!r}"
    return any(r.get("error_type") == "BrokerUnavailableError" and mark in (r.get("error") or "") for r in results)
