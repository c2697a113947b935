"""Kafka client plumbing that knows nothing of flows: connecting with one clear error per failure,
reading a partition to its end, and topic helpers (existence, creation, offsets, bulk produce).

Owns: `connection` (building a client from librdkafka settings and naming failures by cluster),
`log_reader` (the one "read to the end" loop), `topic_admin` (topic and offset helpers).
May import: `mirrorflow.errors` only.
"""
