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


def test_ports_handed_out_together_are_never_the_same_one(monkeypatch, tmp_path):
    """Two draws may give one port (the kernel did so when it chose: a broker's two listeners got the same
    port and its storage format failed in a full run). `free_port(taken)` draws again for one not in
    `taken`."""
    from mirrorflow_dev import processes

    a, b = processes.free_port(), processes.free_port()
    while b == a:
        b = processes.free_port()
    monkeypatch.setattr(processes, "RESERVATIONS", tmp_path)  # a and b not reserved: only `taken` refuses a
    drawn = iter([a, a, a, b])
    monkeypatch.setattr(processes.random, "randint", lambda low, high: next(drawn))
    taken: set[int] = set()
    assert [processes.free_port(taken), processes.free_port(taken)] == [a, b]
    assert taken == {a, b}


def test_a_free_port_lies_below_the_ports_outgoing_connections_get_and_is_free():
    """Servers listen below the kernel's range for outgoing connections' local ports: a client that
    reconnects to a stopped server's port again and again is never handed it as its own."""
    import socket

    from mirrorflow_dev.processes import free_port, server_ports

    low, high = server_ports()
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        eph_low, eph_high = (int(x) for x in f.read().split())
    assert high < eph_low or low > eph_high
    taken: set[int] = set()
    ports = [free_port(taken) for _ in range(20)]
    assert len(set(ports)) == 20 and set(ports) == taken and all(low <= p <= high for p in ports)
    for p in ports:  # free: a server can bind each
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))


def test_a_held_port_is_refused_to_clients_and_never_handed_out_until_released():
    """`hold` keeps a stopped server's port from the stop to the start: connecting is refused, as to the
    stopped server, no free port is that one, and the server binds it again once it is let go."""
    import socket

    from mirrorflow_dev.processes import free_port, hold, port_free

    port = free_port()
    held = hold(port, 5)
    assert held is not None
    try:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2)
        with socket.socket() as s:  # another process's bind, as free_port tries it
            with pytest.raises(OSError):
                s.bind(("127.0.0.1", port))
    finally:
        held.close()
    assert port_free(port)
    with socket.socket() as server:  # the restarted server
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen()
        assert hold(port, 0.3) is None  # while a server listens there, hold waits and gives up


def test_a_port_another_process_drew_is_not_handed_out_until_its_reservation_expires(monkeypatch, tmp_path):
    """A server binds its port up to a minute after the draw (Airflow's api-server after `db migrate`): a
    sibling worker drawing meanwhile found it free. A drawn port is reserved for every process of the user
    (a file per port, O_EXCL) for RESERVED_S; an older reservation is taken over."""
    import os
    import subprocess
    import sys
    import time

    from mirrorflow_dev import processes

    monkeypatch.setattr(processes, "RESERVATIONS", tmp_path / "ports")
    # another process draws: its reservation is on disk
    drawn = subprocess.run(
        [sys.executable, "-c", "from mirrorflow_dev import processes as p; import pathlib, sys; "
         f"p.RESERVATIONS = pathlib.Path({str(tmp_path / 'ports')!r}); print(p.free_port())"],
        check=True, capture_output=True, text=True).stdout.strip()
    a = int(drawn)
    other = processes.free_port()
    assert other != a and sorted(os.listdir(tmp_path / "ports")) == sorted([str(a), str(other)])
    draws = iter([a, a, a])
    monkeypatch.setattr(processes.random, "randint", lambda low, high: next(draws, other + 1))
    assert processes.free_port() != a  # free on loopback, but drawn by the other process
    old = time.time() - processes.RESERVED_S - 1
    os.utime(tmp_path / "ports" / str(a), (old, old))
    draws = iter([a])
    assert processes.free_port() == a  # the reservation expired: taken over, fresh again
    assert time.time() - (tmp_path / "ports" / str(a)).stat().st_mtime < 60
