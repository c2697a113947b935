"""The registry client over a real local HTTP socket that drops connections before answering (what
Apicurio's server did once in a full run: the request never reached its access log)."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from mirrorflow.schemas.registry_client import Endpoint, RegistryClient, RegistryError


class DroppingServer:
    """Accepts connections; closes the first `drops` of them after reading the request, unanswered; answers
    the others with `{"ok": true}`. Counts the requests it read, by method."""

    def __init__(self, drops: int):
        self.drops, self.seen = drops, []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                request = conn.recv(65536).decode()
                self.seen.append(request.split(" ", 1)[0])
                if len(self.seen) <= self.drops:
                    continue
                body = json.dumps({"ok": True}).encode()
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )

    def client(self) -> RegistryClient:
        return RegistryClient(Endpoint("B", (f"http://127.0.0.1:{self.port}",), None, timeout_s=5))


def test_a_read_the_registry_dropped_unanswered_is_sent_again():
    server = DroppingServer(drops=2)
    assert server.client().get("/config/x") == {"ok": True}
    assert server.seen == ["GET", "GET", "GET"]
    server.sock.close()


def test_a_registry_that_keeps_dropping_is_one_error_naming_registry_and_request():
    server = DroppingServer(drops=10)
    with pytest.raises(RegistryError, match=r"B's schema registry .*unreachable \(GET /config/x: .*closed"):
        server.client().get("/config/x")
    assert server.seen == ["GET", "GET", "GET"]
    server.sock.close()


def test_a_post_dropped_unanswered_is_not_sent_again():
    server = DroppingServer(drops=1)
    with pytest.raises(RegistryError, match=r"unreachable \(POST /subjects/s/versions"):
        server.client().post("/subjects/s/versions", {"schema": "{}"})
    assert server.seen == ["POST"]
    server.sock.close()
