"""The checkpoints already written: MM2's CheckpointStore, and its "never backwards" guard.

The store is the newest checkpoint per (group, downstream topic, partition), read back from
`<source>.checkpoints.internal` on the target; `plan_checkpoints` applies MirrorCheckpointTask's
monotonicity guard to a pass's translations (a checkpoint never moves back unless the source
group rewound).
"""

from __future__ import annotations

from collections.abc import Iterable

from mirrorflow.clients import FlowClients
from mirrorflow.errors import TopicError
from mirrorflow.groups.translation import NOT_REPLICATED, TranslatedOffset
from mirrorflow.kafka.log_reader import read_partition
from mirrorflow.mm2.filters import FlowFilters
from mirrorflow.mm2.formats import Checkpoint, FormatError

EMIT_ACTIONS = ("new", "advanced", "rewound")


class CheckpointStore:
    """The newest checkpoint per (group, downstream topic, partition), as MM2's CheckpointStore.

    Loaded by reading the checkpoints topic on the target from the beginning; records that do not
    decode are skipped (and counted), as MM2 skips them. Only a topic the cluster's metadata says
    does not exist is an empty store (first use); a read that fails otherwise raises, also one whose
    client said "unknown topic" after a connection reset: read as empty, the guard would let a
    checkpoint go backwards.
    """

    def __init__(self, checkpoints: Iterable[Checkpoint] = (), skipped: int = 0) -> None:
        self.latest: dict[tuple[str, str, int], Checkpoint] = {}
        # the same checkpoints by group: for_group() without a scan of every group's (O(groups^2))
        self._by_group: dict[str, dict[tuple[str, int], Checkpoint]] = {}
        self.skipped = skipped
        for c in checkpoints:
            self.update(c)

    @classmethod
    def load(cls, clients: FlowClients) -> CheckpointStore:
        flow = clients.flow
        topic = FlowFilters.for_flow(flow).policy.checkpoints_topic(flow.source)
        try:
            records = read_partition(
                clients.connection("target"),
                topic,
                0,
                timeout=clients.admin_timeout,
                consumer_conf=clients.overrides("target", "consumer"),
            )
        except TopicError:  # the cluster's metadata says there is no such topic (LogReader): first use
            return cls()
        cps: list[Checkpoint] = []
        skipped = 0
        for r in records:
            try:
                cps.append(Checkpoint.decode(r.key, r.value))
            except FormatError:
                skipped += 1
        return cls(cps, skipped)

    def update(self, c: Checkpoint) -> None:
        self.latest[(c.group, c.topic, c.partition)] = c
        self._by_group.setdefault(c.group, {})[(c.topic, c.partition)] = c

    def previous(self, c: Checkpoint) -> Checkpoint | None:
        return self.latest.get((c.group, c.topic, c.partition))

    def decide(self, c: Checkpoint) -> str:
        """MM2's monotonicity guard (MirrorCheckpointTask.checkpointsForGroup). Emitting actions:
        new, advanced, rewound; skipping: `unchanged` (same downstream position) and `held` (would
        move the target position back although the source group did not rewind)."""
        return self.decide_after(c, self.previous(c))

    @staticmethod
    def decide_after(c: Checkpoint, prev: Checkpoint | None) -> str:
        """`decide` with the previous checkpoint already looked up."""
        if prev is None:
            return "new"
        if c.upstream_offset < prev.upstream_offset:
            return "rewound"
        if c.downstream_offset > prev.downstream_offset:
            return "advanced"
        if c.downstream_offset == prev.downstream_offset:
            return "unchanged"
        return "held"

    def groups(self) -> list[str]:
        return sorted(self._by_group)

    def for_group(self, group: str) -> dict[tuple[str, int], Checkpoint]:
        return dict(self._by_group.get(group, {}))


def plan_checkpoints(
    store: CheckpointStore, rows: Iterable[TranslatedOffset]
) -> tuple[list[tuple[TranslatedOffset, str]], list[Checkpoint]]:
    """Apply the monotonicity guard to translated offsets (pure): (row, action) pairs and the
    checkpoints to write. Rows without a translation get action `no-translation` or
    `not-replicated`."""
    decided: list[tuple[TranslatedOffset, str]] = []
    emit: list[Checkpoint] = []
    for row in rows:
        cp = row.checkpoint()
        if cp is None:
            decided.append((row, NOT_REPLICATED if row.status == NOT_REPLICATED else "no-translation"))
            continue
        prev = store.previous(cp)
        action = store.decide_after(cp, prev)
        if action == "held" and row.reordered and prev is not None and cp.upstream_offset > prev.upstream_offset:
            # a backfill put older records after newer ones: a group moving on from the backfilled
            # range into the live one lands lower on the target, exactly; not a regression to hold
            action = "advanced"
        decided.append((row, action))
        if action in EMIT_ACTIONS:
            emit.append(cp)
    return decided, emit
