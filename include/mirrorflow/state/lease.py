"""One run of a flow at a time: a lease kept in the flow's lease topic on the target.

Two runs of one flow at once (a CLI run beside a DAG run, two schedulers) would fence each other's
transactions, and with exactly.once=false copy records twice. A run therefore claims the flow's
lease first; a second run stops at once with "flow A->B is being replicated by <who> since <when>".

Kafka has no compare-and-set, but a partition is a total order every reader sees the same way. The
lease topic has one partition and LogAppendTime (the broker's clock); each record is a claim, a
renewal or a release by an owner, and `replay` decides, record by record, who holds the lease:

* a claim or renewal by X at time t takes the lease when nobody holds it, the holder's lease
  expired before t, or X already holds it (then it is extended to t + ttl);
* any other claim is refused (it changes nothing);
* a release by the holder frees it;
* a break of the holder frees it: written by a run that found the holder's process provably gone
  (see below); a break naming anyone but the current holder changes nothing.

A run appends its claim, reads the partition to its end and replays it: every run reaching the
same records reaches the same verdict, so of two runs claiming at once exactly one wins. The holder
renews every ttl/3 while it runs and releases at the end; a crashed holder's lease expires after
ttl (`lease.timeout.seconds`). One owner may span processes (an Airflow DAG run's plan task, its
Spark copy job and its report task share the owner id of the DAG run).

A crashed run's lease would block the flow for ttl. A run that holds the lease in one process (a
CLI run: `local_owner`) stamps its claims with that process (host, boot id, pid namespace, pid and
start time: mirrorflow.process.process_token); a claim by another owner that finds such a holder
whose process is provably gone (same host, kernel and pid namespace; the pid free or reused) breaks
it and claims at once instead of waiting. Renewals by the run's Spark job (another process, same
owner) carry no stamp and keep the claimer's. A DAG run's lease spans processes (its plan, copy and
report tasks) and is never stamped: an Airflow retry of one of its tasks is the same owner and takes
it back at once anyway.

Every record also names the deployment (`deployment.id`, else `state.namespace`; see
FlowConfig.deployment) of the config that wrote it. Two deployments whose names coincide (the same
flow into the same target with the same state.namespace, or none) would share the flow's state: the
deployment of the oldest record still in the topic owns the flow, and a run of any other deployment
is refused naming both (before it claims, and again after, should two have claimed at once).

A **take-over** (a failover the operator confirmed with `--take-over`, ops.dr.failover) is a claim that
wins whoever holds the lease: a `takeover` record makes its writer the holder at once, **fences**
the owner it took the lease from (no later claim or renewal of that owner counts, so a run riding
out an outage never gets the flow back, not even after the lease is released) and makes the
writer's deployment the one that owns the flow (a DR-site Airflow with another deployment.id takes
the flow over). A run's copy units check, after they fence their partition's transactional id,
that their run still holds the lease (LeaseGuard): with the take-over's own fencing of those ids
(state.fencing.fence_copies), a run taken over commits nothing after the take-over.
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from mirrorflow.clients import FlowClients
from mirrorflow.errors import ClusterError, DeploymentConflictError, LeaseError
from mirrorflow.kafka.log_reader import LogReader
from mirrorflow.kafka.retry import OUTAGE_BOUND
from mirrorflow.process import process_token, provably_gone
from mirrorflow.state.names import LEASE, lease_topic, reader_group
from mirrorflow.state.state_writer import WRITE_ATTEMPT_S, write_acknowledged

log = logging.getLogger(__name__)
LEASE_KEY = b"lease"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class LeaseRecord:
    kind: str  # claim | renew | release | break | takeover
    owner: str  # unique id of the run (or DAG run) holding or asking for the lease
    who: str  # for people: user@host, pid, what runs
    ttl_ms: int
    timestamp: int  # broker time (LogAppendTime) of the record, ms
    deployment: str = ""  # the writer's FlowConfig.deployment ('' also for records written before it)
    proc: str = ""  # claim/renew: the owner's process when the lease lives in one (process_token)
    target: str = ""  # break, takeover: the owner whose lease is broken (taken over)

    def to_json(self) -> bytes:
        d = {"v": FORMAT_VERSION, "kind": self.kind, "owner": self.owner, "who": self.who, "ttl_ms": self.ttl_ms}
        if self.deployment:
            d["deployment"] = self.deployment
        if self.proc:
            d["proc"] = self.proc
        if self.target:
            d["target"] = self.target
        return json.dumps(d, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes | None, timestamp: int) -> LeaseRecord | None:
        try:
            d = json.loads(raw or b"")
            return cls(
                str(d["kind"]),
                str(d["owner"]),
                str(d.get("who", "")),
                int(d["ttl_ms"]),
                int(timestamp),
                str(d.get("deployment", "")),
                str(d.get("proc", "")),
                str(d.get("target", "")),
            )
        except (ValueError, KeyError, TypeError):
            return None  # not ours (or unreadable): it takes no lease


@dataclass(frozen=True)
class Holder:
    owner: str
    who: str
    since: int  # ms, when the holder's claim was accepted
    expires: int  # ms
    proc: str = ""  # the holder's process when its lease lives in one (process_token), else ''

    def run_line(self) -> str:
        return f"{self.who} since {_iso(self.since)}"

    def describe(self, flow_name: str) -> str:
        return (
            f"flow {flow_name} is being replicated by {self.who} since {_iso(self.since)} "
            f"(its lease expires at {_iso(self.expires)} unless renewed)"
        )


def replay(
    records: Iterable[LeaseRecord], holder: Holder | None = None, fenced: set[str] | None = None
) -> Holder | None:
    """Who holds the lease after `records` (in log order), starting from `holder`; `fenced`: the
    owners taken over so far, updated (their claims and renewals never count again)."""
    fenced = set() if fenced is None else fenced
    for r in records:
        if r.kind == "takeover":
            if r.target:
                fenced.add(r.target)
            holder = Holder(r.owner, r.who, r.timestamp, r.timestamp + r.ttl_ms, r.proc)
            continue
        if r.owner in fenced:
            continue
        free = holder is None or holder.expires <= r.timestamp
        mine = holder is not None and holder.owner == r.owner
        if r.kind in ("claim", "renew"):
            if free or mine:
                kept = mine and not free and holder is not None
                since = holder.since if kept and holder is not None else r.timestamp
                proc = r.proc or (holder.proc if kept and holder is not None else "")
                holder = Holder(r.owner, r.who, since, r.timestamp + r.ttl_ms, proc)
        elif r.kind == "release" and mine:
            holder = None
        elif r.kind == "break" and not free and holder is not None and holder.owner == r.target:
            holder = None
    return holder


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")


def describe_deployment(deployment: str) -> str:
    return f"deployment {deployment!r}" if deployment else "a deployment without deployment.id or state.namespace"


def whoami() -> str:
    """user@host pid N: this process, for people reading a lease or a flow state."""
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in some containers
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


_PROCESS_OWNERS: set[str] = set()  # owners created by local_owner in this process


def local_owner(purpose: str) -> tuple[str, str]:
    """(owner id, who) for a run of this process: its lease records are stamped with this process,
    so the next run can take the flow at once should this one be killed (see the module doc)."""
    owner = f"{purpose}:{uuid.uuid4().hex[:16]}"
    _PROCESS_OWNERS.add(owner)
    return owner, f"{purpose} by {whoami()}"


class FlowLease:
    """The lease of one flow, held by `owner`; use as a context manager or acquire()/release()."""

    def __init__(
        self, clients: FlowClients, owner: str, who: str, ttl_s: float | None = None, reader: LogReader | None = None
    ) -> None:
        self.clients, self.flow = clients, clients.flow
        self.owner, self.who = owner, who
        ttl = ttl_s if ttl_s is not None else float(self.flow.props["lease.timeout.seconds"])
        self.ttl_ms = max(1000, int(ttl * 1000))
        self.topic = lease_topic(self.flow)
        self.proc = process_token() if owner in _PROCESS_OWNERS else ""
        self.holder: Holder | None = None
        self.first: LeaseRecord | None = None  # the oldest record read: its deployment owns the flow
        self.taken: LeaseRecord | None = None  # the latest take-over read: its deployment owns the flow then
        self.fenced: set[str] = set()  # owners taken over (replay)
        self.lost: str | None = None  # why this owner lost the lease while renewing
        self.took_from: Holder | None = None  # acquire: the last holder, when it had not released the lease
        self.kept_until = 0.0  # time.monotonic() before which the lease is surely still this owner's
        self.acknowledged = 0.0  # time.monotonic() when the last claim or renewal was acknowledged
        self._next: int | None = None  # replayed up to here
        self._reader: LogReader | None = reader  # None: one of its own, made on first use
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    # -- the protocol ---------------------------------------------------------------------------
    def _append(
        self,
        kind: str,
        bound_s: float | None = None,
        bound_name: str = OUTAGE_BOUND,
        attempt_s: float = WRITE_ATTEMPT_S,
    ) -> None:
        """Write one record and wait for its acknowledgement, written again while unacknowledged for
        up to `bound_s` (default broker.outage.max.seconds): LeaseError past it. A record written
        twice is harmless (a second claim or renewal by the holder only extends its lease)."""
        proc = self.proc if kind in ("claim", "renew", "takeover") else ""
        target = self.holder.owner if kind in ("break", "takeover") and self.holder is not None else ""
        if target == self.owner:
            target = ""
        rec = LeaseRecord(kind, self.owner, self.who, self.ttl_ms, 0, self.flow.deployment, proc, target)
        try:  # the broker stamps the record (LogAppendTime)
            write_acknowledged(
                self.clients,
                self.topic,
                [(LEASE_KEY, rec.to_json(), int(time.time() * 1000))],
                0,
                f"writing the lease {kind} of flow {self.flow.name}",
                bound_s,
                bound_name,
                attempt_s,
            )
        except ClusterError as exc:
            raise LeaseError(f"cannot write the lease of flow {self.flow.name}: {exc}") from None

    def read_holder(self) -> Holder | None:
        """Replay the records appended since the last read; the holder now (maybe expired)."""
        if self._reader is None:
            self._reader = self.clients.reader("target", group=reader_group(self.flow, LEASE))
        last = self._next
        records = []
        # admin.timeout.ms, at most broker.outage.max.seconds (FlowClients.admin_timeout): a black-holed
        # target kept a copy task's lease check going 34 s past a 4 s bound when it was admin.timeout.ms alone
        for m in self._reader.read(self.topic, {0: self._next}, timeout=self.clients.admin_timeout):
            last = m.offset() + 1
            rec = LeaseRecord.from_json(m.value(), m.timestamp()[1])
            if rec is not None:
                records.append(rec)
                if self.first is None:
                    self.first = rec
                if rec.kind == "takeover":
                    self.taken = rec
        self._next = last
        self.holder = replay(records, self.holder, self.fenced)
        return self.holder

    def close_reader(self) -> None:
        """Close the reader of the lease topic now (it is the flow clients' otherwise)."""
        if self._reader is not None:
            self.clients.release(self._reader.consumer)
            self._reader, self._next, self.holder = None, None, None

    @property
    def owning_deployment(self) -> str | None:
        """The deployment that owns the flow's state (None: no record yet): the latest take-over's,
        else the oldest record's."""
        rec = self.taken or self.first
        return None if rec is None else rec.deployment

    def _claim(
        self,
        kind: str,
        bound_s: float | None = None,
        bound_name: str = OUTAGE_BOUND,
        attempt_s: float = WRITE_ATTEMPT_S,
    ) -> Holder | None:
        with self._lock:
            started = time.monotonic()  # the broker stamps the record later: its lease lasts at least this long
            self._append(kind, bound_s, bound_name, attempt_s)
            self.acknowledged = time.monotonic()
            holder = self.read_holder()
            if holder is not None and holder.owner == self.owner:
                self.kept_until = started + self.ttl_ms / 1000
            return holder

    def check_deployment(self) -> None:
        """DeploymentConflictError when another deployment owns the flow's state (see the module doc)."""
        first = self.taken or self.first
        if first is None or first.deployment == self.flow.deployment:
            return
        topic = self.topic.removesuffix(".lease.internal")
        raise DeploymentConflictError(
            f"flow {self.flow.name}: its state on cluster {self.flow.target!r} ({topic}.*) belongs to "
            f"{describe_deployment(first.deployment)} (its "
            f"{'take-over' if first is self.taken else 'oldest lease record'}: {first.who}, "
            f"{_iso(first.timestamp)}); this config is {describe_deployment(self.flow.deployment)}. "
            "Two deployments cannot share a flow's state: give this one its own state.namespace (or, if "
            "it is the same deployment, the same deployment.id)"
        )

    def acquire(self) -> FlowLease:
        """Claim the lease; LeaseError naming the holder when another run holds it (try later), or
        DeploymentConflictError naming the deployment that owns the flow when that is not this
        config's (check_deployment: a run of the Airflow DAG fails instead of being skipped)."""
        with self._lock:
            gone = self.read_holder()
        self.check_deployment()
        now = int(time.time() * 1000)
        if gone is not None and gone.owner != self.owner:  # a holder that did not release: broken or lapsed
            self.took_from = gone
        if gone is not None and gone.owner != self.owner and gone.expires > now and provably_gone(gone.proc):
            log.warning(
                "flow %s: %s holds the lease until %s, but its process no longer exists on this host: "
                "breaking its lease",
                self.flow.name,
                gone.who,
                _iso(gone.expires),
            )
            with self._lock:
                self._append("break")  # names self.holder: if someone else claimed meanwhile, it changes nothing
        holder = self._claim("claim")
        try:
            self.check_deployment()
        except DeploymentConflictError:
            self.release()
            raise
        if holder is None or holder.owner != self.owner:
            raise LeaseError(holder.describe(self.flow.name) if holder else f"flow {self.flow.name}: lease not taken")
        return self

    def take_over(self) -> Holder | None:
        """Take the lease whoever holds it, fencing that owner (module doc); only on the operator's
        explicit confirmation (a failover's take-over). Returns the holder it was taken from (the
        last one, also when its lease had lapsed; None: nobody ever held it but this owner);
        LeaseError when another take-over won meanwhile."""
        with self._lock:
            prev = self.read_holder()
            started = time.monotonic()
            self._append("takeover")
            self.acknowledged = time.monotonic()
            holder = self.read_holder()
        if holder is None or holder.owner != self.owner:
            raise LeaseError(
                holder.describe(self.flow.name) + " (it took the flow over at the same time)"
                if holder
                else f"flow {self.flow.name}: lease not taken"
            )
        self.kept_until = started + self.ttl_ms / 1000
        return prev if prev is not None and prev.owner != self.owner else None

    def renew(self) -> bool:
        """Extend the lease; False (and `lost` says why) when another run holds it now, or when the
        renewal was not acknowledged while the lease still held (it is retried until then, never
        past: a renewal landing after the lease lapsed may find another run holding the flow)."""
        until = self.kept_until
        left = until - time.monotonic()
        if left <= 0:
            self.lost = f"flow {self.flow.name}: this run's lease lapsed before it was renewed (lease.timeout.seconds)"
            return False
        try:
            # attempts of at most half the time left: one stuck flush must not use it all up
            holder = self._claim(
                "renew",
                left,
                "the time left on this run's lease (lease.timeout.seconds)",
                min(WRITE_ATTEMPT_S, left / 2),
            )
        except LeaseError as exc:
            if time.monotonic() < self.kept_until:
                raise  # not a write past the bound (e.g. the read after it): the loop tries again
            self.lost = f"flow {self.flow.name}: this run's lease was not renewed before it lapsed: {exc}"
            return False
        if self.acknowledged > until:  # the retries' bound counts from the first failure: may end late
            self.lost = (
                f"flow {self.flow.name}: this run's lease renewal was acknowledged only after the lease "
                "had lapsed (lease.timeout.seconds): another run may have held the flow meanwhile"
            )
            return False
        if holder is None or holder.owner != self.owner:
            self.lost = (
                f"flow {self.flow.name}: this run lost its lease"
                + (f" to {holder.who} (since {_iso(holder.since)})" if holder else "")
                + ": it was not renewed within lease.timeout.seconds"
            )
            return False
        return True

    def release(self, once: bool = False) -> None:
        """Free the lease, written again while unacknowledged for up to the lease's ttl (after that
        it expires anyway); a release that fails is logged, never raised: the run's work is done,
        and the lease lapses lease.timeout.seconds after its last renewal. `once`: one short try (the
        run gave up on the target already: it does not ride the outage out a second time)."""
        self.stop_renewing()
        bound = 0.0 if once else min(self.clients.outage_timeout, self.ttl_ms / 1000)
        try:
            with self._lock:
                self._append("release", bound, "the lease's ttl (lease.timeout.seconds)")
        except Exception as exc:  # noqa: BLE001 - best effort by design (see the docstring)
            log.warning(
                "flow %s: the lease of %s was not released (%s); it lapses %.0f s after its last renewal "
                "(lease.timeout.seconds), until then another run of the flow is refused",
                self.flow.name,
                self.who,
                exc,
                self.ttl_ms / 1000,
            )

    # -- renewing in the background -------------------------------------------------------------
    def start_renewing(self) -> FlowLease:
        def loop() -> None:
            while not self._stop.wait(self.ttl_ms / 3000):
                try:
                    if not self.renew():
                        return
                except Exception as exc:  # noqa: BLE001 - the target is away: retry until the lease lapses
                    if time.monotonic() >= self.kept_until:
                        self.lost = f"flow {self.flow.name}: could not renew this run's lease: {exc}"
                        return

        self._renewer = threading.Thread(target=loop, name=f"lease-{self.flow.id}", daemon=True)
        self._renewer.start()
        return self

    @contextmanager
    def renewed(self) -> Iterator[FlowLease]:
        """The lease renewed in the background while the block runs (the one way a run keeps its
        lease: the CLI's run, a DAG's one task, the spark-submit copy); not released after it: the
        run's last step does that, maybe in another process."""
        self.start_renewing()
        try:
            yield self
        finally:
            self.stop_renewing()

    def stop_renewing(self) -> None:
        self._stop.set()
        if self._renewer is not None and self._renewer is not threading.current_thread():
            self._renewer.join(timeout=self.clients.admin_timeout)
        self._renewer = None

    def __enter__(self) -> FlowLease:
        self.acquire()
        return self.start_renewing()

    def __exit__(self, *exc: object) -> None:
        self.release()


class LeaseGuard:
    """Whether run `owner` still holds the flow's lease, asked by each of its copy units once it has
    fenced its partition's transactional id (copier): a run whose lease another run took (a
    failover's take-over) copies nothing more. Reads only the records appended since the last
    check; a lease that lapsed while nobody else claimed it is still this run's. One per copy task
    (its lanes share it); `close()` releases its reader."""

    def __init__(self, clients: FlowClients, owner: str) -> None:
        self.owner, self.clients = owner, clients
        self._lease = FlowLease(clients, owner, "lease guard", 1)
        self._lock = threading.Lock()

    def check(self) -> None:
        with self._lock:
            holder = self._lease.read_holder()
        if holder is None or holder.owner != self.owner:
            flow = self._lease.flow.name
            raise LeaseError(
                f"flow {flow}: this run no longer holds the flow's lease"
                + (f" ({holder.who} holds it since {_iso(holder.since)})" if holder else "")
                + ": it copies nothing more"
            )

    def close(self) -> None:
        self._lease.close_reader()


def current_holder(clients: FlowClients) -> Holder | None:
    """Who holds the flow's lease now (for status pages): a replay without a claim."""
    if not clients.partitions("target", lease_topic(clients.flow)):
        return None
    lease = FlowLease(clients, "status", "status", 1)
    holder = lease.read_holder()
    now = int(time.time() * 1000)
    return holder if holder is not None and holder.expires > now else None
