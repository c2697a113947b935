"""Which topics, groups and topic-config properties a flow replicates (MM2's default filters).

Each include/exclude property is a list of regexes joined with `|` and matched against the
whole name (Java's Pattern.matches, i.e. re.fullmatch). An empty list matches nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mirrorflow.mm2.policy import DefaultReplicationPolicy, flow_policy


def compile_list(patterns: list[str]) -> re.Pattern[str] | None:
    """MirrorUtils.compilePatternList: None (match nothing) for an empty list."""
    return re.compile("|".join(patterns)) if patterns else None


def _matches(p: re.Pattern[str] | None, name: str) -> bool:
    return p is not None and p.fullmatch(name) is not None


@dataclass(frozen=True)
class TopicFilter:
    include: re.Pattern[str] | None
    exclude: re.Pattern[str] | None

    def should_replicate_topic(self, topic: str) -> bool:
        return _matches(self.include, topic) and not _matches(self.exclude, topic)


@dataclass(frozen=True)
class GroupFilter:
    include: re.Pattern[str] | None
    exclude: re.Pattern[str] | None

    def should_replicate_group(self, group: str) -> bool:
        return _matches(self.include, group) and not _matches(self.exclude, group)


@dataclass(frozen=True)
class ConfigPropertyFilter:
    exclude: re.Pattern[str] | None
    use_defaults_from_source: bool = False

    def should_replicate_config_property(self, name: str) -> bool:
        return not _matches(self.exclude, name)

    def should_replicate_source_default(self, name: str) -> bool:
        return self.use_defaults_from_source


@dataclass(frozen=True)
class FlowFilters:
    """Everything that decides what one flow replicates (MirrorSourceConnector.shouldReplicateTopic)."""

    source: str
    target: str
    policy: DefaultReplicationPolicy
    topics: TopicFilter
    groups: GroupFilter
    configs: ConfigPropertyFilter
    heartbeats_replication: bool = True

    @classmethod
    def for_flow(cls, flow: Any) -> FlowFilters:
        p = flow.props
        return cls(
            source=flow.source,
            target=flow.target,
            policy=flow_policy(flow),
            topics=TopicFilter(compile_list(p["topics"]), compile_list(p["topics.exclude"])),
            groups=GroupFilter(compile_list(p["groups"]), compile_list(p["groups.exclude"])),
            configs=ConfigPropertyFilter(
                compile_list(p["config.properties.exclude"]), str(p.get("use.defaults.from", "target")) == "source"
            ),
            heartbeats_replication=bool(p.get("heartbeats.replication.enabled", True)),
        )

    def should_replicate_topic(self, topic: str) -> bool:
        chosen = self.topics.should_replicate_topic(topic) or (
            self.heartbeats_replication and self.policy.is_heartbeats_topic(topic)
        )
        return chosen and not self.policy.is_internal_topic(topic) and not self.policy.is_cycle(topic, self.target)

    def should_replicate_group(self, group: str) -> bool:
        return self.groups.should_replicate_group(group)

    def remote_topic(self, topic: str) -> str:
        return self.policy.format_remote_topic(self.source, topic)
