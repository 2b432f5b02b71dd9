"""Steering by peers, from the flow metrics through a real Prometheus to the
admission's choice: the learner reads who talks to whom and where each pod
runs, and the Steerer pulls a pod toward its peers' node and zone, spreads
fan-in, never past a hot link, and leaves pods without peers as they were."""

import json
import time

import jsonpatch
import pytest

from harness.prometheus import prometheus_with_history
from harness.reviews import pod
from kubectl_nettraffic.cli.explain import explain_text
from kubectl_nettraffic.cli.top import WebhookLocation
from kubectl_nettraffic.cli.top_pods import learned_figures, table, workload_rows
from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.kube.nodes import ZONE_COPY_LABEL, ZONE_LABEL
from kubectl_nettraffic.kube.pods import BOOKED_BANDWIDTH, PEER_PULL, PREFERRED
from kubectl_nettraffic.kube.service_routing import ZONE, ServiceRouting
from kubectl_nettraffic.kube.workloads import Workload, pod_template
from kubectl_nettraffic.learning.learner import BandwidthLearning
from kubectl_nettraffic.learning.peer_traffic import PeerTrafficSource
from kubectl_nettraffic.learning.pod_traffic import PodTrafficSource, build_learner_query
from kubectl_nettraffic.measuring.scoreview import (
    pairs_age,
    peer_bytes_by_place,
    peer_read_failures,
    workloads_document,
)
from kubectl_nettraffic.scoring.spread import HOSTNAME_KEY
from kubectl_nettraffic.scoring.tiers import TIER_LABEL
from kubectl_nettraffic.sources.prometheus import PrometheusSource
from tests.harness.affinity import zone_terms
from tests.harness.flow_series import Flow, istio_lines
from tests.harness.kube_series import PodSeries, ReplicaSetSeries, kube_lines
from tests.harness.scoreboards import MEASURED_AT, FixedBoard

END = float(int(time.time()) // 60 * 60)
WEB = Workload("shop", "Deployment", "web")
API = Workload("shop", "Deployment", "api")
DB = Workload("shop", "StatefulSet", "db")
PODS = [
    PodSeries("shop", "web-7d9c4b-a1", 1e6, 1e6, "ReplicaSet", "web-7d9c4b", node="n1"),
    PodSeries("shop", "web-7d9c4b-b2", 1e6, 1e6, "ReplicaSet", "web-7d9c4b", node="n2"),
    PodSeries("shop", "api-6c8d9f-c3", 2e6, 2e6, "ReplicaSet", "api-6c8d9f", node="n3"),
    PodSeries("shop", "api-6c8d9f-d4", 2e6, 2e6, "ReplicaSet", "api-6c8d9f", node="n3"),
    PodSeries("shop", "db-0", 1e6, 1e6, "StatefulSet", "db", node="n4"),
    PodSeries("shop", "lonely-5b5b5b-e5", 1e6, 1e6, "ReplicaSet", "lonely-5b5b5b", node="n2"),
]
REPLICASETS = [
    ReplicaSetSeries("shop", "web-7d9c4b", "web"),
    ReplicaSetSeries("shop", "api-6c8d9f", "api"),
    ReplicaSetSeries("shop", "lonely-5b5b5b", "lonely"),
]
FLOWS = [
    Flow(("shop", "web"), ("shop", "api"), tcp_sent=3e6, tcp_received=1e6),
    Flow(("shop", "api"), ("shop", "db"), tcp_sent=1e6, tcp_received=1e5),
    Flow(("shop", "web"), ("elsewhere", "gone"), tcp_sent=1e6),
]
# Traffic mode: n1 the quietest, n4 the busiest (scores 9.1, 6.1, 3.0, 0).
LOADS = {"n1": 3.0e7, "n2": 3.1e7, "n3": 3.2e7, "n4": 3.3e7}
ZONES = {"n1": "zone-a", "n2": "zone-a", "n3": "zone-b", "n4": "zone-b"}


@pytest.fixture(scope="module")
def prometheus():
    lines = [*kube_lines(PODS, REPLICASETS, END), *istio_lines(FLOWS, END)]
    server = prometheus_with_history([], END, more=lines)
    yield server
    server.stop()


def _settings(url: str, source: str = "istio", steering=None, **peers):
    return settings_from_mapping(
        {
            "prometheus": {"url": url, "window": "2m"},
            "metricsServer": {"enabled": False},
            "peers": {"source": source, **peers},
            "steering": steering or {},
        }
    )


def _learned(
    prometheus, source: str = "istio", services: ServiceRouting | None = None, **peers
) -> BandwidthLearning:
    settings = _settings(prometheus.url, source, **peers)
    prometheus_source = PrometheusSource(settings.prometheus, clock=lambda: END)
    with_peers = source != "none"
    learning = BandwidthLearning(
        settings,
        PodTrafficSource(prometheus_source, settings.learning, with_nodes=with_peers),
        peers=PeerTrafficSource(prometheus_source, settings.peers) if with_peers else None,
        services=None if services is None else lambda: services,
    )
    learning.update()  # the first slice: a small cluster, read whole next
    learning.update()  # one slice: the whole cluster
    if with_peers:
        assert learning.update() == "peers"  # the pairs, in a round of their own
    return learning


def _board(
    prometheus, link_speed=None, source="istio", steering=None, services=None, **peers
) -> FixedBoard:
    learning = _learned(prometheus, source, services, **peers)
    settings = _settings(prometheus.url, source, steering, **peers)
    nodes = {
        name: {"labels": {"topology.kubernetes.io/zone": zone}} for name, zone in ZONES.items()
    }
    return FixedBoard(LOADS, learning=learning, settings=settings, link_speed=link_speed, **nodes)


def _web_pod():
    return pod(
        generate_name="web-7d9c4b-",
        namespace="shop",
        labels={"app": "web", "pod-template-hash": "7d9c4b"},
    )


def test_the_learner_reads_the_pairs_and_where_each_side_runs(prometheus):
    conversations = _learned(prometheus).latest().conversations
    assert conversations is not None
    assert dict(conversations.peers[WEB]) == pytest.approx({API: 4e6}, rel=1e-3)
    assert [peer for peer, _ in conversations.peers[API]] == [WEB, DB]
    assert conversations.places == {
        WEB: {"n1": 1, "n2": 1},
        API: {"n3": 2},
        DB: {"n4": 1},
    }  # lonely talks to no one: its places are not kept
    assert conversations.ignored == {"unknown-workload": 1}


def test_without_a_flow_source_the_learner_query_and_its_figures_are_as_before(prometheus):
    settings = _settings(prometheus.url, "none")
    assert "kube_pod_info{" not in build_learner_query(settings.learning, 120.0, "both").replace(
        'kube_pod_info{host_network="true"', ""
    )
    learned = _learned(prometheus, "none").latest()
    assert learned is not None and learned.conversations is None


def test_a_pod_is_pulled_to_its_peers_node_and_fan_in_spreads(prometheus):
    board = _board(prometheus)
    first = board.steerer.decide(_web_pod(), {}, dry_run=False)
    # n3 hosts both api pods: the web pod's bytes to api stay there, and
    # the zone is api's. Without peers n1 (the quietest) would be first.
    assert first.preferences[0].node == "n3"
    annotations = first.patch_json() or ""
    assert PEER_PULL.replace("/", "~1") in annotations or PEER_PULL in annotations
    ops = {op["path"].rsplit("/", 1)[-1]: op.get("value") for op in first.patch or []}
    pulled = next(v for v in ops.values() if isinstance(v, dict) and PEER_PULL in v)[PEER_PULL]
    assert pulled.startswith("n3=") and pulled.split(",")[0].endswith(":shop/Deployment/api")
    # Booked at its whole expected bytes, as without peers: what stays on
    # n3 is for the measurement to show, wherever kube-scheduler binds it.
    unpulled = _board(prometheus, source="none").steerer.decide(_web_pod(), {}, dry_run=False)
    booked_alone = {}
    for op in unpulled.patch or []:
        if op["path"].endswith("/annotations"):
            booked_alone = op["value"]
    assert ops["annotations"][BOOKED_BANDWIDTH] == booked_alone[BOOKED_BANDWIDTH]
    assert first.booking_key  # the binding watch can find it again


def _firsts(board: FixedBoard, pods: int) -> list[str]:
    """The first preference of each of a burst of web's pods."""
    return [
        board.steerer.decide(_web_pod(), {}, dry_run=False).preferences[0].node for _ in range(pods)
    ]


def test_a_pair_of_pods_shares_its_peers_zone_and_a_third_keeps_every_zone(prometheus):
    # web runs two pods and api's Service spreads web's bytes evenly: its
    # second pod joins its first in api's zone; its third goes to zone-a,
    # which holds none of the burst, whatever its peers pull.
    assert [ZONES[node] for node in _firsts(_board(prometheus), 3)] == [
        "zone-b",
        "zone-b",
        "zone-a",
    ]


def test_under_zone_routing_a_pair_fills_the_empty_zones_first(prometheus):
    # api's Service keeps each client in its zone (PreferSameZone): web's
    # pods in zone-a would cross zones to api if api had a pod there, and
    # the learner's places are a pass old: the empty zone first.
    routed = ServiceRouting({("shop", p.pod): ZONE for p in PODS if p.pod.startswith("api")})
    board = _board(prometheus, services=routed)
    assert [ZONES[node] for node in _firsts(board, 2)] == ["zone-b", "zone-a"]


def test_fan_in_spreads_a_workload_over_its_peers_nodes(prometheus):
    # The spread left out, so that the pull alone places the burst: web has
    # 2 pods and api's 2 are all on n3, so n3 may draw half of web's pods
    # (2 of 3), counted from the bookings store; then only api's zone
    # pulls, and n4 (in it, with nothing booked) leads.
    board = _board(prometheus, steering={"zoneMaxSkew": 0, "hostnameMaxSkew": 0})
    firsts = [board.steerer.decide(_web_pod(), {}, dry_run=False) for _ in range(3)]
    assert [d.preferences[0].node for d in firsts] == ["n3", "n3", "n4"]
    assert firsts[2].preferences[0].score < firsts[0].preferences[0].score


def test_a_pod_without_peers_is_steered_as_without_a_flow_source(prometheus):
    with_peers, without = _board(prometheus), _board(prometheus, source="none")
    lonely = pod(
        generate_name="lonely-5b5b5b-",
        namespace="shop",
        labels={"app": "lonely", "pod-template-hash": "5b5b5b"},
    )
    for _ in range(4):  # a burst: each pod's booking counts for the next
        ours = with_peers.steerer.decide(lonely, {}, dry_run=False)
        theirs = without.steerer.decide(lonely, {}, dry_run=False)
        assert ours.preferences == theirs.preferences and ours.patch == theirs.patch


def test_peers_never_take_a_node_past_the_hot_threshold(prometheus):
    # 20 MB/s links, half the load each way: n1 75% full, n2 77.5%, n3 80%,
    # n4 82.5%; the pod's 2.7 MB/s would add 14 points. At 0.79 n3 and n4
    # (api's and db's zone) may not be pulled. web's two pods are in zone-a:
    # its spread, kept, would bar zone-a (zone-b holds none); left out here.
    unkept = {"zoneMaxSkew": 0, "hostnameMaxSkew": 0}
    board = _board(prometheus, link_speed=2e7, steering=unkept, maxLinkUtilization=0.79)
    assert board.snapshot.generated_at == MEASURED_AT
    first = board.steerer.decide(_web_pod(), {}, dry_run=False)
    assert first.preferences[0].node == "n1"
    assert PEER_PULL not in str(first.patch)
    # With room to spare, the same pod goes to its peers.
    roomy = _board(prometheus, link_speed=2e7, steering=unkept, maxLinkUtilization=0.95)
    assert roomy.steerer.decide(_web_pod(), {}, dry_run=False).preferences[0].node == "n3"


def test_the_workloads_document_shows_where_each_pair_s_bytes_go_and_their_cost(prometheus):
    board = _board(prometheus, bytesEachWay=True)
    document = workloads_document(board.snapshot, price_per_gb=0.01)
    rows = {(row["kind"], row["name"]): row for row in document["workloads"]}
    (api,) = rows[("Deployment", "web")]["peers"]
    # web runs on n1 and n2 (zone-a), api on n3 (zone-b): every byte crosses.
    assert (api["name"], api["sameNodeShare"], api["sameZoneShare"], api["crossZoneShare"]) == (
        "api",
        0.0,
        0.0,
        1.0,
    )
    # Istio names the caller: web calls api, whose Services spread it.
    assert (api["direction"], api["routing"]) == ("calls", "spread")
    # Of the 4 MB/s, web's requests 1 MB/s, api's answers 3 (Istio's TCP received and sent).
    assert (api["sentBytesPerSecond"], api["receivedBytesPerSecond"]) == pytest.approx((1e6, 3e6))
    web = rows[("Deployment", "api")]["peers"][0]
    assert (web["name"], web["sentBytesPerSecond"]) == ("web", pytest.approx(3e6))
    # 4 MB/s for 30 days, billed $0.01/GB each way.
    assert api["crossZoneCostPerMonth"] == pytest.approx(4e6 * 2_592_000 / 1e9 * 0.02, rel=1e-3)
    # api and db: api on n3, db on n4, both zone-b: no node shared, one zone.
    db = rows[("Deployment", "api")]["peers"][1]
    assert (db["name"], db["sameNodeShare"], db["sameZoneShare"], db["crossZoneShare"]) == (
        "db",
        0.0,
        1.0,
        0.0,
    )
    assert document["conversations"]["ignoredSeries"] == {"unknown-workload": 1}
    assert document["conversations"]["nodesWithoutZone"] == []
    # /metrics' nettraffic_peer_bytes_per_second: each pair once.
    assert peer_bytes_by_place(board.snapshot) == pytest.approx(
        {"same-node": 0.0, "same-zone": 1.1e6, "cross-zone": 4e6, "unknown-zone": 0.0}, rel=1e-3
    )
    plain = workloads_document(_board(prometheus, source="none").snapshot)
    assert plain["conversations"] is None
    assert all("peers" not in row for row in plain["workloads"])


def test_explain_says_which_peers_pulled_the_pod_toward_which_node(prometheus):
    board = _board(prometheus)
    admitted = _web_pod()
    decision = board.steerer.decide(admitted, {}, dry_run=False)
    patched = jsonpatch.apply_patch(admitted, decision.patch)
    patched["metadata"]["name"] = "web-7d9c4b-x1"
    text = explain_text(patched, None, "-", ("default-scheduler",))
    assert "Peers:      its conversations pulled it toward" in text
    assert "  n3: +" in text and "its peers shop/Deployment/api run there" in text


def test_top_workloads_computes_the_peers_itself_with_the_prometheus_source(prometheus):
    settings = settings_from_mapping(
        {
            "prometheus": {"url": prometheus.url, "window": "2m"},
            "peers": {"source": "istio"},
            "kubeconfig": "/nonexistent/kubeconfig",
        }
    )
    source = PodTrafficSource(
        PrometheusSource(settings.prometheus, clock=lambda: END), settings.learning
    )
    report = source.fetch()
    assert {s.pod: s.node for s in report.samples}["db-0"] == "n4"
    learned, peers, origin, pairs = learned_figures(
        "prometheus", settings, None, WebhookLocation("x", "y", 443), report, False, with_peers=True
    )
    assert origin == "this window" and peers is not None and pairs is None
    rows = {row["name"]: row for row in workload_rows(report.samples, learned, "both", peers)}
    web = rows["Deployment/web"]
    # No API server to read the zones from: where the bytes go by zone is unknown.
    assert web["peers"][0]["name"] == "api" and web["peers"][0]["unknownZoneShare"] == 1.0
    text = table("workloads", list(rows.values()), False, True, True, False)
    assert "PEERS" in text.splitlines()[0] and "Deployment/api" in text


def _zone_terms(patch) -> list[dict]:
    return zone_terms(next(op["value"] for op in patch or [] if op["path"] == "/spec/affinity"))


def test_a_term_on_the_peers_zone_once_the_nodes_carry_its_copy(prometheus):
    learning = _learned(prometheus)
    settings = _settings(prometheus.url)
    # Each node in a tier of its own, as the label writer ranks them (n1 quietest).
    tiers = {name: str(rank) for rank, name in enumerate(LOADS, start=1)}
    nodes = {
        name: {"labels": {ZONE_LABEL: zone, ZONE_COPY_LABEL: zone, TIER_LABEL: tiers[name]}}
        for name, zone in ZONES.items()
    }
    board = FixedBoard(LOADS, learning=learning, settings=settings, **nodes)
    decision = board.steerer.decide(_web_pod(), {}, dry_run=False)
    assert decision.preferences[0].node == "n3"
    terms = next(op["value"] for op in decision.patch or [] if op["path"] == "/spec/affinity")
    zone_terms = _zone_terms(decision.patch)
    # web's only peer, api, runs in zone-b: all of its bytes to peers go there.
    (term,) = zone_terms
    assert term["preference"]["matchExpressions"][0]["values"] == ["zone-b"]
    assert term["weight"] == 100
    # With the traffic tiers (on by default): on the zone's nodes outside the
    # busiest tier, and any such node a little, in place of the tier terms.
    quiet = {"key": TIER_LABEL, "operator": "In", "values": ["1", "2", "3"]}
    assert term["preference"]["matchExpressions"][1] == quiet
    tier_terms = [
        t for t in terms["nodeAffinity"][PREFERRED] if t["preference"].get("matchExpressions")
    ]
    assert tier_terms == [{"weight": 10, "preference": {"matchExpressions": [quiet]}}, term]
    assert all(op.json == json.dumps(op, separators=(",", ":")) for op in decision.patch or [])
    patched = jsonpatch.apply_patch(_web_pod(), decision.patch)
    patched["metadata"]["name"] = "web-7d9c4b-z1"
    text = explain_text(patched, None, "-", ("default-scheduler",))
    assert f"and zone zone-b (weight {term['weight']})" in text
    assert "outside the busiest tier (nettraffic.io/traffic-tier 1, 2, 3)" in text
    # Without the copies: no zone term, and the tier terms as for any pod.
    for labels in nodes.values():
        del labels["labels"][ZONE_COPY_LABEL]
    uncopied = FixedBoard(LOADS, learning=learning, settings=settings, **nodes)
    plain = uncopied.steerer.decide(_web_pod(), {}, dry_run=False)
    assert ZONE_COPY_LABEL not in str(plain.patch)
    assert '"weight":60,"preference":{"matchExpressions":[{"key":"nettraffic.io/traffic-tier"' in (
        plain.patch_json() or ""
    )
    assert f"by what their {TIER_LABEL} saves it (1 at 60;" in explain_text(
        jsonpatch.apply_patch(_web_pod(), plain.patch), None, "-", ("default-scheduler",)
    )


def test_the_peers_zone_term_follows_the_node_the_pod_is_booked_on(prometheus):
    # n3, beside api, ranks first, but web's own hostname spread (maxSkew 2)
    # has filled it and n4, the rest of zone-b: they get no term, and the
    # pod is booked on n1, its heaviest. A term on n3's zone would pull the
    # pod into zone-b, against its node terms: the zone term follows n1,
    # whose zone keeps less of its bytes to peers, so there is none.
    learning = _learned(prometheus)
    nodes = {
        name: {"labels": {ZONE_LABEL: zone, ZONE_COPY_LABEL: zone, TIER_LABEL: str(rank)}}
        for rank, (name, zone) in enumerate(ZONES.items(), start=1)
    }
    board = FixedBoard(LOADS, learning=learning, settings=_settings(prometheus.url), **nodes)
    admitted = _web_pod()
    spread = {"topologyKey": HOSTNAME_KEY, "maxSkew": 2, "whenUnsatisfiable": "ScheduleAnyway"}
    admitted["spec"]["topologySpreadConstraints"] = [
        {**spread, "labelSelector": {"matchLabels": {"app": "web"}}}
    ]
    assert _zone_terms(board.steerer.decide(admitted, {}, dry_run=True).patch)  # n3 not full yet
    for node in ("n1", "n2", "n3", "n3", "n3", "n4", "n4", "n4"):
        board.inflight.place_seen(node, WEB, pod_template(admitted))
    decision = board.steerer.decide(admitted, {}, dry_run=False)
    assert decision.preferences[0].node == "n3" and decision.preferences[0].weight == 0
    assert max(decision.preferences, key=lambda p: p.weight).node == "n1"
    assert _zone_terms(decision.patch) == []
    with board.inflight.admission(board.snapshot) as admission:
        assert admission.in_flight(WEB) == {"n1": 1}


def test_pods_whose_bytes_all_stay_on_the_node_still_spread(prometheus):
    """Booked at nothing (1 MiB/s each, all of it to api on n3), the first
    pods leave n3's score as it was: the fan-in count, not the bookings,
    stops the node pull after web's share (2 of 3 pods); then the bookings
    spread the rest (the workload's spread left out: the pull alone)."""
    board = _board(prometheus, steering={"zoneMaxSkew": 0, "hostnameMaxSkew": 0})
    annotated = pod(
        generate_name="web-7d9c4b-",
        namespace="shop",
        labels={"app": "web", "pod-template-hash": "7d9c4b"},
        annotations={"nettraffic.io/expected-bandwidth": "1Mi"},
    )
    firsts = []
    for _ in range(6):
        decision = board.steerer.decide(annotated, {}, dry_run=False)
        firsts.append(decision.preferences[0].node)
    assert firsts[:2] == ["n3", "n3"]
    assert firsts.count("n3") < 6 and "n4" in firsts


def test_pairs_too_old_stop_pulling_and_their_age_and_failed_reads_show(prometheus):
    learning = _learned(prometheus)
    learned = learning.latest()
    assert learned is not None and learned.pulling is not None and learned.pairs_age == 0
    # The flow query now fails (nothing listens there); the pods' series
    # still come from the real Prometheus.
    settings = _settings("http://127.0.0.1:9", maxAgePasses=2)
    learning.peers = PeerTrafficSource(
        PrometheusSource(settings.prometheus, clock=lambda: END), settings.peers
    )
    learning.max_age = settings.peers.max_age_passes
    kinds = []
    for _ in range(40):  # bounded: a pass is a slice and its pairs' round
        kinds.append(learning.update())
        if learning.peer_failures["unreachable"] == 2:
            break
    learned = learning.latest()
    assert learned is not None and learned.peer_failures == {"unreachable": 2}, kinds
    # Two passes without a read: the pairs stay shown, but pull no more.
    assert learned.pairs_age == 2 and not learned.pairs_pull and learned.pulling is None
    assert learned.conversations is not None
    board = FixedBoard(
        LOADS,
        learning=learning,
        settings=_settings(prometheus.url),
        **{name: {"labels": {"topology.kubernetes.io/zone": zone}} for name, zone in ZONES.items()},
    )
    without = _board(prometheus, source="none")
    ours = board.steerer.decide(_web_pod(), {}, dry_run=False)
    theirs = without.steerer.decide(_web_pod(), {}, dry_run=False)
    assert ours.preferences == theirs.preferences and PEER_PULL not in str(ours.patch)
    document = workloads_document(board.snapshot, price_per_gb=0.01)["conversations"]
    assert (document["agePasses"], document["pulling"], document["failedReads"]) == (
        2,
        False,
        {"unreachable": 2},
    )
    assert pairs_age(board.snapshot) == 2 and peer_read_failures(board.snapshot) == {
        "unreachable": 2
    }
