"""Failback of a failed-over flow X->Y: start its reverse flow Y->X from what X->Y wrote.

Every record on Y that X->Y did not write reaches X exactly once, whenever it was written (before
the failover committed, while its approval waited, after), and nothing X already had is copied back:

* **What X->Y wrote** comes from X->Y's own offset map (its runs: the target offsets of every
  record it copied), never from Y's end at some moment. Per partition of Y's topic the reverse
  flow's progress gets a ledger (`Progress.covered`) that holds exactly those offsets; every other
  offset from where the reverse flow stands (its own progress, else Y's log start) is left to copy.
  The offsets between X->Y's records (its transaction markers, aborted attempts, or records other
  producers wrote in between) are read once (read_committed): a stretch without a committed record
  joins the ledger, a stretch with records stays to be copied. The reverse flow copies holes in its
  ledger like backfill/reseed do (planner: [next, end) minus the ledger), so its first run copies
  every record written on Y outside X->Y, in Y's order. The report counts them per partition
  (`written on Y outside X->Y: N records, will be copied`).
* **IdentityReplicationPolicy** (topics keep their names both ways): the reverse flow's offset map
  also gets the inverse of X->Y's map over what X->Y wrote (Y offset -> the original X offset), so
  Y->X's checkpoints translate a group on Y exactly, also one still reading records that came from
  X, and `verify` of Y->X checks them.
* **DefaultReplicationPolicy**: X->Y wrote only into Y's `X.T`, which is never copied back (MM2's
  cycle rule); every record of Y's own topic `T` reaches X as `Y.T` (from where Y->X stands, else
  from Y's log start).

Records on X that are not on Y, two categories, both kept on X (never deleted) and never copied to
Y by any later step (a failback back records them as done for X->Y):

* **divergence**: written on X before the failover (record timestamp before the failover record's
  `at`, when its plan was made) and never copied by X->Y: lost from Y's point of view.
* **split brain**: accepted by X after the failover (timestamp at or after `at`), i.e. producers
  that still wrote to X while the applications moved to Y. MirrorMaker 2 users expect a
  failback not to merge these silently; the report names them (ranges, counts) so the operator
  decides (re-produce them on Y, or drop them).
Both: per partition, X offsets at or above X->Y's progress that its ledger does not cover, up to
X's end now.

X rebuilt empty (`failback --reseed`): nothing of X's is kept, so Y->X starts each partition of Y's
topics at Y's log start in a new map epoch (as `mirrorflow reseed` does) and copies all of it; its
own map then moves the groups back exactly. X->Y's state (of the old X) gets a new epoch without
progress, so the failback back starts it at the rebuilt X's log start. Refused when X's topics hold
records (they would be duplicated).

Going back (the symmetric step): `mirrorflow failover --flow Y->X --mode planned` moves the groups
to X and stops Y->X; `mirrorflow failback --flow Y->X` then restarts X->Y by the same rule the other
way: X->Y's ledger gets what Y->X wrote on X (the records copied and the seeded inverse runs) and
the divergence and split-brain ranges of the earlier failback, so it copies only what was written
on X outside Y->X since (the records producers wrote on X after the failover back).

The reverse flow must be in the config. With the identity policy the pair X->Y / Y->X is a cycle,
which `config validate` accepts only when one of the two is `standby: true` (stopped until a
failback starts it); only one of the two runs at a time because a failover stops the flow it moves
away from and a failback refuses to start the reverse flow of a flow that is not stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ConfigError, StateError
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.ops.dr.failback_plan import Inverse, Key, divergence, plan_reseed, plan_seeds
from mirrorflow.ops.dr.failback_report import FailbackReport, divergence_dict, divergence_from, seed_dict, seed_from
from mirrorflow.ops.dr.failover_record import offsets
from mirrorflow.ops.dr.seed_writer import write_reseed, write_seeds
from mirrorflow.reporting import iso
from mirrorflow.state.flow_state import flow_state, read_control, read_controls, set_flow_state, write_control
from mirrorflow.state.history import record_operation
from mirrorflow.state.lease import FlowLease, local_owner, whoami
from mirrorflow.state.offset_map import merge_ranges
from mirrorflow.state.state_topics import ensure_state_topics


def reverse_flow(cfg: Config, flow: FlowConfig) -> FlowConfig:
    """The flow target->source of `flow`; a ConfigError saying how to add it when there is none."""
    for f in cfg.flows.values():
        if f.source == flow.target and f.target == flow.source:
            return f
    raise ConfigError(
        [
            (
                f"flows.{flow.target}->{flow.source}",
                f"failback of {flow.name} starts the reverse flow {flow.target}->{flow.source}, which is not "
                f"in the config: add it with the same topics, groups and replication.policy.class as "
                f"{flow.name} and `standby: true` (it stays stopped until the failback starts it)",
            )
        ]
    )


def failback(
    cfg: Config,
    flow: FlowConfig,
    dry_run: bool = False,
    confirm: Callable[[FailbackReport], bool] = lambda r: True,
    reseed: bool = False,
) -> FailbackReport:
    """Preflight (divergence, split brain, what the reverse flow copies), confirm, start the reverse
    flow (module docstring); `reseed`: the source was rebuilt empty (`failback_plan.plan_reseed`). Raises a
    MirrorflowError for bad input (no failover yet, flow not stopped, source unreachable, --reseed
    into a source that holds records)."""
    rev = reverse_flow(cfg, flow)
    if _is_identity(flow) != _is_identity(rev):
        raise ConfigError(
            [
                (
                    f"flows.{rev.name}.replication.policy.class",
                    f"the reverse flow must use the same replication policy as {flow.name} (identity on one side "
                    "only would copy what the target got from the source back to it, under another name)",
                )
            ]
        )
    identity = _is_identity(flow)
    report = FailbackReport(flow.name, rev.name, identity, dry_run, reseed=reseed)
    with FlowClients(cfg, flow) as fc, FlowClients(cfg, rev) as rc:
        record = read_control(fc, "failover")
        if record is None:
            raise StateError(
                f"flow {flow.name} was never failed over (no failover record on cluster {flow.target!r}): "
                f"failback starts {rev.name} from that record; run `mirrorflow failover --flow {flow.name}` first"
            )
        report.failover_at = int(record.get("at", 0))
        previous = read_control(rc, "failback")
        if previous is not None and int(previous.get("failover_at", -1)) == report.failover_at:
            report.note = (
                f"nothing to do: {rev.name} was already started by a failback of {flow.name} at "
                f"{iso(int(previous.get('at', 0)))}"
            )
            report.divergence = [divergence_from(d) for d in previous.get("divergence", [])]
            report.split_brain = [divergence_from(d) for d in previous.get("split_brain", [])]
            report.seeds = [seed_from(s) for s in previous.get("seeds", [])]
            return report
        state = flow_state(fc)
        if state.state != "stopped":
            raise StateError(
                f"flow {flow.name} is {state.describe()}: a failback starts {rev.name}, and both running "
                f"would copy records back and forth; stop it first (`mirrorflow flow stop --flow {flow.name}`)"
            )
        inverse: dict[Key, Inverse] = {}
        if reseed:
            report.seeds = plan_reseed(rc, record)
        else:
            report.divergence, report.split_brain = divergence(fc, record, report.failover_at)
            report.seeds, inverse = plan_seeds(fc, rc, record, identity)
        if dry_run:
            report.note = "dry run: nothing changed"
            return report
        if not confirm(report):
            report.note = "not confirmed: nothing changed"
            return report
        ensure_state_topics(rc)  # the reverse flow may never have run
        lease = FlowLease(rc, *local_owner("mirrorflow failback")).acquire()
        try:
            if reseed:
                write_reseed(fc, rc, report.seeds, sorted(offsets(record, "replicated_to")))
            else:
                write_seeds(rc, report.seeds, inverse)
            set_flow_state(
                rc, "running", f"failback of {flow.name} (failed over at {iso(report.failover_at)})", whoami()
            )
            write_control(
                rc,
                "failback",
                {
                    "at": report.at_ms,
                    "of": flow.name,
                    "failover_at": report.failover_at,
                    "by": whoami(),
                    "reseed": reseed,
                    "divergence": [divergence_dict(d) for d in report.divergence],
                    "split_brain": [divergence_dict(d) for d in report.split_brain],
                    # what earlier failbacks kept on the same target stays there, apart (verify)
                    "kept_earlier": [] if reseed else _kept_ranges(previous),
                    "seeds": [seed_dict(s) for s in report.seeds],
                },
            )
            record_operation(
                rc,
                "failback",
                whoami(),
                summary=f"started by the failback of {flow.name}" + (" (reseed)" if reseed else ""),
                figures={
                    "partitions": len(report.seeds),
                    "to copy": report.to_copy,
                    "divergence": report.diverged,
                    "split brain": sum(d.records for d in report.split_brain),
                },
            )
        finally:
            lease.release()
    report.done = True
    return report


def _is_identity(flow: FlowConfig) -> bool:
    return FlowFilters.for_flow(flow).remote_topic("t") == "t"


def _kept_ranges(record: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every range a failback record says is kept on its reverse flow's target: its divergence and
    split brain and the earlier failbacks' (`kept_earlier`), per partition. A later failback's record
    carries them on (the latest record is the only one read), so `verify` of the reverse flow counts
    the records every failback kept as kept, not as `extra`, round trip after round trip."""
    out: dict[Key, list[tuple[int, int]]] = {}
    rec = record or {}
    for d in [*rec.get("kept_earlier", []), *rec.get("divergence", []), *rec.get("split_brain", [])]:
        out.setdefault((str(d["topic"]), int(d["partition"])), []).extend((int(a), int(b)) for a, b in d["ranges"])
    return [
        {"topic": t, "partition": p, "ranges": [list(r) for r in merge_ranges(ranges)]}
        for (t, p), ranges in sorted(out.items())
    ]


def resume_problem(cfg: Config, flow: FlowConfig, force: bool = False) -> str | None:
    """Why `mirrorflow flow resume` must not start `flow` (None: it may). With the identity policy
    both ways, the pair must never run at once, and a flow whose reverse flow was failed over since
    it last ran restarts through `mirrorflow failback` of that flow (which starts it at the ends
    recorded by that failover), never by a plain resume that would copy the reverse flow's records
    back. Any flow failed over and not restarted since goes on through a failback too: a resume would
    copy to the target what the source accepted after the failover (the split brain a failback keeps
    apart); `force` allows it (the applications never moved)."""
    rev = next((f for f in cfg.flows.values() if f.source == flow.target and f.target == flow.source), None)
    with FlowClients(cfg, flow) as fc:
        own = read_controls(fc, ["failover", "failback"])
    rev_failover = None
    if rev is not None:
        with FlowClients(cfg, rev) as rc:
            rev_state, rev_failover = flow_state(rc), read_control(rc, "failover")
        if _is_identity(flow) and _is_identity(rev):
            if rev_state.state != "stopped":
                return (
                    f"the reverse flow {rev.name} is {rev_state.describe()}: with IdentityReplicationPolicy both "
                    f"running would copy records back and forth (stop it first, or fail over with "
                    f"`mirrorflow failover --flow {rev.name}`)"
                )
            started = own.get("failback")
            if rev_failover is not None and (
                started is None or int(started.get("failover_at", -1)) != int(rev_failover.get("at", 0))
            ):
                return (
                    f"{rev.name} was failed over at {iso(int(rev_failover.get('at', 0)))} and {flow.name} was not "
                    f"restarted since: run `mirrorflow failback --flow {rev.name}` (it starts {flow.name} at the ends "
                    f"that failover recorded; a plain resume would copy {rev.name}'s records back)"
                )
    failed_over, restarted = own.get("failover"), own.get("failback")
    if (
        force
        or failed_over is None
        or (restarted is not None and int(restarted.get("at", 0)) >= int(failed_over.get("at", 0)))
    ):
        return None
    at = int(failed_over.get("at", 0))
    if rev is not None and rev_failover is not None and int(rev_failover.get("at", 0)) > at:
        step = (
            f"the failback of {rev.name}, failed over since (`mirrorflow failback --flow {rev.name}`: it starts "
            f"{flow.name} at the ends that failover recorded)"
        )
    else:
        step = (
            f"the failback (`mirrorflow failback --flow {flow.name}`, DAG mirrorflow_failback__{flow.id}), which "
            f"copies what was written on {flow.target!r} back"
        )
    return (
        f"it was failed over to {flow.target!r} at {iso(at)}: its next step is {step}; a resume would copy to "
        f"{flow.target!r} what {flow.source!r} accepted since the failover. If the applications never moved, "
        "resume with --force (the control DAG's Param force)"
    )
