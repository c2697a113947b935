"""A subject's name on the target, by the flow's replication policy, as its topics are named.

Subjects of Confluent's default TopicNameStrategy (`<topic>-key`, `<topic>-value`) follow their topic:
`orders-value` on A is `A.orders-value` on B under DefaultReplicationPolicy (the subject of the remote topic
`A.orders`), `orders-value` under IdentityReplicationPolicy. Any other subject (RecordNameStrategy's
`com.acme.Order`, a subject only referenced) is renamed as a whole, the way a topic of that name would be
(`A.com.acme.Order`), so two sources aggregated into one target never meet under one name.
"""

from __future__ import annotations

from mirrorflow.mm2.policy import DefaultReplicationPolicy

SUFFIXES = ("-key", "-value")


def topic_of(subject: str) -> str | None:
    """The topic a TopicNameStrategy subject belongs to (None: not such a subject)."""
    for suffix in SUFFIXES:
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return None


def remote_subject(policy: DefaultReplicationPolicy, source_alias: str, subject: str) -> str:
    topic = topic_of(subject)
    if topic is None:
        return policy.format_remote_topic(source_alias, subject)
    return policy.format_remote_topic(source_alias, topic) + subject[len(topic) :]


def subject_source(policy: DefaultReplicationPolicy, subject: str) -> str | None:
    """The cluster a target subject came from, read from its name as the policy reads a topic's."""
    return policy.topic_source(topic_of(subject) or subject)
