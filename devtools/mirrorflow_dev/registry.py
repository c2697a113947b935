"""Local schema registries (`mirrorflow dev registry up|down|status`): Apicurio Registry, one per cluster.

Apicurio Registry 3.3.3 is a Quarkus application published on Maven Central as
`io.apicurio:apicurio-registry-app:3.3.3:tar.gz:all`. `registry-pom.xml` beside this file names it;
`kafka_dist.maven_fetched` (the harness's one Maven fetch) copies the archive into the cache once
(`~/.cache/mirrorflow/apicurio-<version>/dist`) and it is unpacked beside it (`app/`, a stamp marks a
complete unpack), so later starts need no network. Its classes are Java 21: it runs on a Java 21+
(`MIRRORFLOW_REGISTRY_JAVA_HOME`, else Temurin 25 where Debian's images put it, else JAVA_HOME, else
`java` on PATH, each checked), on 127.0.0.1 only, with in-memory storage (H2: a restart forgets
everything). Each instance gets its own HTTP and management port; its log and the harness's
`state.json` live under `<dev home>/registry`, so `status` and `down` work from any later process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from mirrorflow.process import die_with_parent
from mirrorflow_dev import processes
from mirrorflow_dev.errors import DevClusterError
from mirrorflow_dev.home import dev_home
from mirrorflow_dev.kafka_dist import cache_dir, maven_fetched
from mirrorflow_dev.processes import alive, free_port, port_free

VERSION = "3.3.3"
POM = Path(__file__).with_name("registry-pom.xml")
MIN_JAVA = 21
JAVA_CANDIDATES = ("/usr/lib/jvm/temurin-25-jdk-amd64", "/usr/lib/jvm/temurin-21-jdk-amd64")
READY_TIMEOUT_S = 120.0  # about 4 s on an idle machine; the shared 2-core machine is slower
INFO_PATH = "/apis/registry/v3/system/info"


def app_dir(version: str = VERSION) -> Path:
    """The unpacked application (`quarkus-run.jar` and its folders), fetched and unpacked once."""
    root = cache_dir() / f"apicurio-{version}"
    app = root / "app"
    if (app / ".complete").exists():
        return app
    archive_name = f"apicurio-registry-app-{version}-all.tar.gz"
    dist = maven_fetched(
        root / "dist", POM, {"apicurio.version": version}, archive_name, f"Apicurio Registry {version}"
    )
    tmp = root / f"app.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with tarfile.open(dist / archive_name) as tar:
            tar.extractall(tmp, filter="data")
    except (OSError, tarfile.TarError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DevClusterError(f"could not unpack Apicurio Registry {version} ({dist / archive_name}): {exc}") from None
    if not (tmp / "quarkus-run.jar").exists():
        shutil.rmtree(tmp, ignore_errors=True)
        raise DevClusterError(f"the Apicurio Registry {version} archive holds no quarkus-run.jar")
    (tmp / ".complete").write_text(version + "\n")
    shutil.rmtree(app, ignore_errors=True)
    tmp.rename(app)
    return app


def java_binary() -> str:
    """A `java` of release 21 or newer for the registry (Debian's default here is 17)."""
    homes = [os.environ.get("MIRRORFLOW_REGISTRY_JAVA_HOME"), *JAVA_CANDIDATES, os.environ.get("JAVA_HOME")]
    tried = []
    for home in [h for h in homes if h]:
        java = Path(home) / "bin" / "java"
        if java.exists():
            tried.append(str(java))
            if _java_release(str(java)) >= MIN_JAVA:
                return str(java)
    on_path = shutil.which("java")
    if on_path:
        tried.append(on_path)
        if _java_release(on_path) >= MIN_JAVA:
            return on_path
    raise DevClusterError(
        f"Apicurio Registry {VERSION} needs Java {MIN_JAVA} or newer; found none"
        + (f" (tried {', '.join(tried)})" if tried else "")
        + ": install one, or point MIRRORFLOW_REGISTRY_JAVA_HOME at it"
    )


def _java_release(java: str) -> int:
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    m = re.search(r'version "(\d+)', out)
    return int(m.group(1)) if m else 0


@dataclass
class DevRegistry:
    alias: str  # the cluster it stands beside
    port: int
    management_port: int
    pid: int | None = None
    log: str = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def marker(self) -> str:
        """What the registry's command line holds: its pid is signalled only while it does (processes.alive)."""
        return f"-Dquarkus.http.port={self.port}"

    @property
    def confluent_url(self) -> str:
        """Its Confluent-compatible API: a cluster's `schema.registry.url`."""
        return f"{self.url}/apis/ccompat/v7"

    def status(self) -> dict:
        running = alive(self.pid, self.marker)
        return {**asdict(self), "url": self.url, "schema.registry.url": self.confluent_url, "running": running}


class DevRegistries:
    """The local registries under a dev home folder, one per cluster alias."""

    def __init__(self, home: Path | str | None = None):
        self.home = dev_home(home) / "registry"
        self.state_file = self.home / "state.json"

    def current(self) -> dict[str, DevRegistry]:
        if not self.state_file.exists():
            return {}
        return {a: DevRegistry(**r) for a, r in json.loads(self.state_file.read_text()).items()}

    def status(self) -> dict[str, dict]:
        return {a: r.status() for a, r in self.current().items()}

    def up(
        self,
        aliases: list[str],
        ports: dict[str, int] | None = None,
        attached: bool = False,
        props: dict[str, dict[str, str]] | None = None,
    ) -> dict[str, DevRegistry]:
        """Start a registry for each alias (a running one is kept); all are waited for together.
        attached=True: each dies with this process (tests). `props`: alias -> Apicurio settings (system
        properties, e.g. KafkaSQL storage: `apicurio.storage.kind=kafkasql`)."""
        app, java = app_dir(), java_binary()
        running = {a: r for a, r in self.current().items() if alive(r.pid, r.marker)}
        started: dict[str, tuple[DevRegistry, subprocess.Popen]] = {}
        self.home.mkdir(parents=True, exist_ok=True)
        given = ports or {}
        taken = set(given.values())  # every port this start hands out, once

        def launch(alias: str, port: int) -> None:  # in this thread: attached=True ties the JVM to it
            if not port_free(port):
                raise DevClusterError(f"port {port} for {alias}'s schema registry is already in use on 127.0.0.1")
            reg = DevRegistry(alias, port, free_port(taken), log=str(self.home / f"{alias}.log"))
            started[alias] = (reg, self._start(reg, app, java, attached, (props or {}).get(alias, {})))
            running[alias] = reg
            self._save(running)

        try:
            for alias in aliases:
                if alias not in running:
                    launch(alias, given.get(alias) or free_port(taken))
            for alias in list(started):
                for attempt in range(1, processes.PORT_TRIES + 1):
                    try:
                        self._wait_ready(*started[alias])
                        break
                    except DevClusterError as exc:
                        # a port this start drew was taken before the JVM bound it seconds later (a full
                        # run, 2026-12-01): another one, as processes.on_a_free_port does for PostgreSQL
                        if "seems to be in use" not in str(exc) or alias in given or attempt == processes.PORT_TRIES:
                            raise
                        launch(alias, free_port(taken))
        except BaseException:
            for reg, _ in started.values():
                processes.stop(reg.pid, group=True, marker=reg.marker)
                running.pop(reg.alias, None)
            self._save(running)
            raise
        return {a: running[a] for a in aliases}

    @staticmethod
    def _start(reg: DevRegistry, app: Path, java: str, attached: bool, props: dict[str, str]) -> subprocess.Popen:
        cmd = [
            java,
            "-Xmx384m",
            "-XX:TieredStopAtLevel=1",  # a quicker start; the registry is never busy here
            "-Dquarkus.http.host=127.0.0.1",
            f"-Dquarkus.http.port={reg.port}",
            f"-Dquarkus.management.port={reg.management_port}",
            "-Dquarkus.management.host=127.0.0.1",
            "-Dquarkus.otel.sdk.disabled=true",
            *(f"-D{k}={v}" for k, v in props.items()),
            "-jar",
            str(app / "quarkus-run.jar"),
        ]
        with open(reg.log, "w") as out:
            proc = subprocess.Popen(
                cmd,
                cwd=app,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent if attached else os.setsid,
                close_fds=True,
            )
        reg.pid = proc.pid
        return proc

    @staticmethod
    def _wait_ready(reg: DevRegistry, proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise DevClusterError(
                    f"{reg.alias}'s schema registry exited with {proc.returncode}:\n{processes.tail(Path(reg.log))}"
                )
            try:  # ready: its own API and the Confluent-compatible one the flows use both answer
                with (
                    urllib.request.urlopen(reg.url + INFO_PATH, timeout=2) as info,
                    urllib.request.urlopen(reg.confluent_url + "/subjects", timeout=2) as subjects,
                ):
                    if info.status == 200 and subjects.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise DevClusterError(
            f"{reg.alias}'s schema registry did not answer on {reg.url} in {READY_TIMEOUT_S:.0f} s:\n"
            + processes.tail(Path(reg.log))
        )

    def _save(self, regs: dict[str, DevRegistry]) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.state_file.write_text(json.dumps({a: asdict(r) for a, r in regs.items()}))

    def down(self, aliases: list[str] | None = None) -> list[str]:
        """Stop the registries (of `aliases`, else all); the aliases that were running."""
        regs = self.current()
        stopped = []
        for alias in list(regs):
            if aliases is not None and alias not in aliases:
                continue
            reg = regs.pop(alias)
            if alive(reg.pid, reg.marker):
                stopped.append(alias)
            processes.stop(reg.pid, group=True, marker=reg.marker)
        if regs:
            self._save(regs)
        else:
            self.state_file.unlink(missing_ok=True)
        return stopped


def main(argv: list[str]) -> int:
    """`python -m mirrorflow_dev.registry`: fetch and unpack the registry (scripts/bootstrap)."""
    try:
        app_dir()
    except DevClusterError as exc:
        print(f"mirrorflow: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
