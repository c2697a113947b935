"""A local broker's files and command lines: server.properties for its security kind and Kafka
release, its secrets and certificates, the storage format and the JVM that runs it.

Every cluster is one combined broker+controller node on 127.0.0.1 with a single-node dynamic KRaft
quorum (`controller.quorum.bootstrap.servers` and `format --standalone`, from Kafka 3.9 on), every
internal topic sized for one broker. Certificates come from a per-cluster CA (`certs.DevCA`).
"""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path

from mirrorflow_dev import class_archive
from mirrorflow_dev.certs import DevCA
from mirrorflow_dev.dev_cluster import SECURITY_KINDS, TEST_USERS, DevCluster

BROKER_PRINCIPAL = "broker"  # CN of the broker's certificate: its principal on an mTLS listener

LOG4J = """status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
"""

JVM_PERF = [
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
]


def kafka_uuid() -> str:
    """A Kafka cluster id: URL-safe Base64 of a random UUID, not starting with '-'."""
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not s.startswith("-"):
            return s


def format_command(c: DevCluster, java: str, libs: Path, base: Path, logs: Path) -> list[str]:
    """The storage tool's `format` of the node's data folder as a single-node dynamic quorum."""
    cmd = [
        java,
        "-Xmx256m",
        "-XX:TieredStopAtLevel=1",
        f"-Dkafka.logs.dir={logs}",
        f"-Dlog4j2.configurationFile={base / 'log4j2.properties'}",
        "-cp",
        f"{libs}/*",
        "kafka.tools.StorageTool",
        "format",
        "--cluster-id",
        kafka_uuid(),
        "--config",
        str(base / "server.properties"),
        "--standalone",
    ]
    if c.security == "scram":  # KRaft: the broker's own login must exist before it starts
        cmd += ["--add-scram", f"SCRAM-SHA-512=[name=admin,password={c.users['admin']}]"]
    return cmd


def broker_command(java: str, libs: Path, base: Path, logs: Path, classes: list[str] | None = None) -> list[str]:
    """The JVM of the broker on its prepared files (same ports, same data on every start). `classes`: its
    class-data-sharing options, by default those that map the release's archive when one was made."""
    return [
        java,
        "-Xms256m",
        "-Xmx768m",
        *JVM_PERF,
        *(class_archive.options(java, libs) if classes is None else classes),
        f"-Dkafka.logs.dir={logs}",
        f"-Dlog4j2.configurationFile={base / 'log4j2.properties'}",
        "-cp",
        f"{libs}/*",
        "kafka.Kafka",
        str(base / "server.properties"),
    ]


def write_files(c: DevCluster, base: Path, data: Path) -> None:
    """server.properties (0600: it may hold passwords), the log4j2 config, secrets and certificates."""
    _write_secrets(c, base)
    props = base / "server.properties"
    props.write_text(server_properties(c, data))
    os.chmod(props, 0o600)
    (base / "log4j2.properties").write_text(LOG4J)


def server_properties(c: DevCluster, data: Path) -> str:
    common = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{c.controller_port}",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": str(data),
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        **c.release.broker_properties(),
        "min.insync.replicas": "1",
        "default.replication.factor": "1",
        "group.initial.rebalance.delay.ms": "0",
        "metadata.max.idle.interval.ms": "5000",  # an idle cluster's no-op metadata records: 2.5% -> 1.9% of a core
        "log.segment.bytes": str(64 * 1024 * 1024),
        "log.cleaner.backoff.ms": "1000",
        "log.retention.check.interval.ms": "1000",
        "log.initial.task.delay.ms": "0",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "5000",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "60000",
        "auto.create.topics.enable": "false",
    }
    if c.security not in ("plaintext", "plain"):
        common.update(_secure_listener(c))
    elif c.sasl:
        users = " ".join(f'user_{u}="{p}"' for u, p in c.users.items())
        common.update(
            {
                "listeners": f"BROKER://127.0.0.1:{c.port},CONTROLLER://127.0.0.1:{c.controller_port}",
                "advertised.listeners": f"BROKER://127.0.0.1:{c.port},CONTROLLER://127.0.0.1:{c.controller_port}",
                # the controller listener stays PLAINTEXT on loopback; its ANONYMOUS principal is a super user
                "listener.security.protocol.map": "BROKER:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name": "BROKER",
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "listener.name.broker.plain.sasl.jaas.config": "org.apache.kafka.common.security.plain."
                f'PlainLoginModule required username="admin" password="{c.users["admin"]}" {users};',
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:admin;User:ANONYMOUS",
                "allow.everyone.if.no.acl.found": "false",
            }
        )
    else:
        # a proxied listener: what a client that came in on it is told to connect to is the proxy
        extra = ("", "", "")
        if c.proxied_port:
            listen, advertise = f"127.0.0.1:{c.proxied_port}", f"127.0.0.1:{c.proxy_port}"
            extra = (f",PROXIED://{listen}", f",PROXIED://{advertise}", ",PROXIED:PLAINTEXT")
        common.update(
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{c.port},CONTROLLER://127.0.0.1:{c.controller_port}{extra[0]}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{c.port},CONTROLLER://127.0.0.1:{c.controller_port}"
                f"{extra[1]}",
                "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT{extra[2]}",
                "inter.broker.listener.name": "PLAINTEXT",
            }
        )
    # generated without comments: a '#' after a value would become part of it
    return "".join(f"{k}={v}\n" for k, v in common.items())


def _secure_listener(c: DevCluster) -> dict[str, str]:
    """The BROKER listener of a TLS kind (tls, mtls, scram, oauth) and the authorizer. The
    controller listener stays PLAINTEXT on loopback (its ANONYMOUS principal is a super user, so
    on a `tls` cluster, whose clients are anonymous too, every client is one: TLS alone gives
    no identity)."""
    protocol = SECURITY_KINDS[c.security][0]
    listeners = f"BROKER://127.0.0.1:{c.port},CONTROLLER://127.0.0.1:{c.controller_port}"
    keystore = c.tls_dir / f"{BROKER_PRINCIPAL}.keystore.pem"
    props = {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": f"BROKER:{protocol},CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "BROKER",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(c.tls_dir / "ca.pem"),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:admin;User:{BROKER_PRINCIPAL};User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "false",
    }
    if c.security == "mtls":
        props["ssl.client.auth"] = "required"
        # the principal is the certificate's CN (User:admin), not its whole DN
        props["ssl.principal.mapping.rules"] = "RULE:^CN=([^,]+)$/$1/,DEFAULT"
    elif c.security == "scram":
        props["sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
        props["sasl.mechanism.inter.broker.protocol"] = "SCRAM-SHA-512"
        props["listener.name.broker.scram-sha-512.sasl.jaas.config"] = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="admin" password="{c.users["admin"]}";'
        )
    elif c.security == "oauth":
        # no callback handlers configured: Kafka's UNSECURED login and JWS validator (tokens with
        # alg "none", anyone can mint one for any principal). Development only.
        props["sasl.enabled.mechanisms"] = "OAUTHBEARER"
        props["sasl.mechanism.inter.broker.protocol"] = "OAUTHBEARER"
        props["listener.name.broker.oauthbearer.sasl.jaas.config"] = (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredLoginStringClaim_sub="admin";'
        )
    return props


def _write_secrets(c: DevCluster, base: Path) -> None:
    """Password files (0600) and, for TLS kinds, the cluster's CA, broker and user certificates."""
    if c.users:
        folder = base / "secrets"
        folder.mkdir(mode=0o700)
        for user, password in c.users.items():
            fd = os.open(folder / f"{user}.password", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(password)
    if c.ca_location:
        ca = DevCA(c.tls_dir, c.alias)
        ca.keystore(ca.issue(BROKER_PRINCIPAL, server=True))
        if c.security == "mtls":
            for user in ("admin", *TEST_USERS):
                ca.issue(user, password=c.users[user])
