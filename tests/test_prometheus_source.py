"""The Prometheus source against a real Prometheus server with backfilled,
node_exporter-shaped history (promtool create-blocks-from openmetrics)."""

import socket
import threading
import time

import pytest
import requests

from harness.fakeapi import node
from harness.prometheus import Device, Exporter, prometheus_with_history
from kubectl_nettraffic.config import PrometheusSettings, settings_from_mapping
from kubectl_nettraffic.errors import SourceError
from kubectl_nettraffic.kube.nodes import node_from_json
from kubectl_nettraffic.labels import parse_selector
from kubectl_nettraffic.scoring.node_scores import score_nodes
from kubectl_nettraffic.sources.prometheus import PrometheusSource

END = float(int(time.time()) // 60 * 60 - 120)  # whole minute, safely in the past
GBIT = 1.25e8  # bytes/s


def _exporter(n: int, devices, job="node-exporter", nodename=None, **kw) -> Exporter:
    name = nodename or f"n{n}"
    return Exporter(f"10.0.0.{n}:9100", name, devices, job=job, extra_labels={"node": name}, **kw)


EXPORTERS = [
    _exporter(
        1,
        [
            Device("eth0", 1e6, 2e6, speed=10 * GBIT),
            Device("veth9a1", 5e6, 5e6),
            Device("lo", 9e6, 9e6),
            Device("cali77", 4e6, 4e6),
        ],
    ),
    _exporter(2, [Device("eth0", 10e6, 5e6, speed=GBIT, reset_at=75)]),
    _exporter(3, [Device("eth0", 100e3, 100e3, speed=-1), Device("ens5", 50e3, 0)]),
    _exporter(4, [Device("eth0", 3e6, 3e6)]),
    _exporter(4, [Device("eth0", 3.03e6, 2.9e6)], job="node-exporter-dup"),
    _exporter(6, [Device("eth0", 1e6, 1e6)], non_finite=True),
    Exporter("10.9.9.9:9100", "ghost", [Device("eth0", 1e6, 1e6)], extra_labels={"node": "ghost"}),
]
NODES = [node_from_json(node(f"n{i}", ip=f"10.0.0.{i}")) for i in range(1, 7)]


@pytest.fixture(scope="module")
def prometheus():
    server = prometheus_with_history(EXPORTERS, END)
    yield server
    server.stop()


class CountingSession(requests.Session):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.calls += 1
        return super().request(*args, **kwargs)


def _source(url: str, session=None, **overrides) -> PrometheusSource:
    raw = {"prometheus": {"url": url, **overrides}}
    return PrometheusSource(
        settings_from_mapping(raw).prometheus, session=session, clock=lambda: END
    )


@pytest.mark.parametrize("node_match", ["uname", "label:node", "internal-ip"])
def test_rates_per_node_within_one_percent(prometheus, node_match):
    session = CountingSession()
    report = _source(prometheus.url, session, nodeMatch=node_match).fetch(NODES)
    assert session.calls == 1, "one query per refresh, whatever the cluster size"
    t = report.by_node
    assert t["n1"].receive == pytest.approx(1e6, rel=0.01)  # veth, lo, cali excluded
    assert t["n1"].transmit == pytest.approx(2e6, rel=0.01)
    assert t["n2"].receive == pytest.approx(10e6, rel=0.01)  # across the counter reset
    assert t["n2"].transmit == pytest.approx(5e6, rel=0.01)
    assert t["n3"].receive == pytest.approx(150e3, rel=0.01)  # eth0 + ens5
    # Two exporters on n4: the highest, never the sum.
    assert t["n4"].receive == pytest.approx(3.03e6, rel=0.01)
    assert t["n4"].transmit == pytest.approx(3e6, rel=0.01)
    assert set(report.duplicate_exporters) == {"n4"}
    assert t["n1"].link_speed == 10 * GBIT and t["n2"].link_speed == GBIT
    assert t["n3"].link_speed is None  # speed -1 means unknown
    assert report.nodes_without_series == ("n5", "n6")
    assert any(s.startswith("10.0.0.6:9100") or "n6/" in s for s in report.non_finite)
    assert len(report.unmapped_series) == 1 and "10.9.9.9:9100" in report.unmapped_series[0]


def test_exact_ranking_from_real_data(prometheus):
    settings = settings_from_mapping({"prometheus": {"url": prometheus.url}})
    report = _source(prometheus.url).fetch(NODES)
    ranked = score_nodes(NODES, report.by_node, None, settings.scoring, "both", parse_selector(""))
    assert [s.name for s in ranked] == ["n3", "n1", "n4", "n2", "n5", "n6"]
    by_name = {s.name: s for s in ranked}
    assert by_name["n2"].score == pytest.approx(0.0, abs=0.5)
    assert by_name["n3"].score == pytest.approx(100 * (1 - 250e3 / 15e6), abs=0.5)
    assert not by_name["n5"].has_data and "no traffic series" in by_name["n5"].reason


def test_link_utilization_mode_prefers_the_fast_nic(prometheus):
    settings = settings_from_mapping(
        {"prometheus": {"url": prometheus.url}, "scoring": {"mode": "link-utilization"}}
    )
    report = _source(prometheus.url).fetch(NODES)
    ranked = score_nodes(NODES, report.by_node, None, settings.scoring, "both", parse_selector(""))
    by_name = {s.name: s for s in ranked}
    assert by_name["n2"].link_utilization == pytest.approx(10e6 / GBIT, rel=0.01)
    # n3 has no speed: assumed the slowest known (1 Gbit) and says so.
    assert "assumed the slowest known" in by_name["n3"].reason
    assert by_name["n1"].score > by_name["n4"].score


@pytest.mark.parametrize(("direction", "n2_load"), [("receive", 10e6), ("transmit", 5e6)])
def test_direction(prometheus, direction, n2_load):
    from kubectl_nettraffic.scoring.node_scores import directional_load

    report = _source(prometheus.url, direction=direction).fetch(NODES)
    assert directional_load(report.by_node["n2"], direction) == pytest.approx(n2_load, rel=0.01)


def test_device_include_regex(prometheus):
    report = _source(prometheus.url, deviceInclude="ens.*").fetch(NODES)
    assert set(report.by_node) == {"n3"}
    assert report.by_node["n3"].receive == pytest.approx(50e3, rel=0.01)


def test_empty_result_is_an_error_that_names_the_regexes(prometheus):
    with pytest.raises(SourceError, match="no node_network_.*check that node_exporter is scraped"):
        _source(prometheus.url, deviceInclude="nothing-matches").fetch(NODES)


def test_http_errors_and_wrong_urls(prometheus):
    with pytest.raises(SourceError, match="HTTP 404.*not /graph"):
        _source(prometheus.url + "/graph").fetch(NODES)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with pytest.raises(SourceError, match="unreachable.*check prometheus.url"):
        _source(f"http://127.0.0.1:{port}").fetch(NODES)


def test_a_hung_prometheus_times_out_with_a_clear_message():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    held = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])  # accept, never answer
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        with pytest.raises(SourceError, match=r"did not answer within 0\.3s"):
            _source(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout="300ms").fetch(NODES)
        assert time.monotonic() - started < 2
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def test_bearer_token_and_headers_are_sent(tmp_path):
    from harness.fakeapi import FakeKubeAPI  # any HTTP server that records requests

    seen = FakeKubeAPI()
    try:
        token = tmp_path / "token"
        token.write_text("s3cret\n")
        settings = PrometheusSettings(
            url=seen.url, bearer_token_file=str(token), headers={"X-Scope-OrgID": "t1"}
        )
        with pytest.raises(SourceError, match="HTTP 401"):
            PrometheusSource(settings).fetch(NODES)
        # The recording server refuses a foreign token; what matters is what reached it.
        sent = seen.requests[-1]
        assert sent.path == "/api/v1/query"
        assert sent.headers["Authorization"] == "Bearer s3cret"
        assert sent.headers["X-Scope-OrgID"] == "t1"
        assert b"node_network_receive_bytes_total" in sent.body
    finally:
        seen.stop()
