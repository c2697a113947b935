"""The harness signals a recorded pid only while it is still the process it recorded: pids wrap at 32768
on the test machine, and a full run (2026-12-01) saw a restarted source broker gone or unusable for the
whole outage bound, as a signal to a stale pid would leave it. A broker's command line names its own
server.properties (`DevClusters.marker`)."""
import subprocess
import sys

from mirrorflow_dev import processes
from mirrorflow_dev.cluster import DevClusters
from mirrorflow_dev.dev_cluster import DevCluster


def sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "not-a-broker"])


def test_a_pid_that_names_another_process_now_is_not_signalled():
    other = sleeper()
    try:
        assert processes.alive(other.pid) and processes.alive(other.pid, "not-a-broker")
        assert not processes.alive(other.pid, "/tmp/x/A/server.properties")
        processes.stop(other.pid, marker="/tmp/x/A/server.properties", timeout=1)
        processes.kill(other.pid, marker="/tmp/x/A/server.properties")
        assert other.poll() is None  # still running: not the recorded process
        processes.stop(other.pid, marker="not-a-broker", timeout=5)
        assert other.wait(10) is not None  # the recorded process: stopped
    finally:
        other.kill()
        other.wait()


def test_dev_down_leaves_a_process_that_took_a_dead_brokers_pid_alone(tmp_path):
    dev = DevClusters(tmp_path / "dev")
    other = sleeper()  # the pid the broker had, now another program's (another worker's broker)
    try:
        dev._save({"A": DevCluster("A", port=1, controller_port=2, pid=other.pid)})
        assert not processes.alive(other.pid, dev.marker("A"))
        assert dev.down(["A"]) == ["A"] and not dev.clusters()
        assert other.poll() is None
        assert dev.marker("A") == str((tmp_path / "dev").absolute() / "A" / "server.properties")
    finally:
        other.kill()
        other.wait()
