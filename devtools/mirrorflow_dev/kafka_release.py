"""What differs between the Apache Kafka releases the local clusters run: 3.9.0 up to 4.4.x.

The floor is 3.9: the first release whose storage tool formats a single-node dynamic KRaft quorum
(`format --standalone`, KIP-853), which every local cluster uses; 3.9 is also the last 3.x release
(no ZooKeeper here). Read from the releases' own jars (`kafka-storage format --help`,
`kafka-storage version-mapping`, the broker's logged config), what a local cluster must do
differently:

* Java: 3.9 brokers run on Java 11+, 4.x brokers on 17+ (KIP-750/KIP-1013).
* Share groups (KIP-932) came with 4.0 (preview in 4.1, on by default from 4.2): their coordinator's
  internal topic must be sized for one broker (replication factor 1) from 4.0 on; 3.9 has no such
  settings and would only warn about them.
* Everything else a new cluster takes from its release's defaults when it is formatted: 4.x
  clusters finalize `transaction.version` 2 (KIP-890's server-side defence: a new producer epoch per
  transaction for clients that support it) and `group.version` 1 (KIP-848's consumer group protocol
  served beside the classic one); 3.9 brokers know neither feature (only `metadata.version` 3.9-IV0
  and `kraft.version`): transactions and groups as 3.x clients know them. `docs/kafka-versions.md`
  says what that means for a flow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mirrorflow_dev.errors import DevClusterError

DEFAULT_VERSION = "4.3.1"  # what `dev up` runs unless told, and the whole test suite
OLDEST, NEWEST = (3, 9), (4, 4)  # the supported range, as (major, minor)
# the releases the version matrix (tests/integration/test_kafka_versions.py) runs beside the default;
# scripts/bootstrap fetches their jars once, so the suite needs no network afterwards
MATRIX_VERSIONS = ("3.9.2", "4.4.0")
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


@dataclass(frozen=True, order=True)
class KafkaRelease:
    major: int
    minor: int
    patch: int

    @classmethod
    def parse(cls, text: str) -> KafkaRelease:
        """`3.9.2` -> its release; a clear error for anything the local clusters cannot run."""
        m = _VERSION.match(text.strip())
        if not m:
            raise DevClusterError(f"Kafka version {text!r} is not a release number like {DEFAULT_VERSION}")
        release = cls(*(int(g) for g in m.groups()))
        if not OLDEST <= (release.major, release.minor) <= NEWEST:
            raise DevClusterError(
                f"Kafka {release} is outside the range the local clusters run: {supported_range()} "
                "(3.9 is the first release that formats a single-node KRaft quorum with --standalone)"
            )
        return release

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def min_java(self) -> int:
        return 11 if self.major < 4 else 17

    def broker_properties(self) -> dict[str, str]:
        """The settings of a single-node cluster that only this release knows."""
        if self.major < 4:
            return {}
        return {
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "share.coordinator.state.topic.num.partitions": "1",
        }


def supported_range() -> str:
    return f"{OLDEST[0]}.{OLDEST[1]}.0 to {NEWEST[0]}.{NEWEST[1]}.x"


def default_release() -> KafkaRelease:
    return KafkaRelease.parse(DEFAULT_VERSION)
