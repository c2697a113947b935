"""One local cluster as its clients see it: its address, security kind, users and Kafka release.

A cluster listens with one security kind (`SECURITY_KINDS`): plaintext, or SASL/PLAIN, TLS, mTLS,
SASL_SSL SCRAM-SHA-512 or SASL_SSL OAUTHBEARER (the broker's *unsecured* JWS validator: development
only), each with the StandardAuthorizer: `admin` is the super user mirrorflow connects as, `alice`
and `bob` are ordinary users for tests. Passwords sit in 0600 files of the cluster's folder and are
never printed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mirrorflow_dev.kafka_release import DEFAULT_VERSION, KafkaRelease
from mirrorflow_dev.processes import alive

TEST_USERS = ("alice", "bob")
# security kind -> (listener protocol, what `dev up` prints); "plain" is the older `--sasl`
SECURITY_KINDS = {
    "plaintext": ("PLAINTEXT", ""),
    "plain": ("SASL_PLAINTEXT", "SASL/PLAIN, ACLs enforced"),
    "tls": ("SSL", "TLS (server certificate; clients are User:ANONYMOUS), ACLs enforced"),
    "mtls": ("SSL", "mTLS (principal = certificate CN), ACLs enforced"),
    "scram": ("SASL_SSL", "SASL_SSL SCRAM-SHA-512, ACLs enforced"),
    "oauth": ("SASL_SSL", "SASL_SSL OAUTHBEARER, UNSECURED JWS validator (development only!), ACLs enforced"),
}


@dataclass
class DevCluster:
    alias: str
    port: int
    controller_port: int
    sasl: bool = False  # SASL/PLAIN (kept for state files written before `security`)
    users: dict[str, str] = field(default_factory=dict, repr=False)  # passwords: never in reprs/test output
    pid: int | None = None
    security: str = "plaintext"  # a key of SECURITY_KINDS
    folder: str = ""  # the cluster's dev folder (certificates, password files)
    kafka_version: str = DEFAULT_VERSION  # the Apache Kafka release it runs (state files before it: the default)
    # a second listener (plaintext) on `proxied_port`, advertised at `proxy_port`: clients that bootstrap
    # through a TCP proxy on `proxy_port` (forwarding to `proxied_port`) keep going through it (tests)
    proxy_port: int | None = None
    proxied_port: int | None = None

    def __post_init__(self) -> None:
        if self.sasl and self.security == "plaintext":
            self.security = "plain"
        self.sasl = self.security == "plain"

    @property
    def marker(self) -> str | None:
        """What the broker's command line holds, its server.properties: a recorded pid is signalled or taken
        as running only while it does (processes.alive). None for a state file without the folder."""
        return str(Path(self.folder) / "server.properties") if self.folder else None

    @property
    def release(self) -> KafkaRelease:
        return KafkaRelease.parse(self.kafka_version)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def tls_dir(self) -> Path:
        return Path(self.folder) / "tls"

    @property
    def ca_location(self) -> str | None:
        """The CA file clients must trust (None: no TLS)."""
        return str(self.tls_dir / "ca.pem") if SECURITY_KINDS[self.security][0].endswith("SSL") else None

    def password_file(self, user: str) -> Path:
        return Path(self.folder) / "secrets" / f"{user}.password"

    def client_config(self, user: str = "admin") -> dict[str, str]:
        """librdkafka settings to reach this cluster (as the super user by default). Holds the
        password for SASL kinds: never log it."""
        protocol = SECURITY_KINDS[self.security][0]
        conf = {"bootstrap.servers": self.bootstrap_servers}
        if protocol == "PLAINTEXT":
            return conf
        conf["security.protocol"] = protocol
        if self.ca_location:
            conf["ssl.ca.location"] = self.ca_location
        if self.security == "mtls":
            conf["ssl.certificate.location"] = str(self.tls_dir / f"{user}.crt")
            conf["ssl.key.location"] = str(self.tls_dir / f"{user}.key")
            conf["ssl.key.password"] = self.users[user]
        elif self.security in ("plain", "scram"):
            conf["sasl.mechanism"] = "PLAIN" if self.security == "plain" else "SCRAM-SHA-512"
            conf["sasl.username"] = user
            conf["sasl.password"] = self.users[user]
        elif self.security == "oauth":
            conf["sasl.mechanism"] = "OAUTHBEARER"
            conf["enable.sasl.oauthbearer.unsecure.jwt"] = "true"  # development only
            conf["sasl.oauthbearer.config"] = f"principal={user}"
        return conf

    def status(self) -> dict:
        """What a client needs, secrets by reference only (password files, never passwords)."""
        d: dict = {
            "alias": self.alias,
            "bootstrap.servers": self.bootstrap_servers,
            "kafka.version": self.kafka_version,
            "security": self.security,
            "sasl": self.sasl,
            "pid": self.pid,
            "running": alive(self.pid, self.marker),
        }
        if self.security == "plaintext":
            return d
        d["security.protocol"] = SECURITY_KINDS[self.security][0]
        d["super.user"] = "admin"
        if self.ca_location:
            d["ssl.ca.location"] = self.ca_location
        users: dict[str, dict[str, str]] = {}
        for user in ("admin", *TEST_USERS):
            if self.security in ("plain", "scram"):
                users[user] = {"sasl.username": user, "password.file": str(self.password_file(user))}
            elif self.security == "mtls":
                users[user] = {
                    "principal": f"User:{user}",
                    "ssl.certificate.location": str(self.tls_dir / f"{user}.crt"),
                    "ssl.key.location": str(self.tls_dir / f"{user}.key"),
                    "ssl.key.password.file": str(self.password_file(user)),
                }
            elif self.security == "oauth":
                users[user] = {"principal": f"User:{user}", "sasl.oauthbearer.config": f"principal={user}"}
        if users:
            d["users"] = users
        return d
