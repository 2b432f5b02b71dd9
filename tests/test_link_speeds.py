"""Links of different speeds: a pod's own bytes fill a slow link more, so the
nodes rank as they would score with the pod on them (the pod's size counts),
by every path of the choice; and the traffic tiers rank for the cluster's
typical pod."""

import random

import pytest

from harness.reviews import pod
from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.kube.pods import EXPECTED_BANDWIDTH
from kubectl_nettraffic.ranking.handicaps import POINTS_PER_POD
from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.tiers import assign_tiers, tier_ranking
from tests.harness.scoreboards import FixedBoard

GBIT = 1.25e8  # bytes/s


def _board(loads, speeds, mode="link-utilization", replica=None) -> FixedBoard:
    settings = settings_from_mapping(
        {
            "prometheus": {"url": "http://unused"},
            "metricsServer": {"enabled": False},
            "scoring": {"mode": mode},
            # Links alone: a burst's workload spread is tests/test_pulled_top.py's.
            "steering": {"zoneMaxSkew": 0, "hostnameMaxSkew": 0},
        }
    )
    return FixedBoard(loads, link_speed=speeds, settings=settings, replica=replica)


def _pod(bandwidth: float | None = None, node_selector: dict | None = None) -> dict:
    annotations = None if bandwidth is None else {EXPECTED_BANDWIDTH: f"{bandwidth:.0f}"}
    admitted = pod(annotations=annotations)
    if node_selector:
        admitted["spec"]["nodeSelector"] = node_selector
    return admitted


def test_a_heavy_pod_goes_to_the_fast_link_and_a_light_one_to_the_quiet_slow_link():
    # "slow": 1 Gbit/s at 10%; "fast": 10 Gbit/s at 15%.
    loads = {"slow": 0.10 * GBIT, "fast": 0.15 * 10 * GBIT}
    speeds = {"slow": GBIT, "fast": 10 * GBIT}
    heavy = _board(loads, speeds).steerer.decide(_pod(50e6), {}, dry_run=True)
    # 50 MB/s: 10% + 40% on the slow link, 15% + 4% on the fast one.
    assert [p.node for p in heavy.preferences] == ["fast", "slow"]
    light = _board(loads, speeds).steerer.decide(_pod(1e6), {}, dry_run=True)
    # 1 MB/s: 10.8% against 15.08%.
    assert [p.node for p in light.preferences] == ["slow", "fast"]


def test_equal_links_rank_as_measured_whatever_the_pod_s_size():
    loads = {"a": 0.30 * GBIT, "b": 0.10 * GBIT, "c": 0.20 * GBIT}
    for bandwidth in (1e3, 1e6, 1e8):
        board = _board(loads, dict.fromkeys(loads, GBIT))
        decision = board.steerer.decide(_pod(bandwidth), {}, dry_run=True)
        assert [p.node for p in decision.preferences] == ["b", "c", "a"]
        scores = {s.name: s.score for s in board.snapshot.candidates}
        # No handicap where every link is alike: the measured scores.
        assert [p.score for p in decision.preferences] == [scores[n] for n in ("b", "c", "a")]


def _expected(
    board: FixedBoard, bandwidth: float, count: int, allowed=None, spread=None
) -> list[str]:
    """The full scan: each candidate's live score less what the pod costs its
    link beyond the fastest (and ``spread``: node -> its workload's pods in
    flight there, POINTS_PER_POD each), ties to the better measured rank."""
    spread = spread or {}
    unseen = board.inflight.view()
    candidates = board.snapshot.candidates
    least = min(s.penalty_per_byte for s in candidates)
    ranked = sorted(
        (
            s.score_with(unseen.get(s.name, (0.0, 0))[0])
            - (s.penalty_per_byte - least) * bandwidth
            - POINTS_PER_POD * spread.get(s.name, 0),
            -i,
            s.name,
        )
        for i, s in enumerate(candidates)
        if allowed is None or s.name in allowed
    )
    return [name for _, _, name in reversed(ranked)][:count]


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("mode", ["link-utilization", "traffic"])
def test_a_burst_on_mixed_links_chooses_what_the_full_scan_chooses(seed, mode):
    """Annotated pods (the shared heap, grouped by link speed), unlearned
    pods (booked at the default, their workload's burst spread: the rest
    handicap and, from 8 nodes on, a heap of their own) and pods with a
    nodeSelector (the scan), on random clusters of 1, 10 and 25 Gbit/s
    links."""
    rng = random.Random(seed)
    names = [f"n{i:03d}" for i in range(rng.choice((12, 40, 150)))]
    speeds = {n: rng.choice((GBIT, 10 * GBIT, 25 * GBIT)) for n in names}
    loads = {n: rng.uniform(0.01, 0.6) * speeds[n] for n in names}
    board = _board(loads, speeds, mode)
    default = board.settings.steering.default_pod_bandwidth
    spread: dict[str, int] = {}  # the unlearned workload's pods booked, per node
    for _ in range(30):
        kind = rng.choice(("annotated", "unlearned", "constrained"))
        if kind == "unlearned":
            expected = _expected(board, default, 3, spread=spread)
            decision = board.steerer.decide(pod(), {}, dry_run=False)
            first = decision.preferences[0].node
            spread[first] = spread.get(first, 0) + 1
        elif kind == "constrained":
            bandwidth = rng.uniform(1e5, 8e7)
            allowed = set(rng.sample(names, len(names) // 2))
            for name in allowed:
                board.snapshot.nodes[name].labels["pick"] = "yes"
            expected = _expected(board, bandwidth, 3, allowed)
            decision = board.steerer.decide(_pod(bandwidth, {"pick": "yes"}), {}, dry_run=False)
            for name in allowed:
                del board.snapshot.nodes[name].labels["pick"]
        else:
            bandwidth = rng.uniform(1e5, 8e7)
            expected = _expected(board, bandwidth, 3)
            decision = board.steerer.decide(_pod(bandwidth), {}, dry_run=False)
        assert [p.node for p in decision.preferences] == expected, kind


def _score(name: str, score: float, penalty: float) -> NodeScore:
    return NodeScore(
        name, None, None, None, None, None, None, None, score, penalty, True, True, None
    )


def test_tiers_rank_for_the_typical_pod_on_mixed_links():
    # "slow" is the quietest measured, but one typical pod (20 MB/s) fills
    # 16 points of its 1 Gbit/s link and fewer than 2 of the others'.
    ranked = [
        _score("slow", 95.0, 100 / GBIT),
        _score("fast-a", 90.0, 100 / (10 * GBIT)),
        _score("fast-b", 89.0, 100 / (10 * GBIT)),
        _score("fast-c", 88.5, 100 / (25 * GBIT)),
    ]
    order = [s.name for s in tier_ranking(ranked, 20e6)]
    assert order == ["fast-a", "fast-c", "fast-b", "slow"]
    assert assign_tiers(tier_ranking(ranked, 20e6), {})["slow"] == "4"
    # Equal links: the measured order, whatever the pod.
    alike = [_score(f"n{i}", 90.0 - i, 1e-7) for i in range(4)]
    assert tier_ranking(alike, 1e9) == alike


def test_the_extender_prioritizes_as_the_webhook_ranks():
    loads = {"slow": 0.02 * GBIT, "fast": 0.15 * 10 * GBIT}
    board = _board(loads, {"slow": GBIT, "fast": 10 * GBIT})
    serving, scores = board.serving, {s.name: s for s in board.snapshot.candidates}
    least = min(s.penalty_per_byte for s in scores.values())

    def expected(bandwidth: float) -> list[tuple[str, int]]:
        return [
            (name, round((s.score - (s.penalty_per_byte - least) * bandwidth) / 10))
            for name, s in ((name, scores[name]) for name in ("slow", "fast"))
        ]

    heavy = serving.extender_scores(_pod(50e6), ["slow", "fast"], stale=False)
    assert heavy == expected(50e6)
    assert heavy[1][1] > heavy[0][1]  # the fast link first
    light = serving.extender_scores(_pod(1e6), ["slow", "fast"], stale=False)
    assert light == expected(1e6)
    assert light[0][1] > light[1][1]  # the quiet slow link first
    # A pod steering cannot read ranks as one of the default's size (1 MiB/s).
    malformed = {"metadata": ["not", "an", "object"], "spec": {}}
    assert serving.extender_scores(malformed, ["slow", "fast"], stale=False) == expected(2**20)
    assert serving.extender_scores(_pod(50e6), ["slow", "fast"], stale=True) == [
        ("slow", 0),
        ("fast", 0),
    ]
