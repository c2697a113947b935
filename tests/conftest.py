"""Shared fixtures: real local Kafka clusters, an isolated Airflow home, unique topic names.

The clusters are started once per test session through the same code as `mirrorflow dev up`
(on free ports, in a temporary home) and stopped at the end. The brokers are tied to the pytest
process (PR_SET_PDEATHSIG), so none is left behind even when pytest is killed.
"""
from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Airflow reads its settings at import time: isolate it before anything imports airflow.
_AIRFLOW_HOME = tempfile.mkdtemp(prefix="mirrorflow-airflow-")
# gone when this process ends (each xdist worker has its own): a machine that runs the suite for months
# kept one per process (~8 MB each)
atexit.register(shutil.rmtree, _AIRFLOW_HOME, ignore_errors=True)
os.environ.update({
    "AIRFLOW_HOME": _AIRFLOW_HOME,
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
    "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_AIRFLOW_HOME}/airflow.db",
    "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    # OpenLineage (apache-airflow-providers-openlineage): the task events of the DAGs a test selects
    # (emission off by default: tests/airflow/lineage_support.record_lineage) go to one file of this session's
    # Airflow home, the provider's file transport; emitted from a thread, not a fork of the pytest process.
    # The provider reads this once, when its plugin loads, so it is set for the session; the standalone
    # Airflow of the scheduler tests leaves it out.
    "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
        {"type": "file", "log_file_path": f"{_AIRFLOW_HOME}/openlineage.jsonl", "append": True}),
    "AIRFLOW__OPENLINEAGE__NAMESPACE": "mirrorflow-tests",
    "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True",
    "AIRFLOW__OPENLINEAGE__EMISSION_POLICY": json.dumps([{"scope": {}, "controls": {"emit": False}}]),
})
# The suite's Spark JVMs (spark-submit's launcher and driver, in-process sessions, the Connect server, Airflow's
# spark-submits) start and stop dozens of times on two cores and copy little each: C1 only and the serial
# collector, as the dev brokers run. A spark-submit test measured 32-33 -> 25 CPU s (the machine's, both runs).
# The benches leave these unset: they time Spark as a user runs it.
for _var in ("SPARK_SUBMIT_OPTS", "SPARK_LAUNCHER_OPTS"):
    os.environ.setdefault(_var, "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "devtools"), str(ROOT)]

import pytest  # noqa: E402

from mirrorflow_dev.cluster import DevClusters  # noqa: E402
from mirrorflow_dev.dev_cluster import DevCluster  # noqa: E402
from tests.connect_support import connect_server  # noqa: E402,F401 - one Spark Connect server per session
from tests.postgres_support import airflow_postgres, postgres_server  # noqa: E402,F401 - Airflow's database
from tests.registry_support import registries  # noqa: E402,F401 - schema registries (Apicurio), started lazily


class ClusterPool:
    """Starts each requested alias once per session; stops all of them at the end."""

    def __init__(self) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="mirrorflow-kafka-"))
        self.dev = DevClusters(self.home)
        self.started: dict[str, DevCluster] = {}

    def get(self, alias: str, sasl: bool = False) -> DevCluster:
        if alias not in self.started:
            self.started.update(self.dev.up([alias], sasl=[alias] if sasl else [], attached=True))
        return self.started[alias]

    def releases(self, versions: dict[str, str]) -> dict[str, DevCluster]:
        """Clusters of other Kafka releases (alias -> version, e.g. {"K39": "3.9.2"}), started together;
        the session's others run the default release (4.3.1)."""
        todo = [a for a in versions if a not in self.started]
        if todo:
            self.started.update(self.dev.up(todo, kafka_versions={a: versions[a] for a in todo}, attached=True))
        assert all(self.started[a].kafka_version == v for a, v in versions.items())
        return {a: self.started[a] for a in versions}

    def release(self, *aliases: str) -> None:
        """Stop clusters only one module uses, when it ends: an idle broker still costs CPU and memory, and a
        worker that ran the chaos, DR chaos, network-fault and version files kept eight of them to the end."""
        self._drop_kept_clients()
        self.dev.down([a for a in aliases if a in self.started])
        for a in aliases:
            self.started.pop(a, None)

    @staticmethod
    def _drop_kept_clients(collect: bool = True) -> None:
        """The copy tasks' producers and consumers kept for the next run: gone (with `collect`, for certain,
        before their brokers stop)."""
        import gc

        from mirrorflow.replication.task.task_producer import CACHE, LANES

        CACHE.clear()
        LANES.clear()
        if collect:
            gc.collect()

    def close(self) -> None:
        self._drop_kept_clients()
        self.dev.down()
        shutil.rmtree(self.home, ignore_errors=True)


@pytest.fixture
def standalone_turn():
    """The test's turn among those that run an `airflow standalone` (one at a time across the workers:
    tests/airflow/standalone.py, one_at_a_time). First among a test's parameters, before it reads the clock."""
    from tests.airflow.standalone import one_at_a_time

    with one_at_a_time():
        yield


@pytest.fixture(autouse=True)
def _no_kept_clients():
    """The copy keeps its producers and consumers for the next run of the same flow (task_producer: up to 64
    and 256 per process, 15 minutes). Every test's flows are its own, so what a test's runs kept is never
    used again in this worker; kept, an idle librdkafka client still costs about 0.1% of a core (its
    threads' timers), and the workers had gathered 40-83 each by the end of a run. Let go after each
    test (a test's own runs still reuse them; the tests of the cache clear it themselves)."""
    yield
    ClusterPool._drop_kept_clients(collect=False)  # a collection after every test would cost more than it saves


@pytest.fixture(scope="session")
def kafka_pool():
    pool = ClusterPool()
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture(scope="session")
def source(kafka_pool: ClusterPool) -> DevCluster:
    """Cluster alias A: the source of most flows."""
    return kafka_pool.get("A")


@pytest.fixture(scope="session")
def target(kafka_pool: ClusterPool) -> DevCluster:
    """Cluster alias B: the target of most flows."""
    return kafka_pool.get("B")


@pytest.fixture(scope="session")
def third(kafka_pool: ClusterPool) -> DevCluster:
    """Cluster alias C, for aggregation and chains (A->B->C)."""
    return kafka_pool.get("C")


@pytest.fixture(scope="session")
def sasl_cluster(kafka_pool: ClusterPool) -> DevCluster:
    """Cluster alias S with SASL/PLAIN and the StandardAuthorizer enforcing ACLs."""
    return kafka_pool.get("S", sasl=True)


@pytest.fixture
def topic_name(request) -> str:
    """A topic name unique to this test (and this run)."""
    base = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[:60]
    return f"t-{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def unique(request):
    """unique('orders') -> a name unique to this test, for tests that need several."""
    tag = uuid.uuid4().hex[:6]
    return lambda name: f"{name}-{tag}"


@pytest.fixture(scope="session")
def airflow_db():
    """A fresh Airflow metadata DB (SQLite in the session's AIRFLOW_HOME)."""
    from airflow.utils import db

    db.resetdb(skip_init=False)
    yield


@pytest.fixture(scope="session")
def sasl_target(kafka_pool: ClusterPool) -> DevCluster:
    """Cluster alias T with SASL/PLAIN and ACLs enforced: a target that can hold synced ACLs."""
    return kafka_pool.get("T", sasl=True)


def pytest_addoption(parser) -> None:
    # here, not in tests/chaos/conftest.py: pytest only knows options of the root conftest when it
    # parses the command line, so `scripts/test --long` works too
    parser.addoption("--long", action="store_true", default=False,
                     help="chaos (tests/chaos): a bigger run, more records and SIGKILLs; takes much longer")


# Files that run for minutes, first in collection order: pytest-xdist (scripts/test: --dist loadfile
# --no-loadscope-reorder) hands files to its workers in that order, so these start early on
# different workers and the workers end close together instead of one waiting alone on the last
# (STANDALONE_FILES among them go as one unit, in the place of the first: below).
HEAVY_FIRST = (
    "tests/airflow/test_scheduler.py",
    "tests/integration/test_kafka_versions.py",
    "tests/chaos/test_chaos.py",
    "tests/chaos/test_dr_chaos.py",
    "tests/model/test_model_based.py",
    "tests/chaos/test_network_faults.py",
    "tests/airflow/test_failover_approval.py",
    "tests/integration/test_failback.py",
    "tests/integration/test_broker_restart.py",
    "tests/integration/test_failover.py",
    "tests/airflow/test_ui_journeys_browser.py",
    "tests/airflow/test_ui_forms_browser.py",
)


# The files whose tests run an `airflow standalone`, one at a time (standalone_turn). pytest-xdist gives them to one
# worker as one work unit (below), in the place of the first: run one after another there, they never wait for
# their turn. As three units they started together and two workers sat waiting (one for 139 s in a full run).
STANDALONE_FILES = (
    "tests/airflow/test_scheduler.py",
    "tests/airflow/test_ui_journeys_browser.py",
    "tests/airflow/test_failover_approval.py",
)


def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile (scripts/test), with STANDALONE_FILES as one work unit; other modes as xdist has them."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LoadFileStandaloneTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return STANDALONE_FILES[0] if path in STANDALONE_FILES else path

    return LoadFileStandaloneTogether(config, log)


# A test still running after this long is hung, not slow (the longest take 5-10 minutes on four workers under
# load; the scheduler test waits up to 25 minutes on its own deadlines, and once passed 15 under heavy load): its
# worker dumps every thread's stack (to stderr and to a file named on stderr) and exits, so pytest-xdist
# reports that test as crashing its worker, starts another worker and the suite goes on, instead of CI
# running out of its time with no name. MIRRORFLOW_TEST_HANG_S sets it (0: off; off by default under
# `--long`, whose searches run for hours).
HANG_S = float(os.environ.get("MIRRORFLOW_TEST_HANG_S", "1500"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if HANG_S <= 0 or (item.config.getoption("--long") and "MIRRORFLOW_TEST_HANG_S" not in os.environ):
        yield
        return
    import faulthandler
    import threading

    def hung() -> None:
        dump = Path(tempfile.gettempdir()) / f"mirrorflow-hang-{os.getpid()}.txt"
        with dump.open("w") as out:
            out.write(f"{item.nodeid} still running after {HANG_S:.0f} s (MIRRORFLOW_TEST_HANG_S)\n")
            faulthandler.dump_traceback(out, all_threads=True)
        sys.__stderr__.write(f"\nHUNG: {item.nodeid} after {HANG_S:.0f} s; every thread's stack: {dump}\n")
        sys.__stderr__.flush()
        os._exit(3)

    timer = threading.Timer(HANG_S, hung)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


_STARTED = time.time()  # a dump older than this session is not this run's


def pytest_terminal_summary(terminalreporter) -> None:
    """The stacks of hung tests (above), which the worker that dumped them could not report itself."""
    for dump in sorted(Path(tempfile.gettempdir()).glob("mirrorflow-hang-*.txt")):
        if dump.stat().st_mtime >= _STARTED:
            terminalreporter.write_sep("=", f"hung test: {dump}")
            noise = ("/_pytest/", "/pluggy/", "/xdist/", "/execnet/", '"<string>"')
            terminalreporter.write_line("\n".join(
                ln for ln in dump.read_text().splitlines() if not any(n in ln for n in noise))[:12000])


def pytest_collection_modifyitems(config, items) -> None:
    if not config.getoption("--long"):
        tier = pytest.mark.skip(reason="the --long tier (docs/testing.md, run before a release): scripts/test --long")
        for item in items:
            if item.get_closest_marker("long"):
                item.add_marker(tier)
    rank = {path: i for i, path in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest keep their order
