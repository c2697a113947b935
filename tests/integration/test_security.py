"""Every path over every listener kind, on real brokers started by `DevClusters`:
sync, replicate through spark-submit, checkpoint + group offset sync and translate across
(a) a TLS source and a SASL_SSL SCRAM-SHA-512 target, (b) an mTLS source (encrypted client key)
and a SASL_SSL OAUTHBEARER target. The secrets are `${env:}` references: the test captures the
CLI's output (with the spark-submit command line), the kept plan/results/report files and the
report, and finds no secret in any of them. A wrong password, an untrusted certificate and an
expired token are each one AuthenticationError naming the cluster.

The clusters (S1 tls, S2 scram, S3 mtls, S4 oauth) are this module's own, in their own dev home,
so no other test's clusters or flow state are touched.
"""

from __future__ import annotations

import base64
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from mirrorflow import config as config_mod
from mirrorflow_dev.certs import DevCA
from mirrorflow_dev.cluster import DevClusters
from mirrorflow_dev.dev_cluster import DevCluster
from mirrorflow.errors import AuthenticationError
from mirrorflow.kafka.connection import ClusterConnection
from mirrorflow.replication.executors.spark import submit_command
from tests.support import admin, consume_all, create_topic, produce

ROOT = Path(__file__).resolve().parents[2]
SECRET_KEYS = ("sasl.password", "ssl.key.password")

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.fixture(scope="module")
def secure_home() -> dict:
    home = Path(tempfile.mkdtemp(prefix="mirrorflow-secure-"))
    dev = DevClusters(home)
    try:
        clusters = dev.up(["S1", "S2", "S3", "S4"], tls=["S1"], scram=["S2"], mtls=["S3"], oauth=["S4"], attached=True)
        yield {"home": home, **clusters}
    finally:
        # clients the tests left in reference cycles (a pytest.raises ExceptionInfo holds its test's
        # frame, and so the clients in it) are freed now, not at some later collection: else they
        # go on reconnecting to these stopped clusters, a FAIL line a second, for the rest of the run
        gc.collect()
        dev.down()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def secure(secure_home) -> dict[str, DevCluster]:
    return {a: c for a, c in secure_home.items() if a != "home"}


def secure_config(path: Path, clusters: dict[str, DevCluster], flows: dict, env: dict[str, str]) -> Path:
    """A config as a user writes it: every secret a `${env:}` reference (its value put in `env`)."""
    raw = {}
    for alias, c in clusters.items():
        conf = c.client_config()
        for key in SECRET_KEYS:
            if key in conf:
                var = f"MF_SECRET_{alias}_{key.replace('.', '_').upper()}"
                env[var] = conf[key]
                conf[key] = f"${{env:{var}}}"
        raw[alias] = conf
    path.write_text(yaml.safe_dump({"clusters": raw, "flows": flows, "spark": {"master": "local[2]"}}))
    return path


def secrets_of(clusters: dict[str, DevCluster]) -> list[str]:
    return [v for c in clusters.values() for k, v in c.client_config().items() if k in SECRET_KEYS]


def cli(cfg: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    full = {**os.environ, **env, "MIRRORFLOW_CONFIG": str(cfg), "PYTHONPATH": str(ROOT / "include")}
    return subprocess.run(
        [sys.executable, "-m", "mirrorflow.cli", *args], env=full, capture_output=True, text=True, timeout=300
    )


def error_line(stderr: str) -> str:
    """The CLI's last line on stderr; librdkafka's own log lines (`%3|...`), which its threads may
    still print after it, are not the CLI's."""
    return [line for line in stderr.strip().splitlines() if not re.match(r"%\d\|", line)][-1]


def commit_group(cluster: DevCluster, group: str, offsets: dict[tuple[str, int], int]) -> None:
    c = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    c.close()


def group_offsets(cluster: DevCluster, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    a = admin(cluster)
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    res = a.list_consumer_group_offsets([req])[group].result(30)
    return {tp.partition: tp.offset for tp in res.topic_partitions}


@pytest.mark.parametrize(("src", "tgt"), [("S1", "S2"), ("S3", "S4")], ids=["tls-to-scram", "mtls-to-oauth"])
def test_sync_replicate_checkpoint_translate_without_leaking_a_secret(tmp_path, secure, unique, src, tgt):
    source, target = secure[src], secure[tgt]
    flow = f"{src}->{tgt}"
    topic = f"{unique('sec')}.orders"
    remote = f"{src}.{topic}"
    create_topic(source, topic, 2)
    now_ms = int(time.time() * 1000)  # (older timestamps fall to the 7-day retention at once)
    records = [
        {"partition": i % 2, "key": f"k{i}".encode(), "value": f"v{i}".encode() * (1 + i % 7),
         "headers": [("h", str(i).encode())], "timestamp": now_ms - 300 + i}
        for i in range(300)
    ]
    produce(source, topic, records)
    env: dict[str, str] = {"MIRRORFLOW_RUN_DIR": str(tmp_path / "runs")}
    flows = {flow: {"topics": topic.replace(".", r"\."), "tasks.max": 2, "state.topic.partitions": 1,
                    "heartbeats.replication.enabled": False, "sync.group.offsets.enabled": True,
                    "sync.topic.acls.enabled": False}}
    cfg_path = secure_config(tmp_path / "mf.yaml", {src: source, tgt: target}, flows, env)
    outputs: list[str] = [cfg_path.read_text()]

    sync = cli(cfg_path, env, "sync", "--flow", flow)
    outputs += [sync.stdout, sync.stderr]
    assert sync.returncode == 0, sync.stderr
    assert remote in sync.stdout

    rep = cli(cfg_path, env, "replicate", "--flow", flow, "--once", "--mode", "submit")
    outputs += [rep.stdout, rep.stderr]
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert "running: " in rep.stderr and "spark-submit" in rep.stderr  # the command line is logged
    src_recs, dst_recs = consume_all(source, topic), consume_all(target, remote)
    assert len(src_recs) == 300
    assert [r.content() for r in dst_recs] == [r.content() for r in src_recs]

    group = unique("app")
    committed = {(topic, 0): 60, (topic, 1): 45}
    commit_group(source, group, committed)
    cp = cli(cfg_path, env, "checkpoint", "--flow", flow, "--group", group, "--json")
    outputs += [cp.stdout, cp.stderr]
    assert cp.returncode == 0, cp.stderr
    # the exact target offset of the record a source offset names (target offsets differ: markers)
    expected = {}
    for p in (0, 1):
        s = [r for r in src_recs if r.partition == p]
        d = [r for r in dst_recs if r.partition == p]
        expected[p] = d[[r.offset for r in s].index(committed[(topic, p)])].offset
    assert group_offsets(target, group, remote, 2) == expected
    tr = cli(cfg_path, env, "translate", "--flow", flow, "--group", group, "--json")
    outputs += [tr.stdout, tr.stderr]
    assert tr.returncode == 0, tr.stderr
    assert {(e["target_topic"], e["partition"]): e["target_offset"] for e in json.loads(tr.stdout)} == {
        (remote, p): o for p, o in expected.items()
    }

    # no secret anywhere on the way: output and logs, the spark-submit command line, run files
    run_files = sorted((tmp_path / "runs").rglob("*.json"))
    assert {f.name for f in run_files} >= {"plan.json", "results.json", "report.json"}
    outputs += [f.read_text() for f in run_files]
    cfg = config_mod.load(cfg_path)
    plan = next(f for f in run_files if f.name == "plan.json")
    outputs.append(" ".join(submit_command(cfg, plan)))
    secrets = secrets_of({src: source, tgt: target})
    assert secrets  # (a): the SCRAM passwords; (b): the mTLS key password
    for secret in secrets:
        assert not [o for o in outputs if secret in o]


def test_each_kind_authenticates_its_principal_and_the_authorizer_holds(secure, unique):
    """admin (a super user) may create a topic; alice may not, except on the TLS-only cluster,
    where no client has an identity (everyone is User:ANONYMOUS, a super user there)."""
    for alias, c in secure.items():
        for user, allowed in (("admin", True), ("alice", c.security == "tls")):
            name = unique(f"{alias}-{user}")
            a = admin(c, user)
            fut = a.create_topics([NewTopic(name, 1, 1)])[name]
            if allowed:
                fut.result(30)
            else:
                with pytest.raises(KafkaException) as exc:
                    fut.result(30)
                assert exc.value.args[0].name() in ("TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"), (
                    alias, user)


def _expired_token(_conf: str) -> tuple[str, float]:
    """An unsecured JWS whose `exp` is an hour ago (librdkafka is told it lives on, the broker decides)."""
    def b64(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    now = time.time()
    claims = {"sub": "admin", "iat": int(now - 7200), "exp": int(now - 3600)}
    return f"{b64({'alg': 'none'})}.{b64(claims)}.", now + 3600


def test_wrong_password_untrusted_certificate_expired_token_are_one_clear_error(tmp_path, secure):
    env: dict[str, str] = {}
    cfg_path = secure_config(tmp_path / "mf.yaml", dict(secure), {"S1->S2": {}}, env)
    raw = yaml.safe_load(cfg_path.read_text())
    # a wrong SCRAM password (through the CLI: one line on stderr, naming the cluster)
    env_bad = {**env, "MF_SECRET_S2_SASL_PASSWORD": "not-the-password-42"}
    out = cli(cfg_path, env_bad, "sync", "--flow", "S1->S2")
    assert out.returncode != 0
    assert error_line(out.stderr).startswith(
        f"mirrorflow: error: cluster 'S2': authentication failed at {secure['S2'].bootstrap_servers}: "
        "check the SASL username and password (mechanism SCRAM-SHA-512)"
    )
    assert "not-the-password-42" not in out.stderr + out.stdout
    # the same through a consumer (status reads the progress): diagnosed as the refused login too
    out = cli(cfg_path, env_bad, "status")
    assert out.returncode != 0
    assert (f"S1->S2: enabled, exactly-once, ERROR: cluster 'S2': authentication failed at "
            f"{secure['S2'].bootstrap_servers}: check the SASL username and password") in out.stdout
    # an untrusted broker certificate: the TLS source trusts another CA
    other = DevCA(tmp_path / "other-ca", "other")
    raw["clusters"]["S1"]["ssl.ca.location"] = str(other.ca_path)
    bad_cfg = tmp_path / "untrusted.yaml"
    bad_cfg.write_text(yaml.safe_dump(raw))
    out = cli(bad_cfg, env, "sync", "--flow", "S1->S2")
    assert out.returncode != 0
    assert error_line(out.stderr).startswith(
        f"mirrorflow: error: cluster 'S1': TLS handshake failed at {secure['S1'].bootstrap_servers}: "
        "the broker's certificate is not trusted"
    )
    # an mTLS client certificate the broker does not trust
    bad = {**secure["S3"].client_config(), "ssl.certificate.location": str(other.issue("admin").cert),
           "ssl.key.location": str(other.folder / "admin.key")}
    bad.pop("ssl.key.password")
    with pytest.raises(AuthenticationError) as exc:
        ClusterConnection("S3", bad).admin()
    assert str(exc.value).startswith(
        f"cluster 'S3': TLS handshake failed at {secure['S3'].bootstrap_servers}: the broker rejected the client "
        "certificate")
    # an expired OAuth token
    conf = {k: v for k, v in secure["S4"].client_config().items()
            if k not in ("enable.sasl.oauthbearer.unsecure.jwt", "sasl.oauthbearer.config")}
    with pytest.raises(AuthenticationError) as exc:
        ClusterConnection("S4", {**conf, "oauth_cb": _expired_token}).admin()
    assert str(exc.value).startswith(
        f"cluster 'S4': authentication failed at {secure['S4'].bootstrap_servers}: the broker rejected the OAuth "
        "token (expired")
    assert "invalid_token" in str(exc.value)


def test_dev_status_gives_what_a_client_needs_and_no_password(secure_home, secure):
    env = {"MIRRORFLOW_DEV_HOME": str(secure_home["home"])}
    full = {**os.environ, **env, "PYTHONPATH": str(ROOT / "include")}
    out = subprocess.run([sys.executable, "-m", "mirrorflow.cli", "dev", "status", "--json"], env=full,
                         capture_output=True, text=True, timeout=60)
    text = subprocess.run([sys.executable, "-m", "mirrorflow.cli", "dev", "status"], env=full,
                          capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and text.returncode == 0, out.stderr + text.stderr
    status = json.loads(out.stdout)
    assert {a: (s["security"], s["security.protocol"]) for a, s in status.items()} == {
        "S1": ("tls", "SSL"), "S2": ("scram", "SASL_SSL"), "S3": ("mtls", "SSL"), "S4": ("oauth", "SASL_SSL")}
    for s in status.values():
        assert s["running"] and Path(s["ssl.ca.location"]).is_file()
    s2, s3 = status["S2"]["users"]["alice"], status["S3"]["users"]["alice"]
    assert Path(s2["password.file"]).read_text() == secure["S2"].users["alice"]
    assert oct(Path(s2["password.file"]).stat().st_mode & 0o777) == "0o600"
    assert Path(s3["ssl.certificate.location"]).is_file() and Path(s3["ssl.key.location"]).is_file()
    assert Path(s3["ssl.key.password.file"]).read_text() == secure["S3"].users["alice"]
    assert status["S4"]["users"]["admin"] == {"principal": "User:admin", "sasl.oauthbearer.config": "principal=admin"}
    for c in secure.values():
        for password in c.users.values():
            assert password not in out.stdout and password not in text.stdout


def test_dev_up_refuses_an_alias_of_two_kinds_or_outside_the_clusters(tmp_path):
    full = {**os.environ, "MIRRORFLOW_DEV_HOME": str(tmp_path / "dev"), "PYTHONPATH": str(ROOT / "include")}
    for flags, message in (
        (["--tls", "A", "--scram", "A"], "cluster A is named by two security kinds (tls and scram)"),
        (["--mtls", "C"], "--mtls names C, which is not in --clusters A,B"),
    ):
        out = subprocess.run([sys.executable, "-m", "mirrorflow.cli", "dev", "up", "--clusters", "A,B", *flags],
                             env=full, capture_output=True, text=True, timeout=60)
        assert out.returncode == 1 and out.stderr == f"mirrorflow: error: {message}\n"
    assert not (tmp_path / "dev" / "state.json").exists()  # nothing was started
