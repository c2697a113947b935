"""The recovery point objective in Airflow: what a replicate run's report and a checkpoint pass do
with the verdict of mirrorflow.observe.rpo.

Each check sends the verdict as metrics through Airflow's stats; a miss is a warning in the task's
log and the DAG run's note; and the flow's `rpo.notifier` is told when the objective is first
missed and when it is met again (the last told verdict is a control record on the target, so
two schedulers, a lost Airflow database or a restart tell no one twice).

Why not an Airflow Deadline Alert: a deadline (Airflow 3.3, `DeadlineAlert`) is a time a DAG
run must finish by, fixed when the run is created (`DeadlineReference` evaluated in the
scheduler) and dropped when the run ends in time. "A source record older than N seconds is not on
the target" is about the data, not about a run: a paused flow's runs end skipped within seconds
and would meet every deadline while the backlog ages, and a custom reference would have to read
Kafka inside the scheduler's loop. So the task that measures the age fires the notifier itself,
with the same notifiers a deadline or `on_failure_callback` takes (`BaseNotifier`).
"""

from __future__ import annotations

import copy
import importlib
import logging
from typing import Any

from mirrorflow.config import Config, FlowConfig
from mirrorflow.errors import ConfigError
from mirrorflow.observe.rpo import RpoVerdict, last_alert, notify_due, objective_s, record_alert
from mirrorflow_airflow.common import emit_samples
from mirrorflow_airflow.run_notes import leave_note

log = logging.getLogger(__name__)


def rpo_notifier(flow: FlowConfig) -> Any:
    """The flow's `rpo.notifier`, imported (None: none set). A BaseNotifier subclass is made with no
    arguments; anything else must be callable with the task's context. ConfigError names the
    property when it does not import or is not callable."""
    path = flow.props.get("rpo.notifier") or ""
    if not path:
        return None
    module, _, name = path.rpartition(".")
    key = f"flows.{flow.name}.rpo.notifier"
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError([(key, f"{path!r} cannot be imported: {exc}")]) from None
    if isinstance(found, type):
        found = found()
    if not callable(found):
        raise ConfigError([(key, f"{path!r} is a {type(found).__name__}, not a notifier or callable")])
    return found


def check_rpo(cfg: Config, flow: FlowConfig, by: str) -> RpoVerdict | None:
    """Measure the flow's RPO now (observe.status measures it with the flow's status), report it and
    tell the notifier when due. None when the flow has no objective or is stopped. A notifier that
    fails is logged and told again at the next check (the verdict is recorded only once told)."""
    from mirrorflow.clients import FlowClients
    from mirrorflow.observe.metrics import rpo_samples
    from mirrorflow.observe.status import flow_status

    if not objective_s(flow):
        return None
    verdict = flow_status(cfg, flow).rpo
    if verdict is None:
        return None
    emit_samples(rpo_samples(flow, verdict))
    if verdict.missed:
        log.warning("%s: %s", flow.name, verdict.line())
        leave_note(f"{flow.name}: {verdict.line()}")
    else:
        log.info("%s: %s", flow.name, verdict.line())
    tell = rpo_notifier(flow)
    if tell is None:
        return verdict
    with FlowClients(cfg, flow) as clients:
        if not notify_due(last_alert(clients), verdict):
            return verdict
        try:
            _tell(tell, verdict)
        except Exception as exc:  # noqa: BLE001 - an alert that fails must not fail the copy's report
            log.error("%s: the RPO notifier %s failed (told again at the next check): %s", flow.name, tell, exc)
            return verdict
        record_alert(clients, verdict, by)
    log.info("%s: told %s: %s", flow.name, flow.props["rpo.notifier"], verdict.line())
    return verdict


def _tell(tell: Any, verdict: RpoVerdict) -> None:
    """Call the notifier with the task's context and `rpo` (the verdict). A BaseNotifier renders
    its templated fields in place, so a module-level instance is copied first (its templates stay
    templates for the next alert)."""
    from airflow.sdk import BaseNotifier, get_current_context

    try:
        context: dict[str, Any] = dict(get_current_context())
    except Exception:  # noqa: BLE001 - outside a task (tests, the CLI): the verdict alone
        context = {}
    context["rpo"] = verdict.to_dict()
    (copy.copy(tell) if isinstance(tell, BaseNotifier) else tell)(context)
