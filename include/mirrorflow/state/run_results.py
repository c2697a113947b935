"""Each run's per-unit results, kept on the target: how they travel from the copy to the report.

Why on the target: the copy job's driver (spark-submit --deploy-mode cluster, a Spark Connect
server) and the Airflow task that reports (Celery, Kubernetes: another machine or pod) share no
disk, but both reach the target cluster. The copy writes the results of run RUN as records with
key RUN to `mirrorflow.<flow.id>.results.internal` (one partition, kept a day); the report reads
the newest complete write of that key. The value is the JSON {"run", "results", ...} compressed
with zlib and cut into chunks of at most CHUNK bytes, each prefixed with `PART/PARTS\\n`, so a
run of any number of units fits the topic's message size. Unlike the run log, writing is not best
effort: a write the target does not acknowledge is written again up to broker.outage.max.seconds
(a broker restart is ridden through), and a run whose results cannot be handed back fails (the
report would otherwise miss units).
"""

from __future__ import annotations

import json
import time
import zlib
from typing import Any

from mirrorflow.clients import FlowClients
from mirrorflow.errors import MirrorflowError, StateError
from mirrorflow.state.names import results_topic
from mirrorflow.state.state_writer import write_acknowledged

CHUNK = 512 * 1024  # compressed bytes per record (the producer's default message.max.bytes is 1 MB)
RECENT = 64  # records the reader looks at first: the run it wants wrote a moment ago


def encode(run: str, payload: dict[str, Any], chunk: int = CHUNK) -> list[bytes]:
    """The record values of one write: the compressed JSON in chunks, each `PART/PARTS\\n...`."""
    raw = zlib.compress(json.dumps({**payload, "run": run}, separators=(",", ":")).encode(), 6)
    pieces = [raw[i : i + chunk] for i in range(0, len(raw), chunk)] or [b""]
    return [f"{i}/{len(pieces)}\n".encode() + p for i, p in enumerate(pieces)]


def decode(values: list[bytes]) -> dict[str, Any] | None:
    """The newest complete write among one key's record values (oldest first); None if none."""
    found: dict[str, Any] | None = None
    parts: list[bytes] = []
    for v in values:
        head, _, body = v.partition(b"\n")
        try:
            i, n = (int(x) for x in head.split(b"/"))
        except ValueError:
            parts = []
            continue
        if i == 0:
            parts = []
        if i != len(parts):  # a write cut short (a driver that died between chunks): skip it
            parts = []
            continue
        parts.append(body)
        if len(parts) == n:
            try:
                found = json.loads(zlib.decompress(b"".join(parts)))
            except (zlib.error, ValueError):
                pass
            parts = []
    return found


def write(clients: FlowClients, run: str, results: list[dict[str, Any]], **extra: Any) -> None:
    """Hand a run's unit results to its report; StateError when they could not be written."""
    topic = results_topic(clients.flow)
    now = int(time.time() * 1000)
    values = encode(run, {"flow": clients.flow.name, "results": results, **extra})
    try:  # written again while unacknowledged: a repeated write is read as one (decode keeps the newest whole one)
        write_acknowledged(
            clients,
            topic,
            [(run.encode(), v, now) for v in values],
            0,
            f"writing the results of run {run}",
            attempt_s=clients.admin_timeout,
        )
    except MirrorflowError as exc:
        raise StateError(
            f"the results of run {run} of flow {clients.flow.name} could not be written to {topic} "
            f"on cluster {clients.flow.target!r}: {exc}"
        ) from None


def read(clients: FlowClients, run: str) -> dict[str, Any] | None:
    """The results run `run` wrote ({"run", "flow", "results", ...}), None when it wrote none. Looks
    at the newest records first and reads the whole (one day's) partition only when not there."""
    topic = results_topic(clients.flow)
    if not clients.partitions("target", topic):
        return None
    reader = clients.reader("target")
    try:
        for last in (RECENT, None):
            msgs = reader.read(topic, {0: None}, clients.admin_timeout, keys={run.encode()}, last=last)
            found = decode([m.value() or b"" for m in msgs])
            if found is not None:
                return found
        return None
    finally:
        clients.release(reader.consumer)
