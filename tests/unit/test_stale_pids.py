"""The harness signals a recorded pid only while it is still the process it recorded: pids wrap at 32768
on the test machine, and a full run (2026-12-01) saw a restarted source broker gone or unusable for the
whole outage bound, as a signal to a stale pid would leave it. A broker's command line names its own
server.properties (`DevCluster.marker`)."""
import subprocess
import sys
import time

from mirrorflow_dev import processes
from mirrorflow_dev.cluster import DevClusters
from mirrorflow_dev.dev_cluster import DevCluster


def sleeper(*args: str) -> subprocess.Popen:
    """A process whose command line holds `args` (once its exec is through: the parent may return a moment
    before the new command line is in place)."""
    args = args or ("not-a-broker",)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *args])
    deadline = time.monotonic() + 10
    while not processes.alive(proc.pid, args[-1]):
        assert time.monotonic() < deadline, "the sleeper never showed its command line"
        time.sleep(0.01)
    return proc


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
        folder = str((tmp_path / "dev").absolute() / "A")  # as `up` records it
        dev._save({"A": DevCluster("A", port=1, controller_port=2, pid=other.pid, folder=folder)})
        assert not processes.alive(other.pid, dev.clusters()["A"].marker)
        assert dev.down(["A"]) == ["A"] and not dev.clusters()
        assert other.poll() is None
        assert DevCluster("A", 1, 2, folder=folder).marker == folder + "/server.properties"
    finally:
        other.kill()
        other.wait()


def test_a_marker_is_a_whole_argument_not_part_of_one():
    """A Connect server on port 1500 is not the one on 15002: markers name whole arguments."""
    other = sleeper("--conf", "spark.connect.grpc.binding.port=15002")
    try:
        assert processes.alive(other.pid, "spark.connect.grpc.binding.port=15002")
        assert not processes.alive(other.pid, "spark.connect.grpc.binding.port=1500")
    finally:
        other.kill()
        other.wait()
