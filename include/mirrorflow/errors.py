"""The exceptions mirrorflow raises.

Every error a user can cause or meet names what is wrong and where (config key, cluster alias,
topic, partition, offset). Callers catch `MirrorflowError`; the CLI turns it into one line on
stderr and a non-zero exit. Messages never contain secret values.
"""

from __future__ import annotations


class MirrorflowError(Exception):
    """Base class: an error with a message fit to show a user as is."""

    exit_code = 1


class ConfigError(MirrorflowError):
    """The configuration is malformed or inconsistent.

    `problems` holds every problem found, each as (key, message), so `config validate` can
    report all of them at once instead of the first.
    """

    exit_code = 2

    def __init__(self, problems: list[tuple[str, str]] | str, source: str | None = None):
        if isinstance(problems, str):
            problems = [("", problems)]
        self.problems = problems
        self.source = source
        where = f"{source}: " if source else ""
        lines = [f"{where}{key}: {msg}" if key else f"{where}{msg}" for key, msg in problems]
        super().__init__("\n".join(lines))


class ClusterError(MirrorflowError):
    """A Kafka cluster could not be used: unreachable, wrong credentials, not authorized."""

    def __init__(self, alias: str, message: str):
        self.alias, self.detail = alias, message
        super().__init__(f"cluster {alias!r}: {message}")


class UnreachableError(ClusterError):
    """No broker of the cluster answered (a restart, maintenance, or a wrong address): a run waits
    for it up to broker.outage.max.seconds; a one-off command reports it at once."""


class AuthenticationError(ClusterError):
    """A cluster refused who we are: wrong SASL password, rejected or expired OAuth token, an
    untrusted broker certificate or a client certificate the broker rejects (TLS handshake)."""


class TransientError(ClusterError):
    """A call failed for a reason a broker coming back cures (a connection reset in the middle of a
    request, a leadership or coordinator move, a broker loading), after the caller's own short
    retries: a checkpoint pass tries the step again up to broker.outage.max.seconds; a one-off
    command reports it."""


class BrokerUnavailableError(ClusterError):
    """A cluster did not answer for longer than broker.outage.max.seconds (a restart or a
    leadership move that did not end in time); shorter outages are ridden through. `final` False:
    the bound was a call's own timeout, shorter than that; a caller riding out outages tries again."""

    def __init__(self, alias: str, message: str, final: bool = True):
        super().__init__(alias, message)
        self.final = final


class TransactionAbortedError(MirrorflowError):
    """A copy transaction was lost to a broker outage (it had to be aborted); the unit resumes
    from its committed progress with a new producer, up to broker.outage.max.seconds."""


class TransactionTimeoutError(TransactionAbortedError):
    """The target broker aborted a copy transaction that stayed open longer than
    transaction.timeout.ms (not another attempt fencing this one)."""


class TopicError(MirrorflowError):
    """A topic is missing, too small or otherwise unusable for the requested operation."""


class RecordTooLargeError(MirrorflowError):
    """A source record is larger than the target accepts; nothing past it was marked done."""


class FencedError(MirrorflowError):
    """Another attempt owns this source partition now (its producer fenced ours)."""


class StateError(MirrorflowError):
    """The replication state on the target is missing, unreadable or inconsistent."""


class LeaseError(MirrorflowError):
    """Another run of the flow holds its lease (or this run lost it): try again later."""

    exit_code = 75  # EX_TEMPFAIL


class DeploymentConflictError(MirrorflowError):
    """The flow's state on the target belongs to another mirrorflow deployment (state.lease): not a
    wait-and-retry like LeaseError; a run fails until the configs differ (state.namespace)."""

    exit_code = 2
