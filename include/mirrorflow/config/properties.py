"""Every property a flow may set: MirrorMaker 2's names and defaults, and mirrorflow's own.

`FLOW_PROPERTIES` is the one table of flow properties: the loader validates against it, the
docs list it, and `mm2=False` marks mirrorflow's additions.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise ValueError(f"expected true or false, got {v!r}")


def _int(v: Any) -> int:
    if isinstance(v, bool):
        raise ValueError(f"expected an integer, got {v!r}")
    try:
        return int(str(v).strip())
    except ValueError:
        raise ValueError(f"expected an integer, got {v!r}") from None


def _list(v: Any) -> list[str]:
    """MM2 LIST type: comma separated, items trimmed; a YAML list is accepted too."""
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return [str(x).strip() for x in v if str(x).strip()]
    return [x.strip() for x in str(v).split(",") if x.strip()]


def _str(v: Any) -> str:
    return "" if v is None else str(v).strip()


def _positive_int(v: Any) -> int:
    n = _int(v)
    if n < 1:
        raise ValueError(f"expected a positive integer, got {v!r}")
    return n


def _non_negative_int(v: Any) -> int:
    n = _int(v)
    if n < 0:
        raise ValueError(f"expected 0 or a positive integer, got {v!r}")
    return n


def _dotted_path(v: Any) -> str:
    """`package.module.name` (an importable object's path; resolved where it is called), or empty."""
    s = _str(v)
    if s and not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", s):
        raise ValueError(f"expected a dotted path such as my_alerts.rpo_notifier, got {v!r}")
    return s


_STEP_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_CALLABLE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*[:.][A-Za-z_]\w*")


SWITCH_STEP_TIMEOUT_S = 300  # a client-switch step that takes longer is reported failed (it may still run)


def _switch_steps(v: Any) -> list[dict[str, Any]]:
    """client.switch.failover / client.switch.failback: the client-switch steps run after the
    operation's commit, in order (ops.dr.client_switch). A YAML list; each item is a callable's path
    (`pkg.module:function`, or `pkg.module.function`) or a mapping `{name, callable, args,
    timeout_seconds}`; the result is always `[{"name", "callable", "args", "timeout_seconds"}]` (name:
    the function's name by default, unique, letters, digits, '_' and '-': it becomes an Airflow task
    id; timeout_seconds: how long the step may take, default SWITCH_STEP_TIMEOUT_S)."""
    if v is None or v == "":
        return []
    items = v if isinstance(v, (list, tuple)) else [v]
    out: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        where = f"step {i + 1}"
        if isinstance(item, str):
            item = {"callable": item}
        if not isinstance(item, dict):
            raise ValueError(f"{where}: expected a callable's path or a mapping with callable and args, got {item!r}")
        unknown = sorted(set(map(str, item)) - {"name", "callable", "args", "timeout_seconds"})
        if unknown:
            raise ValueError(
                f"{where}: unknown key(s) {', '.join(unknown)} (a step has name, callable, args, timeout_seconds)"
            )
        path = _str(item.get("callable"))
        if not _CALLABLE.fullmatch(path):
            raise ValueError(f"{where}: callable: expected a path such as mypkg.switches:repoint_dns, got {path!r}")
        name = _str(item.get("name")) or re.split(r"[:.]", path)[-1]
        if not _STEP_NAME.fullmatch(name):
            raise ValueError(f"{where}: name may hold only letters, digits, '_' and '-' (at most 64), got {name!r}")
        if any(s["name"] == name for s in out):
            raise ValueError(f"{where}: the name {name!r} is used twice (give each step its own name)")
        args = item.get("args") or {}
        if not isinstance(args, dict) or not all(isinstance(k, str) and k.isidentifier() for k in args):
            raise ValueError(f"{where} ({name}): args: expected a mapping of keyword arguments, got {args!r}")
        timeout = item.get("timeout_seconds", SWITCH_STEP_TIMEOUT_S)
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
            raise ValueError(f"{where} ({name}): timeout_seconds: expected a positive whole number, got {timeout!r}")
        out.append({"name": name, "callable": path, "args": dict(args), "timeout_seconds": timeout})
    return out


def _replication_factor(v: Any) -> int:
    n = _int(v)
    if n != -1 and n < 1:
        raise ValueError(f"expected -1 (the target broker's default) or a positive integer, got {v!r}")
    return n


def _true_only(why_not: str) -> Callable[[Any], bool]:
    """A toggle of which only `true` is supported: `false` is refused with `why_not`."""

    def parse(v: Any) -> bool:
        if not _bool(v):
            raise ValueError(f"false is not supported: {why_not}")
        return True

    return parse


def _one_of(*choices: str) -> Callable[[Any], str]:
    def parse(v: Any) -> str:
        s = _str(v)
        if s not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {v!r}")
        return s

    return parse


def _separator(v: Any) -> str:
    """replication.policy.separator: taken literally (no trimming); it may not be empty."""
    s = "" if v is None else str(v)
    if s == "":
        raise ValueError("the separator may not be empty")
    return s


def _policy_class(v: Any) -> str:
    from mirrorflow.mm2.policy import POLICY_CLASSES

    s = _str(v)
    if s not in POLICY_CLASSES:
        raise ValueError(
            f"unknown replication policy {s!r} (use DefaultReplicationPolicy or IdentityReplicationPolicy)"
            + did_you_mean(s, [k for k in POLICY_CLASSES if "." not in k])
        )
    return s


# MM2's transaction.boundary values: what each means here (the one place; the loader and the docs use it).
TRANSACTION_BOUNDARIES: dict[str, str] = {
    "poll": "one transaction per batch a copy reads (MM2: per batch a task's poll returns); a batch ends at "
    "transaction.max.records / transaction.max.bytes, the end of the unit, or half of transaction.timeout.ms",
    "interval": "a batch's transaction also commits once it has been open for transaction.boundary.interval.ms "
    "(checked every 1000 records; transaction.max.records / bytes still bound it)",
}
REFUSED_BOUNDARIES: dict[str, str] = {
    "connector": "MirrorSourceConnector defines no transaction boundaries (Kafka Connect refuses "
    "`connector` for it too); use poll (per batch) or interval",
}


def _transaction_boundary(v: Any) -> str:
    s = _str(v).lower()
    if s in REFUSED_BOUNDARIES:
        raise ValueError(f"{s} is not supported: {REFUSED_BOUNDARIES[s]}")
    if s not in TRANSACTION_BOUNDARIES:
        raise ValueError(f"expected poll or interval, got {v!r}")
    return s


def _name(v: Any, what: str) -> str:
    """A name that goes into topic names and transactional ids: letters, digits, '_' and '-'."""
    s = _str(v)
    if s and not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", s):
        raise ValueError(f"{what} may hold only letters, digits, '_' and '-' (at most 64), got {v!r}")
    return s


def _initial_position(v: Any) -> str:
    s = _str(v)
    if s in ("earliest", "latest") or s.isdigit():
        return s
    try:
        datetime.fromisoformat(s)
    except ValueError:
        raise ValueError(f"expected earliest, latest, or a timestamp (ms since epoch or ISO-8601), got {v!r}") from None
    return s


@dataclass(frozen=True)
class Prop:
    default: Any
    parse: Callable[[Any], Any]
    mm2: bool = True  # False: a mirrorflow extension without an MM2 equivalent
    doc: str = ""


DEFAULT_CONFIG_EXCLUDE = [
    r"follower\.replication\.throttled\.replicas",
    r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\.difference\.max\.ms",
    r"message\.timestamp\.type",
    r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
]

# Every property a flow (or `defaults`) may set. Unknown keys are an error with a "did you mean".
FLOW_PROPERTIES: dict[str, Prop] = {
    "enabled": Prop(True, _bool),
    "topics": Prop([".*"], _list),
    "topics.exclude": Prop([r".*[\-\.]internal", r".*\.replica", "__.*"], _list),
    "groups": Prop([".*"], _list),
    "groups.exclude": Prop(["console-consumer-.*", "connect-.*", "__.*"], _list),
    "config.properties.exclude": Prop(DEFAULT_CONFIG_EXCLUDE, _list),
    "use.defaults.from": Prop("target", _one_of("target", "source")),
    "replication.policy.class": Prop("DefaultReplicationPolicy", lambda v: _policy_class(v)),
    "replication.policy.separator": Prop(".", _separator),
    "replication.policy.internal.topic.separator.enabled": Prop(True, _bool),
    # -1: the target broker's default.replication.factor (KIP-464); MM2's default is 2.
    "replication.factor": Prop(-1, _replication_factor),
    "heartbeats.replication.enabled": Prop(True, _bool),
    "refresh.topics.enabled": Prop(True, _bool),
    "refresh.topics.interval.seconds": Prop(600, _positive_int),
    "sync.topic.configs.enabled": Prop(True, _bool),
    "sync.topic.configs.interval.seconds": Prop(600, _positive_int),
    "sync.topic.acls.enabled": Prop(True, _bool),
    "sync.topic.acls.interval.seconds": Prop(600, _positive_int),
    "refresh.groups.enabled": Prop(
        True,
        _true_only(
            "mirrorflow has no long-running task whose start would list the groups once; "
            "groups are looked up every refresh.groups.interval.seconds (select them with groups / groups.exclude)"
        ),
    ),
    "refresh.groups.interval.seconds": Prop(600, _positive_int),
    "emit.checkpoints.enabled": Prop(True, _bool),
    "emit.checkpoints.interval.seconds": Prop(60, _positive_int),
    "sync.group.offsets.enabled": Prop(False, _bool),
    "sync.group.offsets.interval.seconds": Prop(60, _positive_int),
    "emit.heartbeats.enabled": Prop(True, _bool),
    "emit.heartbeats.interval.seconds": Prop(1, _positive_int),
    # Internal topics mirrorflow creates on first use. -1: the broker's default (MM2's default is 3).
    "checkpoints.topic.replication.factor": Prop(-1, _replication_factor),
    "heartbeats.topic.replication.factor": Prop(-1, _replication_factor),
    "admin.timeout.ms": Prop(60000, _positive_int),
    # Kafka Connect's exactly-once source settings (KIP-618), mapped onto mirrorflow's batches: see
    # TRANSACTION_BOUNDARIES and docs/configuration.md ("Transaction boundaries and exactly-once").
    "transaction.boundary": Prop("poll", lambda v: _transaction_boundary(v)),
    "transaction.boundary.interval.ms": Prop(60000, _positive_int),
    "tasks.max": Prop(4, _positive_int, doc="parallelism: at most this many copy units per wave"),
    # mirrorflow's own properties
    "exactly.once": Prop(True, _bool, mm2=False, doc="transactional copy (false: idempotent, at-least-once)"),
    "initial.position": Prop(
        "earliest", _initial_position, mm2=False, doc="earliest | latest | a timestamp (ms since epoch or ISO-8601)"
    ),
    "schedule": Prop(
        "*/5 * * * *", _str, mm2=False, doc="cron for the replicate DAG; @continuous: back-to-back continuous runs"
    ),
    "continuous.run.seconds": Prop(
        600, _positive_int, mm2=False, doc="how long one continuous run copies before it hands over to the next"
    ),
    "continuous.poll.ms": Prop(
        200, _positive_int, mm2=False, doc="continuous runs: a partition's transaction commits at least this often"
    ),
    "continuous.state.check.seconds": Prop(
        5, _positive_int, mm2=False, doc="continuous runs: how often a copy task reads the flow's state (pause, stop)"
    ),
    "unit.max.records": Prop(5_000_000, _positive_int, mm2=False),
    "unit.max.bytes": Prop(2 * 1024**3, _positive_int, mm2=False),
    "transaction.max.records": Prop(20_000, _positive_int, mm2=False),
    "transaction.max.bytes": Prop(32 * 1024**2, _positive_int, mm2=False),
    "task.partitions.in.flight": Prop(
        16, _positive_int, mm2=False, doc="source partitions one copy task copies at the same time"
    ),
    "task.memory.bytes": Prop(
        256 * 1024**2,
        _positive_int,
        mm2=False,
        doc="resident memory one copy task aims to stay under: sizes its prefetch and batches per partition "
        "it reads at once",
    ),
    "state.topic.partitions": Prop(16, _positive_int, mm2=False),
    "state": Prop(
        "running",
        _one_of("running", "paused", "stopped"),
        mm2=False,
        doc="declared operating state (Strimzi's state); `mirrorflow flow pause|stop` records one on the target",
    ),
    "standby": Prop(
        False,
        _bool,
        mm2=False,
        doc="the failback path of its reverse flow: stopped until `mirrorflow failback` of the reverse flow starts it",
    ),
    "mirror.read.only": Prop(
        False,
        _bool,
        mm2=False,
        doc="the flow's remote topics are read-only on the target (a DENY WRITE for User:* on each; the flow's "
        "target principal must be a super user) until a failover promotes them; a failback puts it on the side "
        "that became the mirror",
    ),
    "lease.timeout.seconds": Prop(
        120, _positive_int, mm2=False, doc="a crashed run's lease on the flow expires after this long"
    ),
    "state.topic.replication.factor": Prop(-1, _replication_factor, mm2=False),
    "state.namespace": Prop(
        "",
        lambda v: _name(v, "state.namespace"),
        mm2=False,
        doc="set in `defaults`: a prefix in every state topic, transactional id and consumer group name "
        "(`mirrorflow.<ns>.<flow.id>.progress.internal`), so several deployments share a target",
    ),
    "deployment.id": Prop(
        "",
        lambda v: _name(v, "deployment.id"),
        mm2=False,
        doc="set in `defaults`: who this deployment is, recorded in each flow's lease; a run of another "
        "deployment on the same state is refused (default: the state.namespace)",
    ),
    "offset.map.max.runs": Prop(
        20_000, _positive_int, mm2=False, doc="offset-map runs kept per source partition (older ones are pruned)"
    ),
    "rpo.seconds": Prop(
        0,
        _non_negative_int,
        mm2=False,
        doc="recovery point objective: no source record older than this may wait unreplicated (0: none); "
        "checked by every replicate run and checkpoint pass (observe.rpo)",
    ),
    "rpo.notifier": Prop(
        "",
        _dotted_path,
        mm2=False,
        doc="dotted path of an Airflow notifier (a BaseNotifier instance or class) or a callable(context), "
        "told when rpo.seconds is first missed and when it is met again",
    ),
    "client.switch.failover": Prop(
        [],
        _switch_steps,
        mm2=False,
        doc="client-switch steps the failover runs after its commit, in order (repoint the applications: a "
        "bootstrap alias, DNS, a gateway): a list of `pkg.module:function` or {name, callable, args}; each is "
        "approved with the plan, timed, recorded in the history and rehearsed (dry run) by the drill",
    ),
    "client.switch.failback": Prop(
        [],
        _switch_steps,
        mm2=False,
        doc="client-switch steps the failback runs after it started the reverse flow (e.g. the readers of the "
        "mirror move to the old source), as client.switch.failover",
    ),
    "broker.outage.max.seconds": Prop(
        300, _positive_int, mm2=False, doc="a copy waits this long for an unavailable broker, then fails"
    ),
}


# MM2 properties mirrorflow accepts but treats differently from MM2 (another default, a mapped meaning,
# a value refused): (verdict, why). Every other MM2 property of FLOW_PROPERTIES does the same as in MM2.
# docs/mm2-compatibility.md is generated from these tables (config.compat).
MM2_DIFFERENCES: dict[str, tuple[str, str]] = {
    "replication.factor": ("different", "default -1 (the target broker's default.replication.factor, KIP-464); MM2: 2"),
    "checkpoints.topic.replication.factor": ("different", "default -1 (the target broker's default); MM2: 3"),
    "heartbeats.topic.replication.factor": ("different", "default -1 (the target broker's default); MM2: 3"),
    "tasks.max": ("different", "default 4 (MM2: 1): at most this many copy units run at once (Spark tasks)"),
    "refresh.groups.enabled": ("different", "false is refused: there is no task start that would list the groups once"),
    "refresh.topics.enabled": (
        "different",
        "false: scheduled sync runs leave topics alone, a manual trigger still creates them (MM2 lists them once "
        "at start)",
    ),
    "replication.policy.class": (
        "mapped",
        "DefaultReplicationPolicy and IdentityReplicationPolicy (full MM2/Strimzi class names or short names); "
        "custom classes are refused",
    ),
    "transaction.boundary": (
        "mapped",
        "poll: one transaction per copy batch; interval: also a time bound on a batch's transaction; connector: "
        "refused (MirrorSourceConnector defines no boundaries)",
    ),
    "transaction.boundary.interval.ms": (
        "mapped",
        "with transaction.boundary=interval: how long a batch's transaction stays open at most (never more than "
        "half of transaction.timeout.ms); an error with another boundary",
    ),
    "emit.heartbeats.interval.seconds": (
        "same",
        "heartbeats are emitted at this interval during each 60 s window of the flow's heartbeat DAG "
        "(`@continuous`, waiting on Airflow's triggerer)",
    ),
}


# MM2 properties that mirrorflow refuses, with why and what to use instead: a flow that sets one
# fails validation with this reason (never accepted and then ignored); `config import` leaves them
# out with the same reason.
REFUSED: dict[str, str] = {
    "consumer.poll.timeout.ms": "a copy reads a planned offset range and returns as soon as it reaches "
    "the range's end, so a source poll timeout has nothing to bound here; remove it",
    "offset-syncs.topic.replication.factor": "mirrorflow writes no offset-syncs topic (its exact offset map "
    "lives in the flow's state topics): use state.topic.replication.factor",
    "offset-syncs.topic.location": "mirrorflow writes no offset-syncs topic; its offset map is always kept "
    "on the target, in the flow's state topics; remove it",
    "emit.offset-syncs.enabled": "mirrorflow keeps an exact offset map instead of offset syncs, and "
    "checkpoints need it; remove it",
    "offset.lag.max": "mirrorflow's offset map records every copied offset, so there is no lag to bound; remove it",
    "topic.filter.class": "only MM2's default filters exist here: use topics / topics.exclude",
    "group.filter.class": "only MM2's default filters exist here: use groups / groups.exclude",
    "config.property.filter.class": "only MM2's default filters exist here: use config.properties.exclude",
    "exactly.once.source.support": "a Kafka Connect worker setting; mirrorflow's copy is transactional "
    "unless exactly.once: false (`config import` maps enabled -> exactly.once: true, disabled -> false)",
    "exactly.once.support": "a Kafka Connect connector setting; use exactly.once: true (required/requested) or false",
    "use.incremental.alter.configs": "topic configs are always synced with IncrementalAlterConfigs; remove it",
}


def did_you_mean(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
