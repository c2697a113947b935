"""What `config import` does with each MirrorMaker 2, Kafka Connect and Strimzi name: left out and why,
renamed, deprecated, the exactly-once values, the policy class names. The compatibility table
(`config.compat`, docs/mm2-compatibility.md) is generated from these tables.
"""

from __future__ import annotations

# Settings that exist in MM2 deployments but have no effect here, with why (shown as comments).
# MM2 flow properties mirrorflow refuses are in properties.REFUSED (left out with that reason).
IGNORED: dict[str, str] = {
    "config.storage.replication.factor": "a Kafka Connect worker setting",
    "offset.storage.replication.factor": "a Kafka Connect worker setting",
    "status.storage.replication.factor": "a Kafka Connect worker setting",
    "config.storage.topic": "a Kafka Connect worker setting",
    "offset.storage.topic": "a Kafka Connect worker setting",
    "status.storage.topic": "a Kafka Connect worker setting",
    "key.converter": "records are copied as bytes",
    "value.converter": "records are copied as bytes",
    "header.converter": "records are copied as bytes",
    "dedicated.mode.enable.internal.rest": "no Connect REST server here",
    "group.id": "a Kafka Connect worker setting (the workers' group); mirrorflow's readers name their own groups",
    "plugin.discovery": "a Kafka Connect worker setting: there are no plugins to discover",
    "listeners": "a Kafka Connect worker setting: no Connect REST server here",
    "name": "a connector's name: a flow is named SOURCE->TARGET",
    "connector.class": "a connector's class: a flow runs all three MM2 concerns (copy, checkpoints, heartbeats)",
    "source.cluster.alias": "a connector's source alias: the flow's name SOURCE->TARGET says it",
    "target.cluster.alias": "a connector's target alias: the flow's name SOURCE->TARGET says it",
    "offset.flush.interval.ms": "a Kafka Connect worker setting: progress is committed with each transaction "
    "(its value becomes transaction.boundary.interval.ms when transaction.boundary=interval sets none)",
    "offset.flush.timeout.ms": "a Kafka Connect worker setting: progress is committed inside each copy "
    "transaction, there is no separate offset flush to wait for",
    "offset.storage.partitions": "a Kafka Connect worker setting: progress lives in the flow's state topics "
    "(state.topic.partitions)",
    "status.storage.partitions": "a Kafka Connect worker setting: runs are logged in the flow's state topics",
    "offset.storage.file.filename": "a standalone Kafka Connect worker setting: progress lives in the flow's "
    "state topics on the target",
    "plugin.path": "a Kafka Connect worker setting: there are no plugins to load",
    "rest.advertised.host.name": "a Kafka Connect worker setting: no Connect REST server here",
    "rest.advertised.port": "a Kafka Connect worker setting: no Connect REST server here",
    "rest.advertised.listener": "a Kafka Connect worker setting: no Connect REST server here",
    "connect.protocol": "a Kafka Connect worker setting: no Connect workers to rebalance; Airflow schedules the runs",
    "scheduled.rebalance.max.delay.ms": "a Kafka Connect worker setting: no Connect workers to rebalance; "
    "Airflow schedules the runs",
    "task.shutdown.graceful.timeout.ms": "a Kafka Connect worker setting: a stopped run's copy job ends with it, "
    "its open transaction fenced by the next run",
}
# Kafka Connect's exactly-once settings (KIP-618): their value decides mirrorflow's exactly.once.
EXACTLY_ONCE_VALUES: dict[str, dict[str, bool]] = {
    "exactly.once.source.support": {"enabled": True, "preparing": False, "disabled": False},
    "exactly.once.support": {"required": True, "requested": True},
}
# MM2 properties imported under mirrorflow's name for the same thing.
RENAMED: dict[str, tuple[str, str]] = {
    "offset-syncs.topic.replication.factor": (
        "state.topic.replication.factor",
        "mirrorflow's exact offset map, kept in the flow's state topics, replaces offset syncs",
    ),
}
IGNORED_PREFIXES = (
    "key.converter.",
    "value.converter.",
    "header.converter.",
    "admin.override.",
    "connector.client.config.override.policy",
    "metric.reporters",
    "source.cluster.",
    "target.cluster.",
)

DEPRECATED = {
    "topics.blacklist": "topics.exclude",
    "groups.blacklist": "groups.exclude",
    "config.properties.blacklist": "config.properties.exclude",
    "topics.whitelist": "topics",
    "groups.whitelist": "groups",
}

POLICY_NAMES = {
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": "DefaultReplicationPolicy",
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": "IdentityReplicationPolicy",
    "io.strimzi.kafka.connect.mirror.IdentityReplicationPolicy": "IdentityReplicationPolicy",
}

# What `config import` does with each KafkaMirrorMaker2 field (docs/mm2-compatibility.md is generated
# from this): (verdict, what mirrorflow does). Fields marked "different" are left out with a note.
STRIMZI_FIELDS: dict[str, tuple[str, str]] = {
    "spec.clusters[].alias": ("same", "the cluster's alias under `clusters`"),
    "spec.clusters[].bootstrapServers": ("mapped", "clusters.<alias>.bootstrap.servers"),
    "spec.clusters[].tls.trustedCertificates": (
        "mapped",
        "security.protocol SSL/SASL_SSL and ssl.ca.location (mount the Secret's certificate at the noted path)",
    ),
    "spec.clusters[].authentication": (
        "mapped",
        "tls: ssl.certificate.location + ssl.key.location; scram-sha-256/512, plain: sasl.mechanism, "
        "sasl.username and sasl.password as ${env:...} (the Secret's value is never copied); "
        "oauth: sasl.mechanism OAUTHBEARER, the token settings left to you",
    ),
    "spec.clusters[].config": (
        "mapped",
        "librdkafka client settings of the cluster; Kafka Connect worker settings (group.id, *.storage.*) "
        "are left out with a note",
    ),
    "spec.connectCluster": ("different", "no Kafka Connect cluster: state lives on each flow's target"),
    "spec.replicas": ("different", "no Connect workers: Airflow schedules the runs, Spark runs the copy"),
    "spec.version": ("different", "mirrorflow's own release; any Kafka with transactions (0.11+) works"),
    "spec.mirrors[].sourceCluster": ("mapped", "the flow SOURCE->TARGET"),
    "spec.mirrors[].targetCluster": ("mapped", "the flow SOURCE->TARGET"),
    "spec.mirrors[].topicsPattern": ("mapped", "topics"),
    "spec.mirrors[].groupsPattern": ("mapped", "groups"),
    "spec.mirrors[].topicsExcludePattern": ("mapped", "topics.exclude"),
    "spec.mirrors[].groupsExcludePattern": ("mapped", "groups.exclude"),
    "spec.mirrors[].sourceConnector.config": ("mapped", "the flow's properties (as in an mm2.properties)"),
    "spec.mirrors[].checkpointConnector.config": ("mapped", "the flow's properties (as in an mm2.properties)"),
    "spec.mirrors[].heartbeatConnector.config": ("mapped", "the flow's properties (as in an mm2.properties)"),
    "spec.mirrors[].sourceConnector.tasksMax": ("mapped", "tasks.max (copy units per wave)"),
    "spec.mirrors[].checkpointConnector.tasksMax": (
        "different",
        "one checkpoint pass per flow per DAG run; tasks.max bounds the copy only",
    ),
    "spec.mirrors[].*Connector.state": (
        "mapped",
        "sourceConnector: the flow's `state` (running/paused/stopped); checkpoint/heartbeat connector: "
        "noted (they stop only with the whole flow)",
    ),
    "spec.mirrors[].*Connector.pause": ("mapped", "deprecated: `pause: true` is the state paused"),
    "spec.mirrors[].*Connector.autoRestart*": (
        "different",
        "autoRestart (enabled, maxRestarts): Airflow retries failed tasks (retries in the DAGs) and the next "
        "scheduled run continues; there is no restart count",
    ),
    "spec.resources": ("different", "Airflow worker and Spark executor resources (spark.conf) instead"),
    "spec.logging": ("different", "Airflow task logs and Python logging"),
    "spec.readinessProbe": ("different", "no long-running server: `mirrorflow status` and the DAG states"),
    "spec.livenessProbe": ("different", "no long-running server: `mirrorflow status` and the DAG states"),
    "spec.jvmOptions": ("different", "no JVM of mirrorflow's own (Spark's: spark.conf)"),
    "spec.image": ("different", "mirrorflow is a Python package in the Airflow image"),
    "spec.rack": ("different", "librdkafka's client.rack in clusters.<alias> (fetch from the closest replica)"),
    "spec.template": ("different", "Kubernetes pod templates belong to the Airflow deployment"),
    "spec.tracing": ("different", "Airflow's OpenTelemetry integration"),
    "metadata.annotations[strimzi.io/restart-connector]": (
        "different",
        "nothing to restart: trigger the DAG, or `mirrorflow replicate --once`",
    ),
    "metadata.annotations[strimzi.io/restart-connector-task]": (
        "different",
        "nothing to restart: a failed copy unit is retried by the next run from its committed progress",
    ),
}
