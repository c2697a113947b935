"""The harness's schema registry (mirrorflow_dev.registry) when the port it drew is taken before its JVM
binds it, as a sibling test worker's server did in a full run (2026-12-01: "Port 24685 seems to be in
use", the session's registries failed): the real Apicurio exits on that port and starts on another."""
from __future__ import annotations

import socket
import urllib.request

import pytest

import mirrorflow_dev.registry as registry_mod
from mirrorflow_dev.registry import DevRegistries

pytestmark = pytest.mark.integration


def test_a_registry_whose_drawn_port_is_taken_before_it_binds_starts_on_another(tmp_path, monkeypatch):
    held = socket.socket()
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    held.bind(("127.0.0.1", 0))
    held.listen()
    taken = held.getsockname()[1]
    drawn: list[int] = []
    real_free_port = registry_mod.free_port

    def draws(already: set[int] | None = None) -> int:
        # the first draw: a port found free that another process binds before the JVM does
        port = taken if not drawn else real_free_port(already)
        drawn.append(port)
        return port

    monkeypatch.setattr(registry_mod, "free_port", draws)
    monkeypatch.setattr(registry_mod, "port_free", lambda port: True)  # it was free when drawn
    regs = DevRegistries(tmp_path / "home")
    try:
        got = regs.up(["Z"], attached=True)["Z"]
        # the taken port and the first management port, then the two of the start that served
        assert drawn[0] == taken and len(drawn) == 4 and got.port == drawn[2], (drawn, got)
        with urllib.request.urlopen(got.confluent_url + "/subjects", timeout=10) as resp:
            assert resp.status == 200 and resp.read() == b"[]"
        assert regs.current()["Z"].port == got.port  # what `dev status` and `dev down` find
    finally:
        regs.down()
        held.close()
