"""WHEN: one bound of a range of source records, as a user gives it to a backfill, an Airflow backfill of
the replicate DAG or a verify: `earliest` (the source log start), `latest` (the source end), `start`
(where the flow's copy of the partition begins: the lowest offset of its ledger), `offset:N`, or an
ISO-8601 time with a zone (the first offset whose timestamp is at or after it). Pure, and light: the
operations' inputs (ops.inputs) take its help and pattern when a DAG file is parsed."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from mirrorflow.errors import ConfigError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
WHEN_HELP = (
    "earliest (source log start), latest (source end), start (where the flow's copy began), "
    "offset:N, or an ISO-8601 time with a zone, e.g. 2026-01-01T00:00:00Z"
)
# what the DAG's Params form accepts (JSON-schema pattern, checked in the form before any task runs)
WHEN_PATTERN = (
    r"^(earliest|latest|start|offset:[0-9]+|"
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?(Z|[+-][0-9]{2}:?[0-9]{2}))$"
)


@dataclass(frozen=True)
class When:
    """One bound of a range of source records (a backfill's, a verify's window), before it is resolved to an
    offset per partition."""

    kind: str  # earliest | latest | start | offset | time
    value: int = 0  # the offset, or the time in ms since the epoch

    @classmethod
    def parse(cls, text: str | None, option: str) -> When:
        """ConfigError naming the option for anything but the documented forms."""
        v = (text or "").strip()
        if v in ("earliest", "latest", "start"):
            return cls(v)
        if v.startswith("offset:"):
            n = v[7:].strip()
            if n.isdigit():
                return cls("offset", int(n))
            raise ConfigError([(option, f"offset:N needs a non-negative integer N, got {text!r}")])
        try:
            dt = datetime.fromisoformat(v.replace("Z", "+00:00")) if v[:4].isdigit() else None
        except ValueError:
            dt = None
        if dt is None:
            raise ConfigError([(option, f"expected {WHEN_HELP}; got {text!r}")])
        if dt.tzinfo is None:
            raise ConfigError([(option, f"the time {text!r} needs a time zone (e.g. {v}Z for UTC)")])
        return cls("time", (dt - EPOCH) // timedelta(milliseconds=1))

    def __str__(self) -> str:
        if self.kind == "offset":
            return f"offset:{self.value}"
        if self.kind == "time":
            return (EPOCH + timedelta(milliseconds=self.value)).isoformat(timespec="milliseconds")
        return self.kind


def check_range(lo: When, hi: When, lo_option: str, hi_option: str) -> None:
    """ConfigError naming both options when [lo, hi) is a reversed (or empty) range of offsets or of times:
    such a backfill or verify would say "0 records" and look done. (A start at `latest` is left alone: the
    drill's verify from `latest` is its way of checking nothing.)"""
    if lo.kind == hi.kind and lo.kind in ("offset", "time") and lo.value >= hi.value:
        raise ConfigError([(lo_option, f"{lo} is not before {hi_option} {hi}: the range [{lo}, {hi}) is empty")])


def topic_pattern(topics: str | None, option: str = "--topics") -> re.Pattern[str] | None:
    """The topics regex (full match on SOURCE topic names), or one clear ConfigError naming `option`."""
    if not topics:
        return None
    try:
        return re.compile(topics)
    except re.error as exc:
        raise ConfigError([(option, f"not a valid regular expression ({exc}): {topics!r}")]) from None
