"""Scoreboard: source choice, fallback, staleness, non-blocking readers."""

import socket
import threading
import time

import pytest

from harness.fakeapi import node, node_metrics
from harness.prometheus import Device, Exporter, free_port, prometheus_with_history
from kubectl_nettraffic.config import Settings, settings_from_mapping
from kubectl_nettraffic.kube.client import api_client
from kubectl_nettraffic.measuring.engine import Engine, build_engine
from kubectl_nettraffic.measuring.measurement import Measurer
from kubectl_nettraffic.measuring.scoreboard import Scoreboard
from kubectl_nettraffic.measuring.scoreview import scores_document
from kubectl_nettraffic.sources.metrics_server import MetricsServerSource
from kubectl_nettraffic.sources.prometheus import PrometheusSource
from tests.harness.scoreboards import FixedBoard, adopted

END = float(int(time.time()) // 60 * 60 - 120)


def _engine(settings: Settings, measurer: Measurer, clock=time.time) -> Engine:
    """A measurer publishing into a scoreboard, without the API wiring of build_engine."""
    return Engine(measurer, Scoreboard(settings, clock), None, None)


@pytest.fixture(scope="module")
def prometheus():
    exporters = [
        Exporter(f"10.0.0.{i}:9100", f"n{i}", [Device("eth0", rate, rate)])
        for i, rate in ((1, 5e6), (2, 1e6), (3, 3e6))
    ]
    server = prometheus_with_history(exporters, END)
    yield server
    server.stop()


def _dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


@pytest.fixture
def cluster(fake_api):
    for i in (1, 2, 3):
        fake_api.put(node(f"n{i}", ip=f"10.0.0.{i}", cpu="4", memory="8Gi"))
    for name, cpu in (("n1", "1"), ("n2", "3"), ("n3", "2")):
        fake_api.put(node_metrics(name, cpu, "2Gi"), plural="nodes")
    return fake_api


def test_engine_scores_live_from_prometheus_and_api(prometheus, cluster, kubeconfig):
    settings = settings_from_mapping(
        {"kubeconfig": kubeconfig, "prometheus": {"url": prometheus.url}}
    )
    engine = build_engine(settings)
    engine.measurer.prometheus = PrometheusSource(settings.prometheus, clock=lambda: END)
    try:
        snapshot = engine.refresh()
        assert snapshot is not None and snapshot.source == "prometheus"
        assert [s.name for s in snapshot.scores] == ["n2", "n3", "n1"]
        document = scores_document(snapshot, {}, stale=False)
        assert document["source"] == "prometheus" and document["window"] == "2m"
        assert [n["score"] for n in document["nodes"]] == [80, 40, 0]
    finally:
        engine.node_watch.stop()


def test_falls_back_to_metrics_server_when_prometheus_is_down(cluster, kubeconfig):
    settings = settings_from_mapping({"kubeconfig": kubeconfig, "prometheus": {"url": _dead_url()}})
    engine = build_engine(settings)
    try:
        snapshot = engine.refresh()
        assert snapshot.source == "metrics-server"
        assert "prometheus" in snapshot.diagnostics.errors[0]
        assert engine.scoreboard.source_failures["prometheus"] == 1
        # cpu/memory get weight 1 each in the fallback: n1 (1 of 4 cores) is quietest.
        assert [s.name for s in snapshot.scores] == ["n1", "n3", "n2"]
    finally:
        engine.node_watch.stop()


def test_nothing_answers_keeps_the_old_snapshot_until_stale(cluster, kubeconfig):
    now = [1000.0]
    settings = settings_from_mapping(
        {"prometheus": {"url": _dead_url()}, "refresh": {"maxStaleness": "1m"}}
    )
    api = api_client(kubeconfig)
    from kubectl_nettraffic.kube.cluster import list_nodes

    engine = _engine(
        settings,
        Measurer(
            settings,
            lambda: list_nodes(api),
            PrometheusSource(settings.prometheus),
            MetricsServerSource(api),
            clock=lambda: now[0],
        ),
        clock=lambda: now[0],
    )
    board = engine.scoreboard
    first = engine.refresh()
    assert first is not None and not board.is_stale(first)
    cluster.forbidden.add(("GET", "/apis/metrics.k8s.io"))
    now[0] += 61
    assert engine.refresh() is None
    assert board.snapshot is first and board.is_stale(board.snapshot)


def test_admissions_never_wait_for_a_hung_prometheus(cluster, kubeconfig):
    """While a refresh waits on a Prometheus that never answers, admissions
    are decided from the last snapshot and /scores' view is read: neither
    takes a lock the refresh holds."""
    from harness.reviews import pod
    from kubectl_nettraffic.kube.cluster import list_nodes
    from kubectl_nettraffic.serving import serving_parts

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    listener.settimeout(10)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    settings = settings_from_mapping({"prometheus": {"url": url, "timeout": "1500ms"}})
    api = api_client(kubeconfig)
    serving = serving_parts(settings)
    measurer = Measurer(
        settings,
        lambda: list_nodes(api),
        PrometheusSource(settings.prometheus),
        MetricsServerSource(api),
    )
    engine = Engine(measurer, serving.scoreboard, None, None)
    first = engine.refresh()  # falls back to metrics-server after the timeout
    assert first is not None
    listener.accept()[0].close()  # the first refresh's connection, never answered
    refreshing = threading.Thread(target=engine.refresh)
    refreshing.start()
    hung, _ = listener.accept()  # the second refresh is now waiting on Prometheus
    started = time.perf_counter()
    decisions = [serving.steerer.decide(pod(), {}, dry_run=False) for _ in range(100)]
    views = [serving.inflight.view() for _ in range(100)]
    elapsed = time.perf_counter() - started
    still_hung = refreshing.is_alive()
    refreshing.join()
    hung.close()
    listener.close()
    assert still_hung, "the refresh ended before the admissions did: nothing was shown"
    assert all(d.preferences and d.skip is None for d in decisions)
    assert sum(pods for _, pods in views[-1].values()) == 100
    assert elapsed < 1.0, f"100 admissions took {elapsed:.3f}s while a refresh was hung"


def test_a_failed_node_list_is_the_inventory_s_failure_not_prometheus(prometheus):
    from kubectl_nettraffic.errors import ClusterError

    settings = settings_from_mapping(
        {"prometheus": {"url": prometheus.url}, "metricsServer": {"enabled": False}}
    )

    def no_nodes():
        raise ClusterError("listing nodes: HTTP 403: RBAC forbids it")

    engine = _engine(
        settings,
        Measurer(settings, no_nodes, PrometheusSource(settings.prometheus, clock=lambda: END)),
    )
    board = engine.scoreboard
    assert engine.refresh() is None
    assert board.source_failures == {"prometheus": 0, "metrics-server": 0, "nodes": 1}
    assert board.last_errors == ("nodes: listing nodes: HTTP 403: RBAC forbids it",)


def test_a_snapshot_its_follower_fails_on_is_not_published_and_the_next_is_tried():
    board = FixedBoard({"a": 1e6, "b": 2e6})
    published = board.snapshot
    calls = []

    def follow(snapshot):  # what follows each snapshot (the in-flight state), failing once
        calls.append(snapshot)
        if len(calls) == 1:
            raise KeyError("a bug in the follower")
        board.inflight.adopt(snapshot)

    board.scoreboard.on_snapshot = follow
    outcome = board.measurer.measure()
    assert board.scoreboard.record(outcome) is None  # logged, counted, no exception
    assert board.scoreboard.follow_failures == 1
    assert board.scoreboard.snapshot is published and adopted(board.inflight) is published
    retried = board.refresh()
    assert retried is not None and board.scoreboard.snapshot is retried
    assert adopted(board.inflight) is retried and board.scoreboard.follow_failures == 1
