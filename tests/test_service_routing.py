"""Pulling with the Services' routing: each Service's routing read from its
EndpointSlices' hints as kube-proxy reads them (through the real kubernetes
client and a fake API server over HTTP), mapped onto the called workloads,
and where a pod's bytes with its peers then go: the pull's split and the
shares /metrics and top workloads show."""

import dataclasses
import functools
import time

import jsonpatch
import pytest

from harness import fakeapi
from harness.fakeapi import node as node_object
from harness.prometheus import prometheus_with_history
from harness.reviews import pod
from kubectl_nettraffic.cli.top import WebhookLocation
from kubectl_nettraffic.cli.top_pods import learned_figures
from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.errors import ClusterError
from kubectl_nettraffic.kube.client import api_client
from kubectl_nettraffic.kube.nodes import ZONE_COPY_LABEL, ZONE_LABEL
from kubectl_nettraffic.kube.pods import EXPECTED_BANDWIDTH
from kubectl_nettraffic.kube.service_routing import (
    NODE,
    SPREAD,
    ZONE,
    read_service_routing,
    routing_of,
)
from kubectl_nettraffic.kube.workloads import Workload, pod_workload
from kubectl_nettraffic.learning.conversations import (
    Conversations,
    PodPlaces,
    conversations_of,
    peer_split,
    shares_of,
)
from kubectl_nettraffic.learning.learner import BandwidthLearning
from kubectl_nettraffic.learning.peer_traffic import PeerTrafficSource, peers_from
from kubectl_nettraffic.learning.pod_sample import PodSample
from kubectl_nettraffic.learning.pod_traffic import PodTrafficSource
from kubectl_nettraffic.measuring.scoreview import workloads_document
from kubectl_nettraffic.scoring.scheduler_sample import scores_a_sample
from kubectl_nettraffic.sources.prometheus import PrometheusSource
from kubectl_nettraffic.steering.peer_pull import PullPlans
from kubectl_nettraffic.steering.steerer import Decision
from tests.harness.affinity import zone_terms
from tests.harness.flow_series import Flow, istio_lines
from tests.harness.kube_series import PodSeries, ReplicaSetSeries, kube_lines
from tests.harness.scoreboards import FixedBoard, peer_board

WEB = Workload("shop", "Deployment", "web")
API = Workload("shop", "Deployment", "api")
ZONE_OF = {"a1": "a", "a2": "a", "b1": "b", "b2": "b", "c1": "c"}


# The objects of the shop namespace, as the API server holds them.
service = functools.partial(fakeapi.service, namespace="shop")
endpoint_slice = functools.partial(fakeapi.endpoint_slice, namespace="shop")


API_PODS = [("api-1", "a1", "a"), ("api-2", "b1", "b"), ("api-3", "b2", "b")]


def test_a_service_is_routed_as_its_hints_say_and_disagreements_are_counted():
    routing = routing_of(
        [
            service("api", "PreferSameZone"),
            service("db", "PreferSameNode"),
            service("cache", "PreferSameZone"),  # hints not written yet
            service("local", local=True),
            service("orphan"),  # a selector and no slice
        ],
        [
            endpoint_slice("api", API_PODS, zones=True),
            endpoint_slice("db", [("db-0", "a1", "a")], nodes=True),
            endpoint_slice("cache", [("cache-1", "a2", "a")]),
            endpoint_slice("local", [("agent-1", "c1", "c")]),
        ],
    )
    assert routing.pods == {
        ("shop", "api-1"): ZONE,
        ("shop", "api-2"): ZONE,
        ("shop", "api-3"): ZONE,
        ("shop", "db-0"): NODE,
        ("shop", "cache-1"): SPREAD,
        ("shop", "agent-1"): NODE,
    }
    assert routing.notes == {"no-hints": 1, "no-slices": 1}


def test_a_pod_behind_two_services_is_routed_as_the_wider_and_unready_endpoints_are_skipped():
    routing = routing_of(
        [service("api", "PreferSameZone"), service("api-all")],
        [
            endpoint_slice("api", API_PODS, zones=True),
            endpoint_slice("api-all", API_PODS[:1]),
            # An unready endpoint without hints does not stop the others' hints.
            {
                **endpoint_slice("api", [("api-4", "c1", "c")], ready=False),
                "metadata": {
                    "name": "api-x2",
                    "namespace": "shop",
                    "labels": {"kubernetes.io/service-name": "api"},
                },
            },
        ],
    )
    assert routing.pods[("shop", "api-1")] == SPREAD  # also behind api-all, which spreads
    assert routing.pods[("shop", "api-2")] == ZONE


def test_read_from_the_api_server_through_the_kubernetes_client(fake_api, kubeconfig):
    fake_api.put(service("api", "PreferSameZone"))
    fake_api.put(endpoint_slice("api", API_PODS, zones=True))
    routing = read_service_routing(api_client(kubeconfig))
    assert routing.pods[("shop", "api-2")] == ZONE
    fake_api.forbidden.add(("GET", "/apis/discovery.k8s.io/v1/endpointslices"))
    with pytest.raises(ClusterError, match="EndpointSlices"):
        read_service_routing(api_client(kubeconfig))


def _conversations(routing: str | None, calls=((WEB, API),)) -> Conversations:
    """web (2 pods, in zones a and c) calls api (1 pod in a, 2 in b)."""
    places = {WEB: {"a2": 1, "c1": 1}, API: {"a1": 1, "b1": 1, "b2": 1}}
    return Conversations(
        {WEB: ((API, 6e6),), API: ((WEB, 6e6),)},
        places,
        0.0,
        calls=frozenset(calls),
        routing={} if routing is None else {API: routing},
    )


def _web_calls_api() -> list[dict]:
    """The flow query's answer: web calls api at 6 MB/s (Istio's labels)."""
    return [
        {
            "metric": {
                "source_workload": "web",
                "source_workload_namespace": "shop",
                "destination_workload": "api",
                "destination_workload_namespace": "shop",
            },
            "value": [0, "6000000"],
        }
    ]


def test_a_caller_of_a_zone_routed_service_keeps_its_bytes_in_any_zone_with_a_server():
    spread = peer_split(_conversations(None), WEB, API, ZONE_OF)
    assert spread.in_zone == pytest.approx({"a": 1 / 3, "b": 2 / 3})
    assert spread.local == pytest.approx({"a1": 1 / 3, "b1": 1 / 3, "b2": 1 / 3})
    routed = peer_split(_conversations(ZONE), WEB, API, ZONE_OF)
    # Zones a and b alike: either keeps all of it; c has no server.
    assert routed.in_zone == {"a": 1.0, "b": 1.0}
    assert routed.local == pytest.approx({"a1": 1.0, "b1": 0.5, "b2": 0.5})
    node = peer_split(_conversations(NODE), WEB, API, ZONE_OF)
    assert node.local == {"a1": 1.0, "b1": 1.0, "b2": 1.0}


def test_a_pod_of_a_zone_routed_server_is_pulled_where_callers_have_no_server_near():
    routed = peer_split(_conversations(ZONE), API, WEB, ZONE_OF)
    # api's even part is 6 MB/s / 3 pods; a web pod sends 3 MB/s. In zone c
    # (a web pod, no api pod) a new api pod keeps all of it there (capped at
    # its even part); zone a's web pod keeps its bytes in a with the api pod
    # there wherever the new one goes, so a saves nothing.
    assert routed.in_zone == pytest.approx({"c": 1.0})
    # On the web pod's node in a, it shares that pod's bytes with the api pod
    # in a: 3 MB/s over 2, in units of its even part.
    assert routed.local == pytest.approx({"a2": 0.75, "c1": 1.0})
    # Unknown direction (each end said to call the other): spread evenly.
    both = _conversations(ZONE, calls=((WEB, API), (API, WEB)))
    assert both.route(API, WEB) is None
    assert peer_split(both, API, WEB, ZONE_OF).in_zone == pytest.approx({"a": 0.5, "c": 0.5})


def test_a_pod_of_a_node_routed_server_is_pulled_by_callers_without_a_server_beside_them():
    """web (pods on a1 and a2, three on c1) calls api (pods on a1 and b1)
    under PreferSameNode. web's pod on a1 calls the api pod beside it: a
    new api pod there keeps nothing more on its node. On a2 it keeps one
    web pod's bytes, on c1 three, past its even part."""
    conversations = Conversations(
        {WEB: ((API, 6e6),), API: ((WEB, 6e6),)},
        {WEB: {"a1": 1, "a2": 1, "c1": 3}, API: {"a1": 1, "b1": 1}},
        0.0,
        calls=frozenset({(WEB, API)}),
        routing={API: NODE},
    )
    split = peer_split(conversations, API, WEB, ZONE_OF)
    # A web pod sends 1.2 MB/s, api's even part is 3 MB/s: 0.4 of it each.
    assert split.local == pytest.approx({"a2": 0.4, "c1": 1.2})
    assert split.in_zone == pytest.approx({"c": 1.0})


def test_a_rolled_out_server_pod_is_pulled_to_its_clients_not_away_from_the_pod_it_replaces():
    """api (one pod, ReplicaSet api-1, in zone a) serves web's pods, two in
    zone a and one in b, under PreferSameZone. A new pod of api-2 replaces
    it: the old one is no server to share zone a's clients with."""
    report = peers_from(_web_calls_api(), [WEB, API], 8)
    places = PodPlaces()
    places.record(
        [
            PodSample("shop", "web-1-x", 1.0, 1.0, WEB, None, "a2", "web-1"),
            PodSample("shop", "web-1-y", 1.0, 1.0, WEB, None, "a1", "web-1"),
            PodSample("shop", "web-1-z", 1.0, 1.0, WEB, None, "b1", "web-1"),
            PodSample("shop", "api-1-x", 1.0, 1.0, API, None, "a1", "api-1"),
        ]
    )
    conversations = conversations_of(report, places, 0.0, {("shop", "api-1-x"): ZONE})
    # One ReplicaSet each: its places, shared with the workload's.
    assert conversations.templates[API] == {"api-1": {"a1": 1}}
    assert conversations.templates[API]["api-1"] is conversations.places[API]
    rollout = peer_split(conversations, API, WEB, ZONE_OF, "api-2")
    # Zone a keeps two web pods' bytes (capped at its even part), b one's.
    assert rollout.in_zone == pytest.approx({"a": 2 / 3, "b": 1 / 3})
    # A pod of the same ReplicaSet (scaling up) or of none: zone a's clients
    # have the pod there, which stays; zone b's have none.
    for template in ("api-1", None):
        assert peer_split(conversations, API, WEB, ZONE_OF, template).in_zone == pytest.approx(
            {"b": 1 / 3}
        )
    # Mid-rollout, each ReplicaSet's pods apart: api-2's first pod in b.
    places.record([PodSample("shop", "api-2-x", 1.0, 1.0, API, None, "b2", "api-2")])
    conversations = conversations_of(report, places, 0.0, {("shop", "api-1-x"): ZONE})
    assert conversations.templates[API] == {"api-1": {"a1": 1}, "api-2": {"b2": 1}}
    assert conversations.staying(API, "api-2") == {"b2": 1}
    assert conversations.staying(API, "api-3") == {}


def test_a_routed_server_s_next_pod_goes_where_callers_have_no_server_in_their_zone():
    """web runs two pods in zone a, one in b and one in c, and calls api,
    whose one pod runs in a, under PreferSameNode. A second api pod beside
    a web pod in a would keep that pod's bytes on its node, but they stay in
    zone a anyway; beside the one in b or c it also keeps that zone's bytes
    in it. So b's and c's nodes beside web come first, and the zone term
    names those zones."""
    # Every link alike: only the pull tells the nodes apart.
    loads = {f"{z}{i}": 1e6 for z in "abc" for i in range(1, 4)}
    server = pod(generate_name="api-5f6d7-", labels={"app": "api"})
    api, web = pod_workload(server), pod_workload(pod())
    assert api is not None and web is not None
    conversations = Conversations(
        {web: ((api, 6e6),), api: ((web, 6e6),)},
        {web: {"a1": 1, "a2": 1, "b2": 1, "c2": 1}, api: {"a3": 1}},
        0.0,
        calls=frozenset({(web, api)}),
        routing={api: NODE},
    )
    decision, patched = _zoned_decision(server, loads, conversations)
    assert [p.node for p in decision.preferences][:2] == ["b2", "c2"]
    (term,) = zone_terms(patched["spec"]["affinity"])
    assert term["preference"]["matchExpressions"][0]["values"] == ["b", "c"]


def test_a_byte_kept_in_the_zone_outweighs_one_kept_on_the_node():
    """web calls api (its one pod on a1) for 0.85 MB/s and db (its one pod
    on b1) for 1 MB/s, both routed by zone. Beside api on a1, a web pod
    keeps api's bytes on the node and in zone a; on b2 it keeps db's bytes
    in zone b only. A byte across zones is billed whatever the links' load,
    so b2 comes before a1. Weighed alike, a1 (0.85 on the node and in the
    zone) came first, and with a byte in the zone at four times one on the
    node still did (0.85 x 5 against 1 x 4)."""
    loads = {name: 1e6 for name in ("a1", "a2", "b1", "b2", "c1")}
    web, db = pod_workload(pod()), Workload("shop", "Deployment", "db")
    assert web is not None
    conversations = Conversations(
        {web: ((API, 0.85e6), (db, 1e6)), API: ((web, 0.85e6),), db: ((web, 1e6),)},
        {web: {"c1": 1}, API: {"a1": 1}, db: {"b1": 1}},
        0.0,
        calls=frozenset({(web, API), (web, db)}),
        routing={API: ZONE, db: ZONE},
    )
    admitted = pod(annotations={EXPECTED_BANDWIDTH: "1850k"})
    decision, _ = _zoned_decision(admitted, loads, conversations)
    assert [p.node for p in decision.preferences] == ["b1", "b2", "a1"]


def test_shares_show_the_bytes_as_routed():
    (spread,) = shares_of(_conversations(None), WEB, ZONE_OF)
    # web in a: 1 of 3 api pods in zone; web in c: none.
    assert spread.same_zone == pytest.approx(1 / 6) and spread.cross_zone == pytest.approx(5 / 6)
    (routed,) = shares_of(_conversations(ZONE), WEB, ZONE_OF)
    # web in a stays in a; web in c has no api pod in c: spread, all cross-zone.
    assert routed.same_zone == pytest.approx(0.5) and routed.cross_zone == pytest.approx(0.5)
    # The pair reads the same from either end, each end's direction its own.
    (theirs,) = shares_of(_conversations(ZONE), API, ZONE_OF)
    assert theirs[2:6] == routed[2:6]
    assert (routed.direction, routed.routing) == ("calls", ZONE)
    assert (theirs.direction, theirs.routing) == ("called", ZONE)
    (both,) = shares_of(_conversations(ZONE, calls=((WEB, API), (API, WEB))), WEB, ZONE_OF)
    assert (both.direction, both.routing) == ("both", "spread")


def test_the_learner_s_pairs_carry_who_calls_whom_and_the_servers_routing():
    series = _web_calls_api()
    report = peers_from(series, [WEB, API], 8)
    assert report.calls == {(WEB, API)}
    places = PodPlaces()
    places.record(
        [
            PodSample("shop", "web-1", 1.0, 1.0, WEB, None, "a2"),
            PodSample("shop", "api-1", 1.0, 1.0, API, None, "a1"),
            PodSample("shop", "api-2", 1.0, 1.0, API, None, "b1"),
        ]
    )
    pod_routing = {("shop", "api-1"): ZONE, ("shop", "api-2"): ZONE}
    conversations = conversations_of(report, places, 0.0, pod_routing, {"no-hints": 2})
    assert conversations.routing == {API: ZONE}
    assert conversations.route(WEB, API) == (WEB, API, ZONE)
    assert conversations.routing_notes == {"no-hints": 2}
    # A pod of api behind a Service that spreads: api spreads.
    pod_routing[("shop", "api-2")] = SPREAD
    assert conversations_of(report, places, 0.0, pod_routing).routing == {}
    # peers.routing zone: every called workload, whatever its Services.
    assert conversations_of(report, places, 0.0, every_zone=True).routing == {API: ZONE}
    # A source naming each end as a caller (Beyla and OBI count each
    # direction apart): no one direction, spread evenly, counted.
    series.append(
        {
            **series[0],
            "metric": {
                "source_workload": "api",
                "source_workload_namespace": "shop",
                "destination_workload": "web",
                "destination_workload_namespace": "shop",
            },
        }
    )
    both = conversations_of(peers_from(series, [WEB, API], 8), places, 0.0, pod_routing)
    assert both.route(WEB, API) is None
    assert both.routing_notes == {"both-directions": 1}


# Two zones, web and api each with a pod in both: spread, half of web's
# bytes to api cross zones; under PreferSameZone none do.
ROUTED_ZONES = {"n1": "zone-a", "n2": "zone-a", "n3": "zone-b", "n4": "zone-b"}
ROUTED_PODS = [
    ("web-7d9c4b-a1", "web-7d9c4b", "n1"),
    ("web-7d9c4b-b2", "web-7d9c4b", "n3"),
    ("api-6c8d9f-c3", "api-6c8d9f", "n2"),
    ("api-6c8d9f-d4", "api-6c8d9f", "n4"),
]


@pytest.fixture(scope="module")
def routed_prometheus():
    end = float(int(time.time()) // 60 * 60)
    pods = [
        PodSeries("shop", name, 1e6, 1e6, "ReplicaSet", rs, node=n) for name, rs, n in ROUTED_PODS
    ]
    replicasets = [
        ReplicaSetSeries("shop", "web-7d9c4b", "web"),
        ReplicaSetSeries("shop", "api-6c8d9f", "api"),
    ]
    flows = [Flow(("shop", "web"), ("shop", "api"), tcp_sent=3e6, tcp_received=1e6)]
    lines = [*kube_lines(pods, replicasets, end), *istio_lines(flows, end)]
    server = prometheus_with_history([], end, more=lines)
    yield server, end
    server.stop()


def test_top_workloads_counts_the_pairs_as_routed_as_the_webhook_does(
    routed_prometheus, fake_api, kubeconfig
):
    prometheus, end = routed_prometheus
    for name, zone in ROUTED_ZONES.items():
        fake_api.put(node_object(name, labels={"topology.kubernetes.io/zone": zone}))
    fake_api.put(service("api", "PreferSameZone"))
    api_pods = [(pod, n, ROUTED_ZONES[n]) for pod, _, n in ROUTED_PODS if pod.startswith("api")]
    fake_api.put(endpoint_slice("api", api_pods, zones=True))
    settings = settings_from_mapping(
        {
            "prometheus": {"url": prometheus.url, "window": "2m"},
            "metricsServer": {"enabled": False},
            "peers": {"source": "istio", "bytesEachWay": True},
            "kubeconfig": kubeconfig,
        }
    )
    source = PrometheusSource(settings.prometheus, clock=lambda: end)
    # The webhook's path: its learner reads the Services once a pass.
    learning = BandwidthLearning(
        settings,
        PodTrafficSource(source, settings.learning, with_nodes=True),
        peers=PeerTrafficSource(source, settings.peers),
        services=functools.partial(read_service_routing, api_client(kubeconfig)),
    )
    learning.update()
    learning.update()
    assert learning.update() == "peers"
    # Each pod's ReplicaSet, from kube_pod_owner: a rollout's pods apart.
    assert learning.conversations is not None
    assert learning.conversations.templates[API] == {"api-6c8d9f": {"n2": 1, "n4": 1}}
    board = FixedBoard(
        dict.fromkeys(ROUTED_ZONES, 3e7),
        learning=learning,
        settings=settings,
        **{n: {"labels": {"topology.kubernetes.io/zone": z}} for n, z in ROUTED_ZONES.items()},
    )
    rows = {row["name"]: row for row in workloads_document(board.snapshot)["workloads"]}
    (webhook,) = rows["web"]["peers"]
    # The plugin's own path (--source prometheus), the same window.
    report = PodTrafficSource(source, settings.learning).fetch()
    _, peers, _, _ = learned_figures(
        "prometheus", settings, None, WebhookLocation("x", "y", 443), report, False, True
    )
    assert peers is not None
    (plugin,) = peers[WEB]
    shares = (
        "sameNodeShare",
        "sameZoneShare",
        "crossZoneShare",
        "direction",
        "routing",
        "sentBytesPerSecond",
        "receivedBytesPerSecond",
    )
    assert [plugin[k] for k in shares] == [webhook[k] for k in shares]
    assert (plugin["crossZoneShare"], plugin["routing"]) == (0.0, ZONE)
    assert plugin["sentBytesPerSecond"] == pytest.approx(1e6, rel=0.05)  # web's requests
    # Without the Service's hints both paths spread the pair: half crosses.
    fake_api.put(endpoint_slice("api", api_pods))  # the same slice, its hints gone
    _, spread, _, _ = learned_figures(
        "prometheus", settings, None, WebhookLocation("x", "y", 443), report, False, True
    )
    assert spread is not None and spread[WEB][0]["crossZoneShare"] == pytest.approx(0.5)


def _zoned_decision(
    admitted: dict, loads: dict[str, float], conversations: Conversations, **steering: int
) -> tuple[Decision, dict]:
    """The Steerer's decision on ``admitted`` with peers read from
    ``conversations``, on nodes named by their zone's letter (each carrying
    its zone's copy) with ``loads``, and the pod patched."""
    board = peer_board(loads, conversations, **steering)
    decision = board.steerer.decide(admitted, {}, dry_run=False)
    return decision, jsonpatch.apply_patch(admitted, decision.patch or [])


def _web_decision(
    api_places: dict[str, int], routing: str | None, racks: int = 3, **steering: int
) -> tuple[Decision, dict]:
    """The Steerer's decision on a pod of web, which calls api (routed by
    ``routing``), on ``racks`` nodes in each of zones a, b and c (the
    quietest first) that carry their zone's copy, and the pod patched;
    api's pods on ``api_places``."""
    loads = {
        f"{z}{i}": 1e6 * (i + racks * k) for k, z in enumerate("abc") for i in range(1, racks + 1)
    }
    web = pod_workload(pod())
    assert web is not None
    conversations = Conversations(
        {web: ((API, 6e6),), API: ((web, 6e6),)},
        {web: {f"c{racks}": 2}, API: api_places},
        0.0,
        calls=frozenset({(web, API)}),
        routing={} if routing is None else {API: routing},
    )
    return _zoned_decision(pod(), loads, conversations, **steering)


def _zone_terms(api_places: dict[str, int], routing: str | None) -> list[dict]:
    """The zone terms of a pod of web whose first preference is beside api."""
    decision, patched = _web_decision(api_places, routing)
    assert decision.preferences and decision.preferences[0].node in api_places
    return zone_terms(patched["spec"]["affinity"])


def test_the_zone_term_names_every_zone_that_keeps_as_much_and_none_where_all_do():
    # Routed by zone, api in zones a and b: either keeps all of web's bytes.
    (term,) = _zone_terms({"a1": 1, "b1": 1}, ZONE)
    assert term["preference"]["matchExpressions"][0]["values"] == ["a", "b"]
    assert term["weight"] == 100
    # By node too: a client beside no api pod stays in a zone that has one.
    (term,) = _zone_terms({"a1": 1, "b1": 1}, NODE)
    assert term["preference"]["matchExpressions"][0]["values"] == ["a", "b"]
    # api in every zone: no zone saves web anything over another.
    assert _zone_terms({"a1": 1, "b1": 1, "c1": 1}, ZONE) == []
    assert _zone_terms({"a1": 1, "b1": 1, "c1": 1}, NODE) == []
    # Spread evenly, a zone keeps its share of api's pods: a's two of three.
    (term,) = _zone_terms({"a1": 1, "a2": 1, "c1": 1}, None)
    assert term["preference"]["matchExpressions"][0]["values"] == ["a"]
    assert term["weight"] == 67


def test_the_zone_term_names_the_booked_zone_and_those_keeping_as_much_or_more():
    # Spread evenly over api's pods: zone a keeps two thirds of web's bytes,
    # c one third, b none. A pod booked in c (a's nodes full or busy, say)
    # prefers c and a, never b; booked in b, every zone keeps as much.
    loads = {name: 5e6 for name in ("a1", "a2", "b1", "c1")}
    zones = {name: {"labels": {ZONE_LABEL: name[0], ZONE_COPY_LABEL: name[0]}} for name in loads}
    board = FixedBoard(loads, **zones)
    web = pod_workload(pod())
    assert web is not None
    places = {web: {"b1": 2}, API: {"a1": 1, "a2": 1, "c1": 1}}
    conversations = Conversations({web: ((API, 6e6),), API: ((web, 6e6),)}, places, 0.0)
    settings = dataclasses.replace(board.settings.peers, source="istio")
    pull = PullPlans(conversations, board.snapshot.nodes, settings)
    plan = pull.plan(web)
    assert plan is not None
    pod_pull = pull.for_pod(plan, 3e6, {}, {})
    for score in board.snapshot.candidates:
        pod_pull.points(score)
    assert pod_pull.zone_term("a1") == (("a",), 67)
    assert pod_pull.zone_term("c1") == (("a", "c"), 33)
    assert pod_pull.zone_term("b1") is None


@pytest.mark.parametrize(
    ("nodes", "percentage", "sampled"),
    [
        (99, 0, False),
        (100, 0, False),
        (101, 0, True),
        (500, 0, True),
        (500, 100, False),
        (500, 50, True),
        (5000, 0, True),
        (200, 50, True),
        (100, 50, False),
    ],
)
def test_kube_scheduler_scores_a_sample_as_num_feasible_nodes_to_find_says(
    nodes: int, percentage: int, sampled: bool
) -> None:
    # 500 nodes at the default: 46% of them, 230; 100 nodes: every one, at any share.
    assert scores_a_sample(nodes, percentage) is sampled


def test_where_kube_scheduler_scores_a_sample_every_node_beside_the_peers_weighs_near_the_first():
    """web calls api, routed by node, on the three quietest nodes: whichever
    of them kube-scheduler's sample holds keeps web's bytes on it."""
    api = {"a1": 1, "a2": 1, "a3": 1}
    weights = {}
    for percentage in (0, 100):  # 120 nodes: a sample of 100, or every one
        decision, _ = _web_decision(api, NODE, racks=40, percentageOfNodesToScore=percentage)
        assert {p.node for p in decision.preferences} == set(api)
        weights[percentage] = [p.weight for p in decision.preferences]
    first, *others = weights[0]
    assert first == 100 and all(w >= 90 for w in others), weights
    # Every node scored: the first wins wherever kube-scheduler's plugins
    # allow, the others at most a quarter of the one before.
    assert weights[100][0] == 100 and weights[100][1] <= 25 and weights[100][2] <= 6, weights
