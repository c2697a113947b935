"""mirrorflow_dev.processes.on_a_free_port: a server whose port was taken between finding it free and
binding it (a sibling test worker's broker) starts on another; any other failure is not retried."""
import pytest

from mirrorflow_dev.errors import DevClusterError
from mirrorflow_dev.processes import PORT_TRIES, on_a_free_port


def test_a_port_taken_before_the_bind_is_tried_again_on_a_new_one():
    tried: list[int] = []

    def start(port: int) -> int:
        tried.append(port)
        if len(tried) < PORT_TRIES:  # taken since it was found free
            raise DevClusterError(f"the server exited: java.net.BindException: port {port} in use")
        return port

    assert on_a_free_port(start, "BindException") == tried[-1] and len(tried) == PORT_TRIES
    assert all(0 < p < 65536 for p in tried)


def test_other_failures_and_the_last_try_are_raised_as_they_are():
    calls: list[int] = []

    def fails(port: int) -> int:
        calls.append(port)
        raise DevClusterError("initdb failed: disk full")

    with pytest.raises(DevClusterError, match="disk full"):
        on_a_free_port(fails, "BindException")
    assert len(calls) == 1

    def always_taken(port: int) -> int:
        calls.append(port)
        raise DevClusterError("could not bind: Address already in use")

    with pytest.raises(DevClusterError, match="already in use"):
        on_a_free_port(always_taken, "already in use")
    assert len(calls) == 1 + PORT_TRIES


def test_ports_handed_out_together_are_never_the_same_one(monkeypatch):
    """The kernel handed out a port it had just given (both sockets closed at once): a broker's two
    listeners got the same port and its storage format failed in a full run. `free_port(taken)` asks
    again for one not in `taken`."""
    from mirrorflow_dev import processes

    given = iter([40001, 40001, 40001, 40002])

    class Socket:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def bind(self, addr):
            self.port = next(given)

        def getsockname(self):
            return ("127.0.0.1", self.port)

    monkeypatch.setattr(processes.socket, "socket", Socket)
    taken: set[int] = set()
    assert [processes.free_port(taken), processes.free_port(taken)] == [40001, 40002]
    assert taken == {40001, 40002}
