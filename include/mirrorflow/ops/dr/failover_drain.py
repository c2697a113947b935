"""A planned failover's drain: the last topic sync, replicate runs until the lag is at most the
accepted one (bounded; else it stops, naming the partitions and their lag), the last checkpoint
pass, so that the groups resume exactly where they stopped on the source."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import MirrorflowError
from mirrorflow.groups.checkpoint import emit_checkpoints
from mirrorflow.metadata.sync import sync_flow
from mirrorflow.ops.dr.failover_report import FailoverReport
from mirrorflow.replication.run.runner import run_once


def drain_refusal(flow: str, runs: int, lags: Mapping[tuple[str, int], int], max_lag: int | None) -> str | None:
    """Why a drain left with `lags` (source partition -> offsets not copied) after `runs` replicate
    runs must not go on to the failover (None: it may): more than `max_lag` (None: 0) in all."""
    total, allowed = sum(lags.values()), max_lag or 0
    if total <= allowed:
        return None
    behind = sorted(((k, v) for k, v in lags.items() if v > 0), key=lambda kv: (-kv[1], kv[0]))
    return (
        f"planned failover of {flow}: the drain did not reach lag 0 in {runs} replicate run(s): lag {total:,} "
        + ("" if max_lag is None else f"(more than the accepted {max_lag:,}) ")
        + "on "
        + ", ".join(f"{t}[{p}] {v:,}" for (t, p), v in behind[:20])
        + (f" and {len(behind) - 20} more partition(s)" if len(behind) > 20 else "")
        + ". Nothing changed. Stop the source's producers and run the failover again, or accept the lag "
        f"(--max-lag {total} / Param max_lag): those offsets are not on the target after the failover."
    )


@dataclass(frozen=True)
class Drain:
    """How a planned failover drains: only the CLI and the tests set the first three (the DAG's form sets
    `max_lag`); a dry run drains nothing unless `enabled` says so."""

    copy_mode: str = "submit"  # the replicate runs' executor (replication.run.runner)
    max_runs: int = 5  # replicate runs at most before the lag must be at most `max_lag`
    enabled: bool | None = None  # None: drain unless a dry run
    max_lag: int | None = None  # offsets left that the failover accepts (None: 0)

    def runs_in(self, mode: str, dry_run: bool) -> bool:
        return mode == "planned" and (not dry_run if self.enabled is None else self.enabled)


PLANNED = Drain()  # the defaults: spark-submit runs, at most five, lag 0, unless a dry run


def drain_flow(cfg: Config, flow: FlowConfig, report: FailoverReport, drain: Drain, log: Callable[[str], None]) -> None:
    """Planned mode: last topic sync, replicate until the lag is at most `drain.max_lag` (0; bounded
    runs, else stop), last checkpoint."""
    copy_mode, max_runs, max_lag = drain.copy_mode, drain.max_runs, drain.max_lag
    sync = sync_flow(cfg, flow, ["topics"])
    report.drain.append(f"topic sync: {len(sync.changes)} change(s)")
    lags: dict[tuple[str, int], int] = {}
    runs = 0
    for runs in range(1, max_runs + 1):
        rep = run_once(cfg, flow, mode=copy_mode, log=log)
        if rep.skipped:  # a paused or stopped flow copies nothing: its lag 0 would be a made-up one
            raise MirrorflowError(
                f"planned failover of {flow.name}: nothing changed, its drain cannot copy ({rep.skipped}); then fail "
                "over again, or fail over unplanned (what is not copied stays on the source: the report's RPO)"
            )
        if not rep.ok:
            raise MirrorflowError(
                f"planned failover of {flow.name}: replication failed, nothing changed:\n{rep.render()}"
            )
        if rep.lag is None:  # a drain is proven by the lag: an unknown one proves nothing
            raise MirrorflowError(
                f"planned failover of {flow.name}: the lag after replicate run {runs} is unknown "
                f"({rep.ends_unknown}); nothing changed"
            )
        report.drain.append(f"replicate run {runs}: {rep.records:,} records, lag {rep.lag:,}")
        lags = {(p.topic, p.partition): p.lag or 0 for p in rep.partitions}
        if sum(lags.values()) <= (max_lag or 0):
            break
    refusal = drain_refusal(flow.name, runs, lags, max_lag)
    if refusal:
        raise MirrorflowError(refusal)
    if sum(lags.values()):
        report.drain.append(f"lag {sum(lags.values()):,} accepted (max lag {max_lag:,})")
    run = emit_checkpoints(cfg, flow)
    if run.errors:
        raise MirrorflowError(f"planned failover of {flow.name}: checkpoints failed for {sorted(run.errors)}")
    report.drain.append(f"checkpoints: {len(run.emitted)} emitted for {len(run.groups)} group(s)")
