"""Who talks to whom: pair traffic from Istio's, Linkerd's and Beyla's
metrics through a real Prometheus, matched to the learner's workloads; bad
series counted, not fatal."""

import math
import re
import shutil
import subprocess
import time
from dataclasses import replace

import pytest
import requests
import yaml

from harness.prometheus import prometheus_with_history
from kubectl_nettraffic.cli.doctor import Failed, _peer_inputs
from kubectl_nettraffic.config import PeerLabelSettings, settings_from_mapping
from kubectl_nettraffic.errors import ConfigError
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.peer_traffic import (
    PAIRS_RULE,
    PeerTrafficSource,
    answer_bound,
    pair_rates,
    pairs_in,
    peer_query,
    peers_from,
    read_peers,
)
from kubectl_nettraffic.sources.prometheus import PrometheusSource
from tests.harness.flow_series import Flow, beyla_lines, istio_lines, linkerd_lines

END = float(int(time.time()) // 60 * 60)
WEB = Workload("shop", "Deployment", "web")
API = Workload("shop", "Deployment", "api")
DB = Workload("shop", "StatefulSet", "db")
CACHE = Workload("shop", "Deployment", "cache")
KNOWN = {WEB, API, DB, CACHE}

FLOWS = [
    Flow(("shop", "web"), ("shop", "api"), tcp_sent=3e6, tcp_received=1e6),
    Flow(("shop", "web"), ("shop", "api"), http_request=2e5, http_response=8e5),
    # api calls db; its proxy restarted two minutes ago: rate() handles the reset.
    Flow(("shop", "api"), ("shop", "db"), tcp_sent=5e6, tcp_received=5e5, reset_at=100),
    Flow(("shop", "web"), ("shop", "web"), tcp_sent=9e6),  # to itself
    Flow(("shop", "web"), ("other", "gone"), tcp_sent=7e6),  # not a workload the learner knows
]
# Each workload's kind as Linkerd labels it and as Beyla names its owner.
LINKERD_KINDS = {"web": "deployment", "api": "deployment", "db": "statefulset", "gone": "job"}
BEYLA_OWNERS = {"web": "Deployment", "api": "Deployment", "db": "StatefulSet", "gone": "Pod"}


def _settings(url: str, **peers):
    return settings_from_mapping(
        {"prometheus": {"url": url}, "peers": {"source": "istio", **peers}}
    )


@pytest.fixture(scope="module")
def prometheus():
    lines = [
        *istio_lines(FLOWS, END),
        *linkerd_lines(FLOWS, END, LINKERD_KINDS),
        *beyla_lines(FLOWS, END, BEYLA_OWNERS),
        *beyla_lines(FLOWS, END, BEYLA_OWNERS, prefix="obi"),
    ]
    server = prometheus_with_history([], END, more=lines)
    yield server
    server.stop()


def _read(prometheus, **peers):
    settings = _settings(prometheus.url, **peers)
    assert settings.peers.source in ("istio", "linkerd", "beyla", "obi")
    source = PrometheusSource(settings.prometheus, clock=lambda: END)
    return read_peers(source, settings.peers, settings.prometheus.window, KNOWN)


def test_pairs_are_both_directions_of_one_reporter_summed(prometheus):
    report = _read(prometheus)
    assert report is not None
    peers = {w: dict(p) for w, p in report.peers.items()}
    # web<->api: TCP both ways and HTTP both ways, the source reporter's only.
    assert peers[WEB][API] == pytest.approx(3e6 + 1e6 + 2e5 + 8e5, rel=1e-3)
    assert peers[API][WEB] == peers[WEB][API]
    # Across the counter reset: rate() counts from 0 at the first sample after
    # it (10 s after the reset, 5 s after the last sample before), so the 5 s
    # before the reset are lost from the 120 s window, as in any Prometheus.
    assert peers[API][DB] == pytest.approx(5.5e6 * (1 - 5 / 120), rel=1e-3)
    assert list(peers[API]) == [DB, WEB]  # busiest first
    assert report.ignored == {"self": 1, "unknown-workload": 1}


def _assert_same_pairs(report, expected):
    assert report.peers.keys() == expected.peers.keys()
    for workload, peers in expected.peers.items():
        theirs = report.peers[workload]
        assert [peer for peer, _ in theirs] == [peer for peer, _ in peers]
        assert [rate for _, rate in theirs] == pytest.approx([rate for _, rate in peers], rel=1e-3)


def test_the_destination_reporter_counts_the_same_flows_once(prometheus):
    by_source = _read(prometheus)
    by_destination = _read(prometheus, reporter="destination")
    assert by_source is not None and by_destination is not None
    _assert_same_pairs(by_destination, by_source)


@pytest.mark.parametrize("source", ["linkerd", "beyla", "obi"])
def test_linkerd_and_beyla_give_the_pairs_istio_gives(prometheus, source):
    """The same flows as each exporter writes them: Linkerd's client proxy
    (its outbound side to the server, not to its app; the server's inbound
    side not at all), Beyla's requests and answers as two flows."""
    by_istio = _read(prometheus)
    report = _read(prometheus, source=source)
    assert by_istio is not None and report is not None
    _assert_same_pairs(report, by_istio)
    assert set(report.ignored) == {"self", "unknown-workload"}
    # Each way apart: the flows one way only (to itself, to a workload gone)
    # are left out for what they are, not for the way that carries nothing.
    each_way = _read(prometheus, source=source, bytesEachWay=True)
    _assert_same_pairs(each_way, by_istio)
    assert set(each_way.ignored) == {"self", "unknown-workload"}


def test_the_busiest_peers_are_kept_by_both_ends_and_the_rest_counted(prometheus):
    report = _read(prometheus, maxPerWorkload=1)
    assert report is not None
    # api's busiest peer is db; web's only one is api, so web-api is kept
    # by both ends too: a pair either end keeps, both do.
    assert [peer for peer, _ in report.peers[API]] == [DB, WEB]
    assert report.peers[WEB] == [(API, dict(report.peers[API])[WEB])] and report.dropped == {}


# Ten clients each call the same five servers (50 pairs, 15 workloads).
CLIENTS = [f"c{i}" for i in range(10)]
SERVERS = [f"s{j}" for j in range(5)]
RATE = {
    (c, s): 1e5 * (1 + i) * (1 + 3 * j) + 7e3 * ((i * 5 + j * 3) % 11)
    for i, c in enumerate(CLIENTS)
    for j, s in enumerate(SERVERS)
}
CALLERS = {Workload("shop", "Deployment", name) for name in CLIENTS + SERVERS}


@pytest.fixture(scope="module")
def callers():
    flows = [Flow(("shop", c), ("shop", s), tcp_received=r) for (c, s), r in RATE.items()]
    server = prometheus_with_history([], END, more=list(istio_lines(flows, END)))
    yield server
    server.stop()


def _queries_answered(server) -> float:
    """Prometheus's own count of the queries it evaluated, off its /metrics."""
    text = requests.get(server.url + "/metrics", timeout=10).text
    found = re.search(
        r'prometheus_engine_query_duration_seconds_count\{slice="inner_eval"\} (\S+)', text
    )
    assert found, "Prometheus's /metrics has no query count"
    return float(found[1])


def test_pairs_within_the_bound_are_read_whole_and_cut_here(callers):
    """At maxPerWorkload 2 the cut may return 2 x 2 x 15 = 60 series: the
    50 pairs come back whole, and what is kept is what cutting every pair
    here keeps, to the byte."""
    settings = _settings(callers.url, maxPerWorkload=2)
    source = PrometheusSource(settings.prometheus, clock=lambda: END)
    window = settings.prometheus.window
    report = read_peers(source, settings.peers, window, CALLERS)
    whole = pairs_in(
        source.query_vector(pair_rates(settings.peers, window), at=END), CALLERS, settings.peers
    )
    assert answer_bound(settings.peers, len(CALLERS)) == 60
    assert report is not None and not report.cut_in_prometheus and report.series == 50
    assert (report.peers, report.dropped, report.calls) == (whole.peers, whole.dropped, whole.calls)


def test_past_the_bound_the_cut_starts_in_prometheus_and_keeps_what_either_end_would(callers):
    """At maxPerWorkload 1 the 50 pairs are past the bound (30): a client's
    call comes back from Prometheus only if it is the client's busiest or
    the server's busiest, and what comes back carries its full bytes."""
    settings = _settings(callers.url, maxPerWorkload=1)
    source = PrometheusSource(settings.prometheus, clock=lambda: END)
    window = settings.prometheus.window
    answer = source.query_vector(peer_query(settings.peers, window), at=END)
    uncapped = source.query_vector(pair_rates(settings.peers, window), at=END)
    report = read_peers(source, settings.peers, window, CALLERS)
    busiest: set[tuple[str, str]] = set()  # each end's busiest call
    for end in (0, 1):
        for name in {pair[end] for pair in RATE}:
            busiest.add(max((p for p in RATE if p[end] == name), key=RATE.__getitem__))
    came_back = {
        (series["metric"]["source_workload"], series["metric"]["destination_workload"])
        for series in answer
    }
    assert len(uncapped) == 50 and came_back == busiest and len(came_back) < 30
    assert report is not None and report.cut_in_prometheus and report.series == len(came_back)
    said = _peer_inputs(source, settings, CALLERS)
    assert "each end's busiest cut in Prometheus" in said and "maxPerWorkload 1" in said
    wide = _settings(callers.url, maxPerWorkload=2)
    assert "cut in Prometheus" not in _peer_inputs(source, wide, CALLERS)
    for (c, s), bytes_per_second in RATE.items():
        listed = dict(report.peers.get(Workload("shop", "Deployment", c), []))
        got = listed.get(Workload("shop", "Deployment", s))
        assert (got is not None) == ((c, s) in busiest)
        if got is not None:
            assert got == pytest.approx(bytes_per_second, rel=0.05)


def test_after_an_answer_past_the_bound_the_learner_cuts_at_once_for_a_while(callers):
    """The first read tries every pair (one query past the bound) and then
    cuts (a second); the next CUT_READS_BEFORE_WHOLE cut at once (one
    query each); then whole is tried again. With the bound wide enough,
    one query whole."""
    settings = _settings(callers.url, maxPerWorkload=1)
    learner_source = PeerTrafficSource(
        PrometheusSource(settings.prometheus, clock=lambda: END), settings.peers
    )
    queries, cut = [], []
    for _ in range(PeerTrafficSource.CUT_READS_BEFORE_WHOLE + 2):
        before = _queries_answered(callers)
        report = learner_source.read(CALLERS, END)
        queries.append(_queries_answered(callers) - before)
        assert report is not None
        cut.append(report.cut_in_prometheus)
    assert queries == [2] + [1] * PeerTrafficSource.CUT_READS_BEFORE_WHOLE + [2]
    assert all(cut)
    wide_settings = _settings(callers.url, maxPerWorkload=2)
    wide = PeerTrafficSource(
        PrometheusSource(wide_settings.prometheus, clock=lambda: END), wide_settings.peers
    )
    before = _queries_answered(callers)
    report = wide.read(CALLERS, END)
    assert _queries_answered(callers) - before == 1
    assert report is not None and not report.cut_in_prometheus


@pytest.mark.parametrize("source", ["istio", "linkerd"])
def test_the_cap_is_taken_on_a_pair_s_total_and_both_its_ways_come_back(source):
    """At one peer a workload: c's pair with s1 (3 MB/s each way) is its
    busiest by total, though its call to s2 (5 MB/s, one way) is bigger
    than either of s1's ways; s1 and s2 each keep another caller."""
    flows = [
        Flow(("shop", "c"), ("shop", "s1"), tcp_received=3e6, tcp_sent=3e6),
        Flow(("shop", "c"), ("shop", "s2"), tcp_received=5e6),
        Flow(("shop", "d"), ("shop", "s1"), tcp_received=7e6),
        Flow(("shop", "e"), ("shop", "s2"), tcp_received=9e6),
    ]
    kinds = dict.fromkeys(("c", "d", "e", "s1", "s2"), "deployment")
    lines = istio_lines(flows, END) if source == "istio" else linkerd_lines(flows, END, kinds)
    known = {Workload("shop", "Deployment", name) for name in kinds}
    c, s1, s2 = (Workload("shop", "Deployment", name) for name in ("c", "s1", "s2"))
    server = prometheus_with_history([], END, more=list(lines))
    try:
        settings = _settings(server.url, source=source, maxPerWorkload=1, bytesEachWay=True)
        client = PrometheusSource(settings.prometheus, clock=lambda: END)
        report = read_peers(client, settings.peers, settings.prometheus.window, known)
    finally:
        server.stop()
    assert report is not None
    assert [peer for peer, _ in report.peers[c]] == [s1]
    assert report.sent[(c, s1)] == pytest.approx(3e6, rel=0.05)
    assert report.sent[(s1, c)] == pytest.approx(3e6, rel=0.05)
    assert (c, s2) not in report.sent


def test_recorded_pairs_read_as_the_flow_metrics_do(tmp_path):
    """peers.recordingRule: the pairs' rule backfilled by promtool (as
    Prometheus would have recorded it, once a minute) over the same
    flows; the read of the recorded series gives what the read of the flow
    metrics gives, cut and counted the same."""
    # Beside FLOWS, three clients calling three servers: at one peer a
    # workload, the cap cuts some pairs.
    calls = [
        Flow(("shop", f"c{i}"), ("shop", f"s{j}"), tcp_received=1e5 * (1 + i + 3 * j))
        for i in range(3)
        for j in range(3)
    ]
    known = KNOWN | {Workload("shop", "Deployment", f"{e}{i}") for e in "cs" for i in range(3)}
    server = prometheus_with_history([], END, more=list(istio_lines(FLOWS + calls, END)))
    try:
        settings = _settings(
            server.url, maxPerWorkload=1, bytesEachWay=True, recordingRule={"enabled": True}
        )
        window = settings.prometheus.window
        rules = tmp_path / "rules.yaml"
        expression = pair_rates(settings.peers, window)
        rules.write_text(
            yaml.safe_dump(
                {
                    "groups": [
                        {
                            "name": "nettraffic-pairs",
                            "rules": [{"record": PAIRS_RULE, "expr": expression}],
                        }
                    ]
                }
            )
        )
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "rules", f"--url={server.url}",
             f"--start={END - 300:.0f}", f"--end={END + 1:.0f}", "--eval-interval=60s",
             f"--output-dir={tmp_path / 'blocks'}", "--quiet", str(rules)],
            check=True, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        for block in (tmp_path / "blocks").iterdir():
            shutil.move(str(block), server.data_dir)
        server.restart()
        source = PrometheusSource(settings.prometheus, clock=lambda: END)
        answer = source.query_vector(f"timestamp({PAIRS_RULE})", at=END)
        # Every pair, uncut, a series each way it carries (the flows' 6, the calls' 9).
        assert len(answer) == 6 + 9
        # The last evaluation before END: what the read at END finds.
        (evaluated,) = {float(series["value"][1]) for series in answer}
        assert END - 60 < evaluated <= END
        plain = replace(
            settings.peers, recording_rule=replace(settings.peers.recording_rule, enabled=False)
        )
        # Read whole (the answer within the cap's bound), and cut in Prometheus.
        reads = [
            (
                read_peers(source, settings.peers, window, known, at=END, whole_first=whole),
                read_peers(source, plain, window, known, at=evaluated, whole_first=whole),
            )
            for whole in (True, False)
        ]
        assert f"(recorded: {PAIRS_RULE})" in _peer_inputs(source, settings, known)
    finally:
        server.stop()
    for (recorded, inline), whole in zip(reads, (True, False), strict=True):
        assert recorded is not None and inline is not None and not recorded.rule_missing
        _assert_same_pairs(recorded, inline)
        assert (recorded.calls, recorded.dropped, recorded.ignored, recorded.sent) == (
            inline.calls,
            inline.dropped,
            inline.ignored,
            inline.sent,
        )
        assert recorded.series == inline.series
        assert recorded.cut_in_prometheus == inline.cut_in_prometheus == (not whole)
    (whole_read, _), (cut_read, _) = reads
    assert whole_read and cut_read and whole_read.series == 15 > cut_read.series


def test_without_recorded_pairs_the_flow_metrics_are_read_and_it_is_said(prometheus):
    report = _read(prometheus, recordingRule={"enabled": True})
    inline = _read(prometheus)
    assert report is not None and inline is not None and report.rule_missing
    _assert_same_pairs(report, inline)
    assert not inline.rule_missing
    settings = _settings(prometheus.url, recordingRule={"enabled": True})
    source = PrometheusSource(settings.prometheus, clock=lambda: END)
    with pytest.raises(
        Failed, match=f"peers.recordingRule is on but Prometheus holds no {PAIRS_RULE}"
    ):
        _peer_inputs(source, settings, set(KNOWN))


def test_a_pair_neither_end_keeps_is_dropped_from_both_and_counted():
    a, b, c, d = (Workload("shop", "Deployment", name) for name in "abcd")
    series = [
        {"metric": {"sw": s, "sn": "shop", "dw": t, "dn": "shop"}, "value": [END, str(rate)]}
        for s, t, rate in (("a", "b", 9.0), ("c", "d", 8.0), ("a", "c", 1.0))
    ]
    labels = PeerLabelSettings("sw", "sn", "dw", "dn")
    report = peers_from(series, {a, b, c, d}, 1, labels)
    # a keeps b, c keeps d: a-c is the busiest of neither.
    assert report.peers == {a: [(b, 9.0)], b: [(a, 9.0)], c: [(d, 8.0)], d: [(c, 8.0)]}
    assert report.dropped == {a: 1, c: 1}


def test_no_source_reads_nothing(prometheus):
    settings = settings_from_mapping({"prometheus": {"url": prometheus.url}})
    assert settings.peers.source == "none" and peer_query(settings.peers, 120.0) is None
    source = PrometheusSource(settings.prometheus, clock=lambda: END)
    assert read_peers(source, settings.peers, 120.0, KNOWN) is None


def _series(labels: dict[str, str], value: object) -> dict:
    return {"metric": labels, "value": [END, value]}


def _pair(src: str, dst: str, namespace: str = "shop") -> dict[str, str]:
    return {
        "source_workload": src,
        "source_workload_namespace": namespace,
        "destination_workload": dst,
        "destination_workload_namespace": namespace,
    }


def test_bad_series_are_counted_by_reason_and_left_out():
    twins = {Workload("shop", "Deployment", "twin"), Workload("shop", "StatefulSet", "twin")}
    result = [
        _series(_pair("web", "api"), "1000"),
        _series({"source_workload": "web"}, "1000"),  # no namespace, no destination
        _series(_pair("web", "api"), "NaN"),
        _series(_pair("web", "api"), "-5"),
        _series(_pair("web", "api"), "0"),
        _series(_pair("web", "api"), None),
        _series(_pair("web", "twin"), "1000"),  # two kinds share the name
        _series(_pair("web", "nobody"), "1000"),
        _series(_pair("web", "web"), "1000"),
    ]
    report = peers_from(result, KNOWN | twins, 8)
    assert {w: dict(p) for w, p in report.peers.items()} == {WEB: {API: 1000.0}, API: {WEB: 1000.0}}
    assert report.ignored == {
        "no-workload-labels": 1,
        "no-rate": 4,
        "ambiguous-workload": 1,
        "unknown-workload": 1,
        "self": 1,
    }
    assert not math.isnan(sum(rate for peers in report.peers.values() for _, rate in peers))


def test_a_query_of_ones_own_names_its_labels():
    settings = settings_from_mapping(
        {
            "peers": {
                "source": "query",
                "query": "sum by (src, src_ns, dst, dst_ns) (my_flow_bytes)",
                "labels": {
                    "sourceWorkload": "src",
                    "sourceNamespace": "src_ns",
                    "destinationWorkload": "dst",
                    "destinationNamespace": "dst_ns",
                },
            }
        }
    )
    # Cut in Prometheus to each end's busiest, by the labels named.
    assert peer_query(settings.peers, 120.0) == (
        "topk by (src, src_ns) (8, sum by (src, src_ns, dst, dst_ns) (my_flow_bytes))"
        " or topk by (dst, dst_ns) (8, sum by (src, src_ns, dst, dst_ns) (my_flow_bytes))"
    )
    series = _series({"src": "api", "src_ns": "shop", "dst": "db", "dst_ns": "shop"}, "42")
    report = peers_from([series], KNOWN, 8, settings.peers.labels)
    assert report.peers[DB] == [(API, 42.0)]


def test_doctor_says_which_flow_source_it_found_or_why_none(prometheus):
    from kubectl_nettraffic.cli.doctor import Failed, _peer_inputs

    settings = _settings(prometheus.url)
    source = PrometheusSource(settings.prometheus, clock=lambda: END)
    assert _peer_inputs(source, settings, set(KNOWN)) == (
        "istio: 2 pair(s) among 3 workload(s); left out: self 1, unknown-workload 1"
    )
    with pytest.raises(Failed, match=r"istio: no pair of known workloads \(series left out: "):
        _peer_inputs(source, settings, set())  # learning found no workloads
    waypoint = _settings(prometheus.url, reporter="waypoint")
    with pytest.raises(Failed, match=r"\(no series\)"):
        _peer_inputs(source, waypoint, set(KNOWN))
    off = settings_from_mapping({"prometheus": {"url": prometheus.url}})
    assert "not configured" in _peer_inputs(source, off, set(KNOWN))


def test_peers_cluster_selects_one_cluster_of_a_shared_prometheus():
    # Two clusters' Beyla agents write to one Prometheus, the second with
    # twice the bytes between the same-named workloads.
    rates = ("tcp_sent", "tcp_received", "http_request", "http_response")
    doubled = [replace(flow, **{f: 2 * getattr(flow, f) for f in rates}) for flow in FLOWS]
    other = (
        line.replace('k8s_cluster_name="test"', 'k8s_cluster_name="other"')
        for line in beyla_lines(doubled, END, BEYLA_OWNERS)
    )
    shared = [*beyla_lines(FLOWS, END, BEYLA_OWNERS), *(x for x in other if not x.startswith("#"))]
    server = prometheus_with_history([], END, more=shared)
    try:
        alone = _read(server, source="beyla", cluster="k8s_cluster_name=test")
        both = _read(server, source="beyla")
        # doctor names the clusters and the fix while none is selected.
        settings = _settings(server.url, source="beyla")
        prometheus = PrometheusSource(settings.prometheus, clock=lambda: END)
        with pytest.raises(Failed, match=r"series of 2 clusters \(other, test\)") as failed:
            _peer_inputs(prometheus, settings, set(KNOWN))
        assert failed.value.fix == "set peers.cluster: k8s_cluster_name=<this cluster's name>"
        chosen = _settings(server.url, source="beyla", cluster="k8s_cluster_name=test")
        assert _peer_inputs(prometheus, chosen, set(KNOWN)).startswith("beyla: ")
    finally:
        server.stop()
    assert alone is not None and both is not None
    web_api = dict(alone.peers[WEB])[API]
    assert web_api == pytest.approx(3e6 + 1e6 + 2e5 + 8e5, rel=1e-3)
    # Without it, the two clusters' same-named workloads cannot be told
    # apart: nothing is summed across them, every series is counted.
    assert both.peers == {} and both.ignored == {"several-clusters": both.series}
    assert both.series > 0


def test_peers_cluster_must_be_label_equals_value():
    with pytest.raises(ConfigError, match="is not label=value"):
        _settings("http://unused", cluster="prod")
