"""mirrorflow.process.provably_gone: only a process of this host, kernel and pid namespace that no
longer exists (or whose pid now names a newer process) is provably gone; anything else is not."""

import subprocess
import sys

import pytest

from mirrorflow.process import process_token, provably_gone

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")


def test_this_process_is_not_gone_and_an_ended_one_is():
    me = process_token()
    assert me and not provably_gone(me)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        token = process_token(child.pid)
        assert token and not provably_gone(token)
    finally:
        child.kill()
        child.wait()
    assert provably_gone(token)


def test_a_reused_pid_is_gone_and_nothing_is_proven_elsewhere():
    host, boot, ns, pid, start = process_token().split("|")
    assert provably_gone("|".join((host, boot, ns, pid, str(int(start) + 1))))  # same pid, other start
    assert not provably_gone("|".join(("elsewhere", boot, ns, "999999999", start)))  # another host
    assert not provably_gone("|".join((host, "another-boot", ns, "999999999", start)))
    assert not provably_gone("|".join((host, boot, "pid:[1]", "999999999", start)))  # another pid namespace
    assert not provably_gone("")  # no stamp: a DAG run's lease, an old record
    assert not provably_gone("garbage")
