"""Kafka client plumbing that knows nothing of flows: connecting with one clear error per failure,
riding through broker outages, reading a partition to its end, topic and ACL administration.

Owns: `connection` (building a client from librdkafka settings and naming failures by cluster),
`retry` (which failures are transient, and the bounded wait for them), `log_reader` (the one "read
to the end" loop), `topic_admin` (existence, creation, offsets and topic ids, the acknowledged bulk
produce), `acl_admin` (`AclBinding`, the one ACL value type; describing and creating ACLs).
May import: `mirrorflow.errors` only.
"""
