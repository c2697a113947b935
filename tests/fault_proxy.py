"""A TCP fault proxy for tests: 127.0.0.1:<port> forwards to a broker's proxied listener, and the
test turns faults on and off while clients talk through it.

Faults (each applies to the connections open now and to new ones, both directions):

* `latency(ms)`: every chunk is delivered `ms` later (order kept);
* `bandwidth(bytes_per_s)`: each direction of each connection is paced to that rate;
* `reset()`: every open connection is closed with a TCP RST (SO_LINGER 0), as a middlebox or a
  crashed peer does; `resetting(True)` also resets every new connection at once;
* `blackhole(True)`: connections are accepted, what clients send is read and dropped, nothing is
  answered (a broker that hangs, or a network that swallows packets). Lifting it resets the
  connections it swallowed from (their streams lost bytes), so clients reconnect.

`heal()` lifts every fault. The proxy runs an asyncio loop in a thread of its own; the faults are
plain attributes the test thread sets. Why our own and not Toxiproxy: the four faults above are all
the tests need, in-process control is synchronous (no HTTP API, no Go build in the harness), and a
black hole that accepts and never answers is one flag here.

Kafka clients connect to the addresses the broker advertises, so the broker must advertise the
proxy: `DevClusters.up(proxy_ports={alias: proxy.port})` gives it a second listener, advertised at
the proxy's port, whose real port (`DevCluster.proxied_port`) is the proxy's upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from mirrorflow_dev.dev_cluster import DevCluster

CHUNK = 64 * 1024


@dataclass
class Faults:
    latency_s: float = 0.0
    rate: float = 0.0  # bytes per second and direction; 0: unlimited
    blackhole: bool = False
    resetting: bool = False


@dataclass
class Stats:
    connections: int = 0
    resets: int = 0
    swallowed: int = 0  # bytes read and dropped by the black hole
    forwarded: int = 0


@dataclass(eq=False)  # hashed by identity: kept in a set
class _Conn:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    swallowed_from: bool = False  # the black hole dropped bytes of this connection
    tasks: list[asyncio.Task] = field(default_factory=list)


def _rst(w: asyncio.StreamWriter | None) -> None:
    """Close with a TCP RST instead of a FIN."""
    if w is None:
        return
    sock = w.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    w.transport.abort()


class FaultProxy:
    """127.0.0.1:`port` -> 127.0.0.1:`upstream` (set before `start`), with faults (module docstring)."""

    def __init__(self, name: str = "proxy") -> None:
        self.name = name
        self.faults = Faults()
        self.stats = Stats()
        self.upstream: int | None = None
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))  # held from now on: the broker advertises this port
        self._sock.listen(128)
        self.port: int = self._sock.getsockname()[1]
        self._conns: set[_Conn] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"fault-proxy-{name}", daemon=True)
        self._server: asyncio.base_events.Server | None = None

    # -- the test's side ------------------------------------------------------------------------
    def start(self, upstream: int) -> FaultProxy:
        self.upstream = upstream
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        fut.result(10)
        return self

    def close(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._sock.close()

    def latency(self, ms: float) -> None:
        self.faults.latency_s = ms / 1000

    def bandwidth(self, bytes_per_s: float) -> None:
        self.faults.rate = bytes_per_s

    def blackhole(self, on: bool = True) -> None:
        was = self.faults.blackhole
        self.faults.blackhole = on
        if was and not on:  # their streams lost bytes: the clients must reconnect
            self._call(self._reset, True)

    def reset(self) -> None:
        """Reset every open connection now."""
        self._call(self._reset, False)

    def resetting(self, on: bool = True) -> None:
        """Reset every connection now and every new one as soon as it is accepted."""
        self.faults.resetting = on
        if on:
            self.reset()

    def heal(self) -> None:
        self.latency(0)
        self.bandwidth(0)
        self.resetting(False)
        self.blackhole(False)

    def describe(self) -> str:
        f, s = self.faults, self.stats
        return (
            f"proxy {self.name} :{self.port} -> :{self.upstream}: latency {f.latency_s * 1000:.0f} ms, "
            f"rate {f.rate or '-'}, blackhole {f.blackhole}, resetting {f.resetting}; "
            f"{s.connections} connections, {s.resets} reset, {s.forwarded} bytes forwarded, {s.swallowed} swallowed"
        )

    def _call(self, fn, *args) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(fn, *args)

    # -- the loop's side ------------------------------------------------------------------------
    async def _serve(self) -> None:
        self._server = await asyncio.start_server(self._accept, sock=self._sock)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        self._reset(False)

    def _reset(self, only_swallowed: bool) -> None:
        for c in list(self._conns):
            if only_swallowed and not c.swallowed_from:
                continue
            self.stats.resets += 1
            self._drop(c)

    def _drop(self, c: _Conn) -> None:
        for t in c.tasks:
            t.cancel()
        _rst(c.client)
        _rst(c.upstream)
        self._conns.discard(c)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        c = _Conn(writer)
        self._conns.add(c)
        if self.faults.resetting:
            self.stats.resets += 1
            self._drop(c)
            return
        up_r = None
        if not self.faults.blackhole:
            try:
                up_r, c.upstream = await asyncio.open_connection("127.0.0.1", self.upstream)
            except OSError:
                self._drop(c)  # the broker is down: the client sees its connection reset
                return
        pumps = [asyncio.ensure_future(self._pump(c, reader, c.upstream))]
        if up_r is not None:
            pumps.append(asyncio.ensure_future(self._pump(c, up_r, writer)))
        c.tasks = pumps
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:  # one side closed (or a reset cancelled us): close the other
            for t in pumps:
                t.cancel()
            if c in self._conns:
                self._conns.discard(c)
                for w in (c.client, c.upstream):
                    if w is not None:
                        w.close()

    async def _pump(self, c: _Conn, src: asyncio.StreamReader, dst: asyncio.StreamWriter | None) -> None:
        """Copy `src` to `dst` chunk by chunk, through the faults of the moment."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        sender = asyncio.ensure_future(self._send(c, queue, dst))
        try:
            while True:
                data = await src.read(CHUNK)
                if not data:
                    break
                if self.faults.blackhole or dst is None:
                    c.swallowed_from = True
                    self.stats.swallowed += len(data)
                    continue
                queue.put_nowait((time.monotonic() + self.faults.latency_s, data))
            await queue.join()
        finally:
            sender.cancel()

    async def _send(self, c: _Conn, queue: asyncio.Queue, dst: asyncio.StreamWriter | None) -> None:
        while True:
            due, data = await queue.get()
            try:
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                while self.faults.blackhole:  # swallowed from now on: held, never delivered
                    c.swallowed_from = True
                    await asyncio.sleep(0.05)
                if dst is not None:
                    dst.write(data)
                    await dst.drain()
                    self.stats.forwarded += len(data)
                if self.faults.rate:
                    await asyncio.sleep(len(data) / self.faults.rate)
            finally:
                queue.task_done()


@dataclass
class Pair:
    """Two clusters (direct) and their proxies; `via(side)` is the cluster as a config reaching it
    through its proxy sees it."""

    direct: dict[str, DevCluster]
    proxy: dict[str, FaultProxy]

    def via(self, side: str) -> DevCluster:
        return dataclasses.replace(self.direct[side], port=self.proxy[side].port)

    def heal(self) -> None:
        for p in self.proxy.values():
            p.heal()


@contextlib.contextmanager
def proxied_pair(kafka_pool, a: str, b: str) -> Iterator[Pair]:
    """Clusters `a` and `b` of the caller's own (sides "A" and "B"), each advertising a second listener
    at a proxy's port; released at the end."""
    proxies = {"A": FaultProxy(a), "B": FaultProxy(b)}
    started = kafka_pool.dev.up([a, b], proxy_ports={a: proxies["A"].port, b: proxies["B"].port}, attached=True)
    kafka_pool.started.update(started)
    for side, alias in (("A", a), ("B", b)):
        proxies[side].start(started[alias].proxied_port)
    try:
        yield Pair({"A": started[a], "B": started[b]}, proxies)
    finally:
        for p in proxies.values():
            p.close()
        kafka_pool.release(a, b)
