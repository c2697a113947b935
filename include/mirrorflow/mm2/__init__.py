"""What any MirrorMaker 2 client needs, as Kafka's `connect/mirror-client` module holds it.

Owns: replication policies (`policy`), topic/group/config-property filters (`filters`), the binary
record formats of checkpoints, heartbeats and offset syncs (`formats`), the RemoteClusterUtils /
MirrorClient API (`remote_cluster`), which applications use to fail over without the replicator,
and where MM2 keeps its source positions in Kafka Connect's offsets topic (`connect_offsets`).
May import: `mirrorflow.errors` and `mirrorflow.kafka` (client plumbing) only.
"""
