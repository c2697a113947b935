"""Riding through a broker restart, on real brokers: admin calls through a client
built before a broker restart, partition counts and control-record writes during one.

Cluster R (one broker) is restarted by these tests only (as in test_broker_restart): a restart is
an outage of the whole cluster. A restart must run on the test's own thread (the new broker's life
is tied to the thread that starts it), so the call under test runs in a thread of its own.
"""

from __future__ import annotations

import gc
import socket
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import OffsetSpec

from mirrorflow.clients import FlowClients
from mirrorflow_dev.dev_cluster import DevCluster
from mirrorflow_dev.processes import free_port
from mirrorflow.errors import ClusterError, StateError
from mirrorflow.kafka.topic_admin import list_offsets
from mirrorflow.state.flow_state import read_control, write_control
from tests.integration.replicate_helpers import make_flow
from tests.support import create_topic, produce, write_config

pytestmark = pytest.mark.integration

NOW = int(time.time() * 1000) - 3_600_000


@pytest.fixture(scope="module", autouse=True)
def free_clients_at_the_end():
    """Clients a test left in a reference cycle (a pytest.raises ExceptionInfo holds its test's frame,
    and so the clients in it, e.g. the AdminClient of the dead address below) are freed at the end of
    the module, not at some later collection: else they go on reconnecting, a FAIL line a second."""
    yield
    gc.collect()


@pytest.fixture(scope="module")
def restartable(kafka_pool):
    """Cluster R: restarted by the tests of this module only (stopped after it)."""
    yield kafka_pool.get("R")
    kafka_pool.release("R")


def port_closed(cluster: DevCluster) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", cluster.port)) != 0


def during_restart(pool, cluster: DevCluster, call: Callable[[], Any], down_s: float, fails: bool = False) -> Any:
    """`call()` started on a thread of its own once cluster's broker is down (SIGTERM), while the
    test's thread restarts it after `down_s`; returns what the call returned (it must not raise),
    or with `fails` the exception it raised (it must raise)."""
    out: dict[str, Any] = {}

    def go() -> None:
        while not port_closed(cluster):
            time.sleep(0.05)
        try:
            out["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            out["error"], out["traceback"] = exc, traceback.format_exc()

    t = threading.Thread(target=go, daemon=True)
    t.start()
    pool.dev.restart(cluster.alias, down_s=down_s, attached=True)
    t.join(300)
    assert not t.is_alive()
    if fails:
        assert "error" in out, f"the call returned {out.get('value')!r} instead of failing"
        return out["error"]
    assert "error" not in out, out.get("traceback")
    return out["value"]


def own_flow(tmp_path, source: DevCluster, target: DevCluster, prefix: str, **props: Any) -> tuple[Any, Any]:
    """Flow CTL->B: a flow of its own, for a test that changes the flow's state (pauses it)."""
    flow = {"topics": f"{prefix}.*", "state.topic.partitions": 2, "heartbeats.replication.enabled": False, **props}
    cfg = write_config(tmp_path / f"{prefix}.yaml", {"CTL": source, "B": target}, {"CTL->B": flow})
    return cfg, cfg.flow("CTL->B")


def records(n: int, partitions: int) -> list[dict]:
    return [
        {"partition": i % partitions, "key": f"k{i}".encode(), "value": b"v", "timestamp": NOW + i} for i in range(n)
    ]


def test_list_offsets_through_an_admin_client_built_before_a_restart(tmp_path, source, restartable, kafka_pool, unique):
    """An AdminClient built before a SIGTERM restart lists offsets after it within the
    bound (its metadata cache holds the old leader epochs)."""
    pfx = unique("stale")
    topic, parts = f"{pfx}.orders", 6
    create_topic(restartable, topic, parts)
    produce(restartable, topic, records(60, parts))
    cfg, flow = make_flow(tmp_path, source, restartable, pfx)
    tps = [(topic, p) for p in range(parts)]
    expected = {tp: 10 for tp in tps}
    with FlowClients(cfg, flow) as clients:
        adm, conn = clients.admin("target"), clients.connection("target")
        assert list_offsets(adm, conn, tps, OffsetSpec.latest(), committed=False) == expected
        kafka_pool.dev.restart("R", down_s=1.0, attached=True)
        assert list_offsets(adm, conn, tps, OffsetSpec.latest(), committed=False, timeout=60) == expected
        assert list_offsets(adm, conn, tps, OffsetSpec.earliest(), committed=False, timeout=60) == {tp: 0 for tp in tps}


def test_list_offsets_of_a_topic_that_does_not_exist_names_it(tmp_path, source, target, unique):
    """ListOffsets' "no leaders found" (_NOENT) is retried like a stale leader, but a topic that the
    refreshed metadata says does not exist is reported as that, within the short grace."""
    pfx = unique("nope")
    cfg, flow = make_flow(tmp_path, source, target, pfx)
    with FlowClients(cfg, flow) as clients, pytest.raises(ClusterError) as exc:
        list_offsets(
            clients.admin("target"),
            clients.connection("target"),
            [(f"{pfx}.missing", 0)],
            OffsetSpec.latest(),
            committed=False,
            timeout=60,
        )
    assert str(exc.value) in (
        f"cluster 'B': cannot list offsets of {pfx}.missing[0]: topic '{pfx}.missing' does not exist",
        f"cluster 'B': cannot list offsets of {pfx}.missing[0]: Broker: Unknown topic or partition",
    )


def test_partitions_ride_through_a_restart(tmp_path, source, restartable, kafka_pool, unique):
    """FlowClients.partitions of a cluster that answered before waits for it to come back."""
    pfx = unique("parts")
    topic = f"{pfx}.orders"
    create_topic(restartable, topic, 3)
    cfg, flow = make_flow(tmp_path, source, restartable, pfx)
    with FlowClients(cfg, flow) as clients:
        assert clients.partitions("target", topic) == 3
        assert (
            during_restart(
                kafka_pool, restartable, lambda: clients.partitions("target", topic, refresh=True), down_s=12.0
            )
            == 3
        )


def test_a_control_write_rides_through_a_restart_or_fails_past_the_bound(
    tmp_path, source, restartable, kafka_pool, unique
):
    """A control record (here the flow state a pause writes) written while the target
    restarts is written once the broker is back; past broker.outage.max.seconds it fails with a
    StateError naming the bound, and the record is not written later behind the caller's back."""
    pfx = unique("ctl")
    cfg, flow = own_flow(tmp_path, source, restartable, pfx)
    with FlowClients(cfg, flow) as clients:
        write_control(clients, "flow-state", {"state": "running", "reason": "start"})
        during_restart(
            kafka_pool,
            restartable,
            lambda: write_control(clients, "flow-state", {"state": "paused", "reason": "restart"}),
            down_s=16.0,  # longer than one attempt (15 s): the write is written again
        )
        assert read_control(clients, "flow-state") == {"v": 1, "state": "paused", "reason": "restart"}
    cfg, flow = own_flow(tmp_path, source, restartable, pfx, **{"broker.outage.max.seconds": 2})
    with FlowClients(cfg, flow) as clients:
        assert read_control(clients, "flow-state") == {"v": 1, "state": "paused", "reason": "restart"}
        exc = during_restart(
            kafka_pool,
            restartable,
            lambda: write_control(clients, "flow-state", {"state": "stopped", "reason": "late"}),
            down_s=8.0,
            fails=True,
        )
        assert isinstance(exc, StateError), repr(exc)
        text = str(exc)
        assert text.startswith(
            "cannot record the flow-state of flow CTL->B: cluster 'B': writing the flow-state of "
            "flow CTL->B: no success for "
        ), text
        assert "longer than broker.outage.max.seconds (2); last error: " in text, text
        assert read_control(clients, "flow-state") == {"v": 1, "state": "paused", "reason": "restart"}


def test_the_dag_plan_task_waits_for_a_restarting_target(tmp_path, source, restartable, kafka_pool, unique):
    """The replicate DAG's plan task waits for both clusters as `mirrorflow replicate` does (a blip in
    the task, longer on the triggerer: RunWaitTrigger): started while the target restarts, it plans once
    it is back."""
    from mirrorflow_airflow.dag_builders.replicate import plan_task
    from tests.airflow.deferral_support import until_done

    pfx = unique("dagplan")
    topic = f"{pfx}.orders"
    create_topic(source, topic, 2)
    create_topic(restartable, f"A.{topic}", 2)
    produce(source, topic, records(30, 2))
    cfg, flow = make_flow(tmp_path, source, restartable, pfx)
    planned, _ = during_restart(
        kafka_pool, restartable, lambda: until_done(plan_task, "A->B", "manual__restart", str(cfg.path)), down_s=12.0
    )
    assert (planned["units"], planned["offsets"]) == (2, 30)


def test_the_dag_plan_task_names_an_unreachable_cluster_past_the_bound(tmp_path, source, target, unique):
    """The replicate DAG's plan task, the error path: a target that never answers fails the plan task, after
    its wait on the triggerer, with one error naming the flow, the cluster and the bound."""
    from airflow.sdk.exceptions import AirflowFailException

    from mirrorflow_airflow.dag_builders.replicate import plan_task
    from tests.airflow.deferral_support import until_done

    pfx = unique("dagdown")
    cfg = write_config(
        tmp_path / "down.yaml",
        {"A": source, "B": target},
        {"A->B": {"topics": f"{pfx}.*", "broker.outage.max.seconds": 2}},
    )
    text = cfg.path.read_text().replace(target.bootstrap_servers, f"127.0.0.1:{free_port()}")
    cfg.path.write_text(text)
    with pytest.raises(AirflowFailException) as exc:
        until_done(plan_task, "A->B", "manual__down", str(cfg.path))
    msg = str(exc.value)
    assert msg.startswith("flow A->B: cluster 'B': cannot reach 127.0.0.1:"), msg
    assert msg.endswith(" (waited broker.outage.max.seconds, 2 s)"), msg
