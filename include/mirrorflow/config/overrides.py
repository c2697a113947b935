"""Client overrides of a flow, scoped to a cluster and a client kind as MirrorMaker 2 scopes them.

| key form                                                  | applies to                                   |
|-----------------------------------------------------------|----------------------------------------------|
| `admin.X`                                                 | admin clients on the source and the target   |
| `source.admin.X`, `target.admin.X`                        | admin clients on that cluster                |
| `consumer.X`, `consumer.override.X`, `source.consumer.X`  | consumers on the source (the copy's reader)  |
| `target.consumer.X`                                       | consumers on the target (state, checkpoints) |
| `producer.X`, `producer.override.X`, `target.producer.X`  | producers on the target (copy, checkpoints)  |
| `source.producer.X`                                       | producers on the source (heartbeats sent back) |

A more specific form wins over a general one (`target.producer.` over `producer.override.` over
`producer.`), so settings meant for one cluster (its credentials, say) never reach the other.
Settings the correctness of a copy depends on are not overridable (`PROTECTED`): they are
refused when the config is loaded, not silently replaced. Values may be `${env:VAR}` references,
resolved when a client is built.
"""

from __future__ import annotations

from typing import Any, Literal

from mirrorflow.config.client_settings import librdkafka_problem

Side = Literal["source", "target"]
Kind = Literal["admin", "consumer", "producer"]

# (prefix, sides, kind, precedence): higher precedence wins for the same setting
FORMS: tuple[tuple[str, tuple[Side, ...], Kind, int], ...] = (
    ("source.admin.", ("source",), "admin", 2),
    ("target.admin.", ("target",), "admin", 2),
    ("source.consumer.", ("source",), "consumer", 2),
    ("target.consumer.", ("target",), "consumer", 2),
    ("source.producer.", ("source",), "producer", 2),
    ("target.producer.", ("target",), "producer", 2),
    ("consumer.override.", ("source",), "consumer", 1),
    ("producer.override.", ("target",), "producer", 1),
    ("admin.", ("source", "target"), "admin", 0),
    ("consumer.", ("source",), "consumer", 0),
    ("producer.", ("target",), "producer", 0),
)
PREFIXES = tuple(prefix for prefix, *_ in FORMS)

# setting -> why mirrorflow sets it itself
_EVERY_CLIENT = {"bootstrap.servers": "the cluster's own `bootstrap.servers` names where a client connects"}
PROTECTED: dict[Kind, dict[str, str]] = {
    "admin": dict(_EVERY_CLIENT),
    "consumer": {
        **_EVERY_CLIENT,
        "isolation.level": "read_committed keeps aborted source transactions out of the copy",
        "enable.auto.commit": "mirrorflow never commits the positions of its readers",
        "enable.auto.offset.store": "mirrorflow never commits the positions of its readers",
        "group.id": "each reader names its own group",
        "enable.partition.eof": "readers need end-of-partition events to know a range was read whole",
        "auto.offset.reset": "a missing offset must stop a copy, not move it",
    },
    "producer": {
        **_EVERY_CLIENT,
        "transactional.id": "one transactional.id per copy task slot fences zombie copies of all its partitions",
        "enable.idempotence": "copies are idempotent (exactly once: transactional)",
        "acks": "an idempotent producer needs acks=all",
    },
}


def parse_key(key: str) -> tuple[tuple[Side, ...], Kind, str, int] | None:
    """(sides, kind, librdkafka setting, precedence) of an override key; None if it is not one."""
    for prefix, sides, kind, rank in FORMS:
        if key.startswith(prefix) and len(key) > len(prefix):
            return sides, kind, key[len(prefix) :], rank
    return None


def problem(key: str) -> str | None:
    """Why an override key cannot be accepted (None: it can). `key` is one `parse_key` knows."""
    parsed = parse_key(key)
    if parsed is None:
        return "not a client override"
    _, kind, name, _ = parsed
    why = PROTECTED[kind].get(name)
    if why:
        return f"mirrorflow sets {name} itself ({why}); it cannot be overridden"
    return librdkafka_problem(name)


def scoped(props: dict[str, Any], side: Side, kind: Kind) -> dict[str, tuple[str, str]]:
    """The overrides for clients of `kind` on `side`: setting -> (value, the key it came from)."""
    chosen: dict[str, tuple[int, str, str]] = {}
    for key, value in props.items():
        parsed = parse_key(key)
        if parsed is None:
            continue
        sides, k, name, rank = parsed
        if k != kind or side not in sides:
            continue
        if name not in chosen or rank > chosen[name][0]:
            chosen[name] = (rank, str(value), key)
    return {name: (value, key) for name, (_, value, key) in chosen.items()}
