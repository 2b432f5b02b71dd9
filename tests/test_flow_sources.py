"""Each flow source's series as upstream writes them, in a real Prometheus:
every true pair comes back within 5% of its bytes and with who calls whom
where the source says it, nothing is invented, and what cannot be matched
is counted by reason. The ends the sources name differently from the
learner: an Argo Rollout, an OpenShift DeploymentConfig, a plain Job, a
Service Beyla saw; and each node's Beyla agent reporting what crosses it."""

import argparse
import time

import pytest

from harness.prometheus import prometheus_with_history
from harness.reviews import pod
from kubectl_nettraffic.config import Settings, settings_from_mapping
from kubectl_nettraffic.kube.client import api_client
from kubectl_nettraffic.kube.service_routing import read_service_routing, routing_of
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.flow_ends import WorkloadNames
from kubectl_nettraffic.learning.peer_traffic import PeerReport, read_peers
from kubectl_nettraffic.sources.prometheus import PrometheusSource
from tests.harness.flow_series import (
    Flow,
    beyla_lines,
    istio_lines,
    linkerd_lines,
    through_waypoint,
)

END = float(int(time.time()) // 60 * 60)
NS = "shop"
WEB = Workload(NS, "Deployment", "web")
API = Workload(NS, "Deployment", "api")
DB = Workload(NS, "StatefulSet", "db")
CHECKOUT = Workload(NS, "Rollout", "checkout")
LEGACY = Workload(NS, "ReplicationController", "legacy-3")  # DeploymentConfig legacy, version 3
LEGACY_OLD = Workload(NS, "ReplicationController", "legacy-2")
MIGRATE = Workload(NS, "Job", "db-migrate")
KNOWN = {WEB, API, DB, CHECKOUT, LEGACY, LEGACY_OLD, MIGRATE}

# Ends as Istio names them (GetDeployMetaFromPod): the Rollout and the
# DeploymentConfig by their own names, the Job by itself.
FLOWS = [
    Flow((NS, "web"), (NS, "api"), tcp_received=2e6, tcp_sent=6e6),
    Flow((NS, "api"), (NS, "db"), tcp_received=1e6, tcp_sent=3e6),
    Flow((NS, "checkout"), (NS, "api"), http_request=4e5, http_response=1.2e6),
    Flow((NS, "legacy"), (NS, "db"), tcp_received=5e5, tcp_sent=2.5e6),
    Flow((NS, "db-migrate"), (NS, "db"), tcp_received=8e5, tcp_sent=1e5),
]
TRUE_PAIRS = {
    (WEB, API): 8e6,
    (API, DB): 4e6,
    (CHECKOUT, API): 1.6e6,
    (LEGACY, DB): 3e6,
    (MIGRATE, DB): 9e5,
}
# What each end sends the other (web's requests to api 2 MB/s, api's answers 6).
TRUE_SENT = {
    (WEB, API): 2e6,
    (API, WEB): 6e6,
    (API, DB): 1e6,
    (DB, API): 3e6,
    (CHECKOUT, API): 4e5,
    (API, CHECKOUT): 1.2e6,
    (LEGACY, DB): 5e5,
    (DB, LEGACY): 2.5e6,
    (MIGRATE, DB): 8e5,
    (DB, MIGRATE): 1e5,
}
# Linkerd's kind labels, and the values that are not Istio's names.
LINKERD_KINDS = {
    "web": "deployment",
    "api": "deployment",
    "db": "statefulset",
    "checkout": "replicaset",
    "legacy": "replicationcontroller",
    "db-migrate": "job",
}
LINKERD_NAMES = {"checkout": "checkout-6d4f9b7c8", "legacy": "legacy-3"}
# Beyla's and OBI's owner types and names (ownersFrom): the Rollout's
# ReplicaSet cut into a "Deployment", the Job cut into a "CronJob".
BEYLA_TYPES = {
    "web": "Deployment",
    "api": "Deployment",
    "db": "StatefulSet",
    "checkout": "Deployment",
    "legacy": "ReplicationController",
    "db-migrate": "CronJob",
    "api-svc": "Service",
}
BEYLA_NAMES = {"legacy": "legacy-3", "db-migrate": "db", "api-svc": "api"}
# web also sends to api's cluster IP where the agent saw it before the
# translation: a Service end, not a pod's.
BEYLA_FLOWS = [*FLOWS, Flow((NS, "web"), (NS, "api-svc"), tcp_received=3e5)]
NODES = {  # each workload's node IP: web, checkout and legacy apart from api and db
    "web": "10.1.0.1",
    "checkout": "10.1.0.1",
    "legacy": "10.1.0.2",
    "db-migrate": "10.1.0.3",
    "api": "10.1.0.3",
    "db": "10.1.0.3",
    "api-svc": "10.1.0.3",
}


@pytest.fixture(scope="module")
def prometheus():
    lines = [
        *istio_lines(FLOWS, END),
        *linkerd_lines(FLOWS, END, LINKERD_KINDS, renamed=LINKERD_NAMES),
        *beyla_lines(BEYLA_FLOWS, END, BEYLA_TYPES, renamed=BEYLA_NAMES, nodes=NODES),
        *beyla_lines(BEYLA_FLOWS, END, BEYLA_TYPES, prefix="obi", renamed=BEYLA_NAMES, nodes=NODES),
    ]
    server = prometheus_with_history([], END, more=lines)
    yield server
    server.stop()


def _client(url: str, **peers: object) -> tuple[Settings, PrometheusSource]:
    """The settings of a flow source at ``url``, and its client as of END."""
    settings = settings_from_mapping({"prometheus": {"url": url}, "peers": peers})
    return settings, PrometheusSource(settings.prometheus, clock=lambda: END)


def _read(prometheus, source: str, **peers: object) -> PeerReport:
    settings, client = _client(prometheus.url, source=source, **peers)
    report = read_peers(client, settings.peers, settings.prometheus.window, KNOWN)
    assert report is not None
    return report


def _pairs(report: PeerReport) -> dict[frozenset[Workload], float]:
    pairs: dict[frozenset[Workload], float] = {}
    for workload, peers in report.peers.items():
        for peer, rate in peers:
            assert pairs.setdefault(frozenset((workload, peer)), rate) == rate  # both ends agree
    return pairs


@pytest.mark.parametrize("source", ["istio", "linkerd"])
def test_the_meshes_give_every_pair_its_bytes_and_its_caller(prometheus, source):
    report = _read(prometheus, source)
    assert _pairs(report) == pytest.approx(
        {frozenset(pair): rate for pair, rate in TRUE_PAIRS.items()}, rel=0.05
    )
    assert report.calls == set(TRUE_PAIRS)  # the caller named first, nothing reversed
    assert report.ignored == {} and report.sent == {}  # the ways only when asked
    each_way = _read(prometheus, source, bytesEachWay=True)
    assert _pairs(each_way) == _pairs(report) and each_way.calls == report.calls
    assert each_way.sent == pytest.approx(TRUE_SENT, rel=0.05)  # none swapped
    assert each_way.ignored == {}


@pytest.mark.parametrize("source", ["beyla", "obi"])
def test_the_ebpf_agents_count_each_flow_once_and_say_what_they_cannot_name(prometheus, source):
    report = _read(prometheus, source)
    counted = {pair: rate for pair, rate in TRUE_PAIRS.items() if MIGRATE not in pair}
    assert _pairs(report) == pytest.approx(
        {frozenset(pair): rate for pair, rate in counted.items()}, rel=0.05
    )
    # Requests and answers are two series with their ends swapped: the
    # source names both ends as senders, so neither is said to call.
    assert report.calls == set(counted) | {(server, client) for client, server in counted}
    # Each series is one way: from its source end.
    assert report.sent == pytest.approx(
        {ends: rate for ends, rate in TRUE_SENT.items() if MIGRATE not in ends}, rel=0.05
    )
    # Per pair of nodes, the destination node's agent's copy (requests and
    # answers apart): web/api, checkout/api, legacy/db, web/api-svc (one
    # way only); the Job cut into a CronJob "db" both ways; the Service end.
    assert report.ignored == {"other-agent": 7, "job-name-cut": 2, "service-end": 1}


def test_ends_named_the_sources_way_are_matched_by_their_rules():
    names = WorkloadNames(KNOWN | {Workload(NS, "Deployment", "db")})
    assert names.find(NS, "legacy") == LEGACY  # the DeploymentConfig's newest version
    assert names.find(NS, "checkout-6d4f9b7c8") == CHECKOUT  # Linkerd's ReplicaSet label
    assert names.find(NS, "checkout", "Deployment") == CHECKOUT  # Beyla's cut ReplicaSet
    # Beyla's "CronJob db" is a Job whose name it cut, not the Deployment db.
    assert names.find(NS, "db", "CronJob") == "job-name-cut"
    assert names.find(NS, "db", "StatefulSet") == DB
    assert names.find(NS, "api", "Service") == "service-end"
    assert names.find(NS, "db") == "ambiguous-workload"  # two kinds, no type said
    assert names.find(NS, "web-7") == "unknown-workload"  # no such RC, no such Rollout
    assert names.find("other", "legacy") == "unknown-workload"


def test_doctor_says_when_the_agents_ips_are_not_selected(prometheus):
    from kubectl_nettraffic.cli.doctor import _peer_inputs

    lines = list(beyla_lines(FLOWS, END, BEYLA_TYPES, renamed=BEYLA_NAMES))  # no IPs selected
    server = prometheus_with_history([], END, more=lines)
    try:
        settings, client = _client(server.url, source="beyla")
        bare = _peer_inputs(client, settings, KNOWN)
    finally:
        server.stop()
    assert "may count twice (select beyla.ip and k8s.src.node.ip)" in bare
    settings, client = _client(prometheus.url, source="beyla")
    placed = _peer_inputs(client, settings, KNOWN)
    assert "count twice" not in placed and "other-agent 7" in placed


# Istio ambient: web calls api through the namespace's waypoint; api calls db
# directly; web calls cache through a waypoint that reports nothing.
WAYPOINT = Workload(NS, "Deployment", "waypoint")
CACHE = Workload(NS, "Deployment", "cache")
AMBIENT = [
    *through_waypoint(FLOWS[0], (NS, "waypoint")),
    FLOWS[1],
    *through_waypoint(Flow((NS, "web"), (NS, "cache"), tcp_received=7e5), (NS, "silent"))[:2],
]


def _enrolled(name: str, namespace: str = NS, kind: str = "Service", **labels: str) -> dict:
    metadata = {"name": name, "labels": {"istio.io/use-waypoint": labels.pop("waypoint", "")}}
    if kind == "Service":
        metadata["namespace"] = namespace
    metadata["labels"] |= {key.replace("_", "-"): value for key, value in labels.items()}
    return {"kind": kind, "metadata": metadata}


def test_waypoints_are_named_by_services_and_namespaces():
    services = [_enrolled("api", waypoint="waypoint"), _enrolled("db")]
    namespaces = [
        _enrolled("shop", kind="Namespace", waypoint="silent"),
        _enrolled(
            "info",
            kind="Namespace",
            waypoint="shared",
            **{"istio.io/use_waypoint_namespace": "mesh"},
        ),
    ]
    assert routing_of(services, [], namespaces).waypoints == {
        (NS, "waypoint"),
        (NS, "silent"),
        ("mesh", "shared"),
    }


@pytest.mark.parametrize("reporter", ["source", "destination"])
def test_an_ambient_waypoint_s_series_give_the_real_ends_and_its_legs_are_left_out(reporter):
    server = prometheus_with_history([], END, more=list(istio_lines(AMBIENT, END)))
    try:
        settings, client = _client(server.url, source="istio", reporter=reporter)
        waypoints = routing_of(
            [_enrolled("api", waypoint="waypoint"), _enrolled("cache", waypoint="silent")], []
        ).waypoints
        known = KNOWN | {WAYPOINT, CACHE}
        window = settings.prometheus.window
        report = read_peers(client, settings.peers, window, known, END, waypoints)
    finally:
        server.stop()
    assert report is not None
    assert _pairs(report) == pytest.approx(
        {frozenset((WEB, API)): 8e6, frozenset((API, DB)): 4e6}, rel=0.05
    )
    assert report.calls == {(WEB, API), (API, DB)}
    assert WAYPOINT not in report.peers  # never pulled toward
    # The client's leg to each waypoint (and, read by the destination
    # reporter, the waypoint's leg to the server): web-cache is lost with
    # its silent waypoint, and counted.
    legs = {"source": 2, "destination": 4}[reporter]
    assert report.ignored == {"waypoint-leg": legs}


def test_doctor_leaves_out_the_legs_through_the_waypoints_the_cluster_names(fake_api, kubeconfig):
    from kubectl_nettraffic.cli.doctor import Doctor, _peer_inputs

    fake_api.put({"apiVersion": "v1", **_enrolled("api", waypoint="waypoint")})
    fake_api.put({"apiVersion": "v1", **_enrolled(NS, kind="Namespace", waypoint="silent")})
    server = prometheus_with_history([], END, more=list(istio_lines(AMBIENT, END)))
    try:
        settings = settings_from_mapping(
            {
                "prometheus": {"url": server.url},
                "peers": {"source": "istio"},
                "kubeconfig": kubeconfig,
            }
        )
        client = PrometheusSource(settings.prometheus, clock=lambda: END)
        args = argparse.Namespace(context=None, webhook_namespace="x", webhook_service="y")
        waypoints = Doctor(args, settings)._waypoints()
        found = _peer_inputs(client, settings, KNOWN | {WAYPOINT, CACHE}, waypoints)
        unaware = _peer_inputs(client, settings, KNOWN | {WAYPOINT, CACHE})
    finally:
        server.stop()
    assert waypoints == {(NS, "waypoint"), (NS, "silent")}
    assert found.startswith("istio: 2 pair(s)") and "waypoint-leg 2" in found
    # Without the waypoints, the legs read as pairs with the waypoints.
    assert "waypoint-leg" not in unaware and "istio: 2 pair(s)" not in unaware


def test_a_pod_enrolled_by_its_own_label_names_its_waypoint(fake_api, kubeconfig):
    # api's pods are enrolled one by one, not through their Service.
    labels = {"app": "api", "istio.io/use-waypoint": "waypoint"}
    fake_api.put(pod(name="api-6c8d9f-x1", namespace=NS, labels=labels))
    fake_api.put(pod(name="web-7d9c4b-y2", namespace=NS, labels={"app": "web"}))
    other = {"istio.io/use-waypoint": "edge", "istio.io/use-waypoint-namespace": "mesh"}
    fake_api.put(pod(name="db-0", namespace=NS, labels=other))
    routing = read_service_routing(api_client(kubeconfig))
    assert routing.waypoints == {(NS, "waypoint"), ("mesh", "edge")}
    # Only the enrolled pods were listed (the API server applies the selector).
    (listed,) = [r.query for r in fake_api.requests if r.path == "/api/v1/pods"]
    assert listed == {"labelSelector": ["istio.io/use-waypoint"]}
