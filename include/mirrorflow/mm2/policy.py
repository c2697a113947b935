"""Replication policies: how remote topics are named, and how a name tells where it came from.

A port of MirrorMaker 2's DefaultReplicationPolicy and IdentityReplicationPolicy
(connect/mirror-client), including Java's String.split semantics in `topic_source`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mirrorflow.errors import ConfigError

HEARTBEATS = "heartbeats"


def _java_split(s: str, sep: str) -> list[str]:
    """Java's String.split(Pattern.quote(sep)): trailing empty pieces are dropped."""
    parts = s.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


@dataclass(frozen=True)
class DefaultReplicationPolicy:
    """Remote topics are `<source><sep><topic>`, so their origin can be read back from the name."""

    separator: str = "."
    internal_separator_enabled: bool = True

    @property
    def internal_separator(self) -> str:
        return self.separator if self.internal_separator_enabled else "."

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str | None) -> str | None:
        if topic is None:
            return None
        parts = _java_split(topic, self.separator)
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str | None) -> str | None:
        source = self.topic_source(topic)
        if source is None:
            return None
        assert topic is not None
        return topic[len(source) + len(self.separator) :]

    def original_topic(self, topic: str) -> str:
        current = topic
        while True:
            up = self.upstream_topic(current)
            if up is None or up == current:
                return current
            current = up

    def heartbeats_topic(self) -> str:
        return HEARTBEATS

    def checkpoints_topic(self, cluster_alias: str) -> str:
        s = self.internal_separator
        return f"{cluster_alias}{s}checkpoints{s}internal"

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        s = self.internal_separator
        return f"mm2-offset-syncs{s}{cluster_alias}{s}internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.original_topic(topic) == HEARTBEATS

    def is_checkpoints_topic(self, topic: str) -> bool:
        s = self.internal_separator
        return topic.endswith(f"{s}checkpoints{s}internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(f"{self.internal_separator}internal")

    def is_internal_topic(self, topic: str) -> bool:
        return (
            self.is_mm2_internal_topic(topic)
            or topic.startswith("__")
            or topic.startswith(".")
            or topic.endswith("-internal")
            or topic.endswith(".internal")
        )

    def is_cycle(self, topic: str, target_alias: str) -> bool:
        """True if `topic` already came from `target_alias` (MirrorSourceConnector.isCycle)."""
        current: str | None = topic
        while current is not None:
            source = self.topic_source(current)
            if source is None:
                return False
            if source == target_alias:
                return True
            up = self.upstream_topic(current)
            if up is None or up == current:
                return False
            current = up
        return False


@dataclass(frozen=True)
class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Remote topics keep their names (migrations). Cycles cannot be detected from names, so
    mirrorflow refuses a configuration where identity flows form a cycle."""

    source_cluster_alias: str | None = None

    @staticmethod
    def _looks_like_heartbeat(topic: str | None) -> bool:
        return topic is not None and topic.endswith(HEARTBEATS)

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self._looks_like_heartbeat(topic):
            return super().format_remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str | None) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().topic_source(topic)
        return self.source_cluster_alias

    def upstream_topic(self, topic: str | None) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().upstream_topic(topic)
        return topic


POLICY_CLASSES = {
    "DefaultReplicationPolicy": DefaultReplicationPolicy,
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": DefaultReplicationPolicy,
    "IdentityReplicationPolicy": IdentityReplicationPolicy,
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": IdentityReplicationPolicy,
    "io.strimzi.kafka.connect.mirror.IdentityReplicationPolicy": IdentityReplicationPolicy,  # Strimzi's pre-3.0 port
    "default": DefaultReplicationPolicy,
    "identity": IdentityReplicationPolicy,
}


def policy_from_props(props: dict[str, Any], source_alias: str | None = None) -> DefaultReplicationPolicy:
    """The policy a flow's (or a client's) properties describe, configured as MM2 configures it."""
    name = str(props.get("replication.policy.class", "DefaultReplicationPolicy"))
    cls = POLICY_CLASSES.get(name)
    if cls is None:
        raise ConfigError(
            [
                (
                    "replication.policy.class",
                    f"unknown replication policy {name!r} (use DefaultReplicationPolicy or IdentityReplicationPolicy)",
                )
            ]
        )
    sep = str(props.get("replication.policy.separator", ".")) or "."
    internal = props.get("replication.policy.internal.topic.separator.enabled", True)
    internal = internal if isinstance(internal, bool) else str(internal).lower() == "true"
    if cls is IdentityReplicationPolicy:
        return IdentityReplicationPolicy(sep, internal, source_alias)
    return DefaultReplicationPolicy(sep, internal)


def flow_policy(flow: Any) -> DefaultReplicationPolicy:
    """The policy of a FlowConfig, configured with its source alias as MM2's connectors do."""
    return policy_from_props(flow.props, flow.source)
