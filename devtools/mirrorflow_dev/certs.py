"""A throw-away certificate authority for local TLS clusters (development and tests only).

Generated with `cryptography` (pyca; already pinned in requirements.txt, where Airflow needs it),
so no keytool/openssl round trips: the broker reads PEM key stores directly
(`ssl.keystore.type=PEM`) and librdkafka reads the same PEM files. Every cluster gets its own CA,
so a client that trusts another cluster's CA fails the handshake exactly as it would in production.
`python -m mirrorflow_dev.certs DIR HOST,...` writes a CA and a broker key store for those host
names (the `secure` profile of docker-compose.yaml runs it). Private keys are written with mode
0600 into the cluster's dev folder; a client key can be encrypted with a password (librdkafka's
`ssl.key.password`), as production client keys are.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 365


@dataclass(frozen=True)
class CertFiles:
    """PEM files of one identity: its certificate and its private key."""

    cert: Path
    key: Path


class DevCA:
    """A CA whose files live in `folder`: `ca.pem` (the trust anchor) and `ca.key`."""

    def __init__(self, folder: Path, name: str) -> None:
        self.folder = folder
        self.name = name
        self.ca_path = folder / "ca.pem"
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"mirrorflow dev CA {name}")])
        now = dt.datetime.now(dt.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        folder.mkdir(parents=True, exist_ok=True)
        _write(self.ca_path, self._cert.public_bytes(serialization.Encoding.PEM), 0o644)

    def issue(
        self,
        common_name: str,
        server: bool = False,
        password: str | None = None,
        hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
    ) -> CertFiles:
        """A certificate `CN=<common_name>` signed by this CA (server: valid for `hosts`, names or IP
        addresses), its key encrypted with `password` if one is given."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([_san(h) for h in hosts]),
                critical=False,
            )
        cert = builder.sign(self._key, hashes.SHA256())
        files = CertFiles(self.folder / f"{common_name}.crt", self.folder / f"{common_name}.key")
        _write(files.cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption(),
        )
        _write(files.key, key_pem, 0o600)
        return files

    def keystore(self, files: CertFiles) -> Path:
        """A PEM key store for the broker: key then certificate chain, as `ssl.keystore.type=PEM` reads it."""
        path = files.cert.with_suffix(".keystore.pem")
        _write(path, files.key.read_bytes() + files.cert.read_bytes() + self.ca_path.read_bytes(), 0o600)
        return path


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def main(argv: list[str]) -> int:
    """`python -m mirrorflow_dev.certs DIR HOST,...`: DIR/ca.pem and DIR/broker.keystore.pem (kept
    if DIR/ca.pem exists already, so a restarted container keeps its clients' trust)."""
    if len(argv) != 2:
        print("usage: python -m mirrorflow_dev.certs DIR HOST[,HOST...]", file=sys.stderr)
        return 2
    folder, hosts = Path(argv[0]), tuple(h for h in argv[1].split(",") if h)
    if (folder / "ca.pem").exists():
        print(f"{folder / 'ca.pem'} exists: keeping the certificates")
        return 0
    ca = DevCA(folder, "compose")
    store = ca.keystore(ca.issue("broker", server=True, hosts=hosts))
    os.chmod(store, 0o644)  # read by the broker container's own user; a development CA only
    print(f"wrote {ca.ca_path} and {store} for {', '.join(hosts)}")
    return 0


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
