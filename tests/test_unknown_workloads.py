"""A burst of a workload not learned yet spreads: hand-computed cases."""

from harness.reviews import pod
from kubectl_nettraffic.inflight.unknown_workloads import POINTS_PER_POD, UnknownWorkloadPods
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.scoring.node_scores import NodeScore
from tests.harness.scoreboards import fixed_board

WEB = Workload("default", "ReplicaSet", "web-7d9c4b")
API = Workload("default", "ReplicaSet", "api-5f6d")


def _node(name: str) -> NodeScore:
    return NodeScore(name, 0, 0, 0, None, None, None, None, 100.0, 0.0, True, True, None)


def test_each_pod_in_flight_counts_against_its_node_for_its_workload_only():
    pods = UnknownWorkloadPods(horizon=130.0)
    assert pods.handicap(WEB, 100.0) is None
    pods.add(WEB, "a", 100.0)
    pods.add(WEB, "a", 101.0)
    pods.add(WEB, "b", 102.0)
    pods.add(API, "c", 102.0)
    points = pods.handicap(WEB, 110.0)
    assert points is not None
    assert [points(_node(n)) for n in "abc"] == [2 * POINTS_PER_POD, POINTS_PER_POD, 0.0]
    points = pods.handicap(API, 110.0)
    assert points is not None and [points(_node(n)) for n in "abc"] == [0, 0, POINTS_PER_POD]
    # The measurements show a pod from podStartup + window after its admission on.
    points = pods.handicap(WEB, 230.5)
    assert points is not None and [points(_node(n)) for n in "abc"] == [POINTS_PER_POD] * 2 + [0]
    assert pods.handicap(WEB, 232.5) is None


# Scores: a 100, b 97.5, c 0; the default booking (1Mi) costs 0.26 points.
LOADS = {"a": 0.0, "b": 1e7, "c": 4e8}


def _first_nodes(board, pods):
    return [board.steerer.decide(p, {}, dry_run=False).preferences[0].node for p in pods]


def test_a_burst_booked_at_the_default_spreads_before_a_node_gets_a_second_pod():
    board = fixed_board(LOADS)
    web = [pod(generate_name="web-7d9c4b-") for _ in range(3)]
    # a takes the first; with it, a is 5.26 points down, below b
    assert _first_nodes(board, web) == ["a", "b", "a"]
    # another workload not learned yet is not held back by web's pods
    assert _first_nodes(board, [pod(generate_name="api-5f6d-")]) == ["a"]


def test_a_pod_whose_bandwidth_is_known_is_booked_by_it_alone():
    board = fixed_board(LOADS)
    annotated = [
        pod(generate_name="web-7d9c4b-", annotations={"nettraffic.io/expected-bandwidth": "1Mi"})
        for _ in range(3)
    ]
    assert _first_nodes(board, annotated) == ["a", "a", "a"]
