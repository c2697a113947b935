"""One schema replication pass of a flow: the CLI (`mirrorflow schemas`), the schemas DAG and the sync DAG's
`schemas` task call `replicate_schemas`.

Read both registries (the source's and the target's `schema.registry.url`), plan (`schemas.plan`), check the
target for conflicts (the writer's own checks: ids already taken), and only when there is none write with
the target's writer: Apicurio's native import when the target's URL is Apicurio's Confluent API
(`.../apis/ccompat/v7`), else Confluent's IMPORT mode. Any conflict, unreachable registry or refused
credential stops the pass before the first write, with one error naming the registry, subject and id.

A flow that is paused or stopped on its target copies no schemas (as it syncs no topics). Each pass that was
not a dry run is summarized in the flow's run log (kind `schemas`: `records` = versions copied, `lag` =
versions still missing, for the status page and the metrics); one that wrote something, or failed, is also
an operation in the flow's history.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from mirrorflow.clients import FlowClients, flow_clients
from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import MirrorflowError
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.mm2.policy import flow_policy
from mirrorflow.reporting import Report
from mirrorflow.schemas.apicurio_writer import ApicurioWriter, is_apicurio
from mirrorflow.schemas.catalog import read_catalog
from mirrorflow.schemas.confluent_writer import ConfluentImportWriter
from mirrorflow.schemas.plan import SchemaConflict, SchemaPlan, plan_schemas
from mirrorflow.schemas.registry_client import RegistryClient, client_for

log = logging.getLogger(__name__)
RUN_KIND = "schemas"


@dataclass
class SchemaRun(Report):
    """What a pass found and did (or, dry, would do)."""

    flow: str
    source_registry: str
    target_registry: str
    writer: str
    dry_run: bool
    subjects: dict[str, str] = field(default_factory=dict)  # source subject -> target subject
    present: int = 0  # versions already on the target with their ids
    copies: list[str] = field(default_factory=list)  # the versions copied (dry: to copy), in order
    ids: list[int] = field(default_factory=list)  # the ids copied (dry: to copy)
    compatibility: dict[str, str] = field(default_factory=dict)
    orphans: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    skipped: str | None = None
    duration_s: float = 0.0

    DERIVED: ClassVar[tuple[str, ...]] = ("missing",)

    @property
    def missing(self) -> int:
        """Versions the target lacks after this pass (dry: before it)."""
        return len(self.copies) if self.dry_run or self.skipped else 0

    def headline(self) -> str:
        if self.skipped:
            return f"schemas {self.flow}: skipped: {self.skipped}"
        verb = "would copy" if self.dry_run else "copied"
        return (
            f"schemas {self.flow}: {verb} {len(self.copies)} version(s) ({len(self.ids)} id(s)), "
            f"{self.present} already on the target, {len(self.subjects)} subject(s), "
            f"{len(self.compatibility)} compatibility setting(s); {len(self.orphans)} orphan(s)"
        )

    def lines(self) -> list[str]:
        out = [self.headline(), f"  from {self.source_registry} to {self.target_registry} ({self.writer})"]
        out += [f"  {'to copy' if self.dry_run else 'copied'}: {c}" for c in self.copies]
        out += [f"  compatibility {s}: {lvl}" for s, lvl in self.compatibility.items()]
        out += [f"  orphan on the target (kept): {s}" for s in self.orphans]
        out += [f"  left out: {s}" for s in self.left_out]
        return out

    def brief(self) -> dict[str, Any]:
        return {
            "copied": 0 if self.dry_run else len(self.copies),
            "missing": self.missing,
            "present": self.present,
            "orphans": len(self.orphans),
            "dry_run": self.dry_run,
            "skipped": self.skipped,
        }


def registries(cfg: Config, flow: FlowConfig) -> tuple[RegistryClient, RegistryClient] | None:
    """The flow's two registry clients; None when either cluster names no registry."""
    src, tgt = client_for(cfg.cluster(flow.source)), client_for(cfg.cluster(flow.target))
    return (src, tgt) if src and tgt else None


def has_registries(cfg: Config, flow: FlowConfig) -> bool:
    return all(cfg.cluster(a).registry.get("schema.registry.url") for a in (flow.source, flow.target))


def plan_flow(cfg: Config, flow: FlowConfig) -> tuple[SchemaPlan, RegistryClient, set[str]]:
    """Read both registries and plan (no write): the plan, the target's client and its subjects."""
    pair = registries(cfg, flow)
    if pair is None:
        missing = [a for a in (flow.source, flow.target) if not cfg.cluster(a).registry.get("schema.registry.url")]
        raise MirrorflowError(
            f"schemas of {flow.name}: cluster(s) {', '.join(missing)} name no schema registry "
            "(set schema.registry.url in the cluster's config)"
        )
    src, tgt = pair
    source = read_catalog(src)
    target = read_catalog(tgt)
    filters = FlowFilters.for_flow(flow)
    plan = plan_schemas(source, target, flow_policy(flow), flow.source, flow.target, filters.should_replicate_topic)
    return plan, tgt, set(target.subjects)


def replicate_schemas(
    cfg: Config,
    flow: FlowConfig | str,
    dry_run: bool = False,
    clients: FlowClients | None = None,
    by: str = "",
    via: str = "",
) -> SchemaRun:
    """Plan (and unless `dry_run`, copy) the flow's schemas with their ids; never deletes anything."""
    flow = cfg.flow(flow) if isinstance(flow, str) else flow
    started = time.monotonic()
    with flow_clients(cfg, flow, clients) as c:
        skip = None if dry_run else _state_skip(c)
        pair = registries(cfg, flow)
        run = SchemaRun(
            flow.name,
            pair[0].name if pair else "-",
            pair[1].name if pair else "-",
            "-",
            dry_run,
        )
        if skip:
            run.skipped = skip
            return run
        try:
            plan, tgt, existing = plan_flow(cfg, flow)
            writer = ApicurioWriter(tgt) if is_apicurio(tgt) else ConfluentImportWriter(tgt)
            run.writer = writer.kind
            _fill(run, plan)
            conflicts = plan.conflicts + writer.check(plan)
            if conflicts:
                raise SchemaConflict(flow.name, conflicts)
            if not dry_run and (plan.copies or plan.compatibility):
                writer.write(plan, existing)
        except MirrorflowError as exc:
            if not dry_run:
                _record(c, run, started, error=str(exc), by=by, via=via)
            raise
        run.duration_s = round(time.monotonic() - started, 3)
        if not dry_run:
            _record(c, run, started, by=by, via=via)
        log.info("%s", run.headline())
        return run


def _fill(run: SchemaRun, plan: SchemaPlan) -> None:
    run.subjects = dict(plan.subjects)
    run.present = plan.present
    run.copies = [c.line() for c in plan.copies]
    run.ids = plan.new_ids
    run.compatibility = dict(plan.compatibility)
    run.orphans = list(plan.orphans)
    run.left_out = list(plan.left_out)


def _state_skip(clients: FlowClients) -> str | None:
    from mirrorflow.state.flow_state import flow_state

    return flow_state(clients).skip_reason(clients.flow.name, "sync")


def _record(clients: FlowClients, run: SchemaRun, started: float, error: str = "", by: str = "", via: str = "") -> None:
    """The pass in the run log (every pass) and, when it wrote something or failed, in the history."""
    from mirrorflow.state import run_log
    from mirrorflow.state.history import record_operation
    from mirrorflow.state.lease import whoami
    from mirrorflow.state.run_log import RunRecord

    copied = 0 if error else len(run.copies)
    record = RunRecord(
        RUN_KIND,
        int(time.time() * 1000),
        not error,
        duration_s=round(time.monotonic() - started, 3),
        records=copied,
        lag=len(run.copies) if error else 0,
        errors=[error[:500]] if error else [],
    )
    run_log.append(clients, record)
    if error or copied or run.compatibility:
        try:
            record_operation(
                clients,
                RUN_KIND,
                by or whoami(),
                via=via,
                summary=f"failed: {error}" if error else run.headline(),
                figures={"copied": copied, "ids": len(run.ids), "present": run.present, "orphans": len(run.orphans)},
            )
        except MirrorflowError as exc:  # the copy is done; its story could not be told
            log.warning("flow %s: the schemas pass was not recorded in the history: %s", run.flow, exc)


def missing_schemas(cfg: Config, flow: FlowConfig) -> tuple[int | None, str | None]:
    """How many source schema versions the target lacks (for a failover's preflight): (count, None), or
    (None, why) when it cannot be told; (0, None) for a flow without registries."""
    if not has_registries(cfg, flow):
        return 0, None
    try:
        plan, _, _ = plan_flow(cfg, flow)
    except MirrorflowError as exc:
        return None, str(exc)
    return len(plan.copies), None
