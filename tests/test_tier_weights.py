"""The tier terms weigh what each tier saves a pod: tiers alike weigh alike,
a calm cluster's pods get none, and a node saves only what it saves over
the tiers kube-scheduler then picks among."""

from dataclasses import replace

from bench.testbed.cluster import preferred_weights
from harness.fakeapi import node
from harness.reviews import pod
from kubectl_nettraffic.kube.nodes import node_from_json
from kubectl_nettraffic.kube.pods import EXPECTED_BANDWIDTH, PREFERRED
from kubectl_nettraffic.measuring.tier_labels import snapshot_tiers
from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.placement import weighed
from kubectl_nettraffic.scoring.savings import FieldCost
from kubectl_nettraffic.scoring.tier_weights import (
    BY_RANK,
    LEFT_OUT_MOST,
    TierCosts,
)
from kubectl_nettraffic.scoring.tiers import TIER_LABEL
from kubectl_nettraffic.steering.patch_check import apply_and_check
from tests.harness.scoreboards import FixedBoard

GBIT = 1.25e8  # bytes/s
BASE = NodeScore("x", 0, 0, 0, 10 * GBIT, 0.0, None, None, 100.0, 0.0, True, True, None)


def _costs(utilisation: dict[str, float], tiers: dict[str, str]) -> TierCosts:
    """Nodes on 10 Gbit/s links at ``utilisation``, labelled ``tiers``."""
    scores = [replace(BASE, name=name, link_utilization=u) for name, u in utilisation.items()]
    nodes = {
        name: node_from_json(node(name, labels={TIER_LABEL: tier} if tier else {}))
        for name, tier in tiers.items()
    }
    return TierCosts(scores, nodes, busy_above=0.5)


def test_tiers_that_cost_nothing_give_no_terms():
    calm = _costs(
        {"a": 0.05, "b": 0.2, "c": 0.3, "d": 0.45}, {"a": "1", "b": "2", "c": "3", "d": "4"}
    )
    assert calm.choice(1e6) == ((), None)
    # No node carries a tier yet (before the first labelling): none either.
    assert _costs({"a": 0.05, "b": 0.9}, {"a": "", "b": ""}).choice(1e6) == ((), None)


def test_each_tier_weighs_what_it_costs_over_the_cheapest():
    # Tier 4 holds a link at 90%: 80 points; tier 3 one at 53%: 6 points; the
    # mean over each tier's two nodes.
    utilisation = {"a": 0.1, "b": 0.2, "c": 0.1, "d": 0.3, "e": 0.1, "f": 0.53, "g": 0.1, "h": 0.9}
    tiers = dict(zip(utilisation, "11223344", strict=True))
    choice = _costs(utilisation, tiers).choice(0.0)
    assert choice.terms == ((60, ("1", "2")), (42, ("3",)))  # 3 points more: 30% off; 40: none
    assert choice.cost == 0.0
    # A pod whose own bytes (6% of a link) take the tier-1 links past half
    # full (0.45 -> 0.51: 2 points) and not the tier-2 ones (0.42 -> 0.48):
    # tier 2 is then the cheapest for it.
    heavy = _costs(
        {"a": 0.45, "b": 0.45, "c": 0.42, "d": 0.42}, dict(zip("abcd", "1122", strict=True))
    )
    assert heavy.choice(0.06 * 10 * GBIT) == (((60, ("2",)), (48, ("1",))), 0.0)
    assert heavy.choice(0.0) == ((), None)  # a pod that sends nothing: alike
    # Under a point more, a tier weighs as the cheapest: a link at 51%
    # costs 2 points, half a point over its tier's four nodes.
    slight = _costs(
        {"a": 0.1, "b": 0.1, "c": 0.1, "d": 0.51, "e": 0.1, "f": 0.1, "g": 0.1, "h": 0.9},
        dict(zip("abcdefgh", "11222234", strict=True)),
    )
    assert slight.choice(0.0).terms == ((60, ("1", "2", "3")),)


def _terms(decision, admitted):
    patched = apply_and_check(admitted, decision.patch)
    return (patched["spec"].get("affinity") or {}).get("nodeAffinity", {}).get(PREFERRED, [])


def test_a_calm_cluster_s_pods_get_no_term_and_a_hot_tier_only_its_own():
    tiers = {"q1": "1", "q2": "2", "q3": "3", "h": "4"}
    labelled = {name: {"labels": {TIER_LABEL: tier}} for name, tier in tiers.items()}
    admitted = pod(annotations={EXPECTED_BANDWIDTH: "1Mi"})
    calm = FixedBoard({"q1": 1e8, "q2": 2e8, "q3": 3e8, "h": 4e8}, link_speed=10 * GBIT, **labelled)
    decision = calm.steerer.decide(admitted, {}, False)
    assert _terms(decision, pod(annotations={EXPECTED_BANDWIDTH: "1Mi"})) == []
    assert calm.steerer.notes["no-gain"] == 1
    # One hot node, in the busiest tier: the quiet tiers are preferred alike,
    # and no quiet node saves a point over them, so no node is named.
    hot = FixedBoard(
        {"q1": 1e8, "q2": 2e8, "q3": 3e8, "h": 2.2e9}, link_speed=10 * GBIT, **labelled
    )
    terms = _terms(hot.steerer.decide(admitted, {}, False), admitted)
    assert [(t["weight"], t["preference"]) for t in terms] == [
        (
            60,
            {
                "matchExpressions": [
                    {"key": TIER_LABEL, "operator": "In", "values": ["1", "2", "3"]}
                ]
            },
        )
    ]
    # A pod of unknown size is steered in full: its node named, the tiers by rank.
    unknown = pod()
    terms = _terms(hot.steerer.decide(unknown, {}, False), unknown)
    assert "matchFields" in terms[0]["preference"] and terms[0]["weight"] == 100
    tiered = [t for t in terms if "matchExpressions" in t["preference"]]
    assert [(t["weight"], t["preference"]["matchExpressions"][0]["values"]) for t in tiered] == [
        (60, ["1"]),
        (40, ["2"]),
        (20, ["3"]),
    ]
    # Without the tier terms (steering.trafficTiers off) the quiet nodes save
    # what the hot one costs over them all, and are named.
    off = FixedBoard(
        {"q1": 1e8, "q2": 2e8, "q3": 3e8, "h": 2.2e9},
        link_speed=10 * GBIT,
        steering={"trafficTiers": False},
        **labelled,
    )
    named = _terms(off.steerer.decide(admitted, {}, False), admitted)
    assert named and all("matchFields" in t["preference"] for t in named)


def test_tiers_by_rank_go_only_with_a_node_term():
    """A pod booked at another's size (the cluster-wide figure) prefers the
    tiers by rank, but only where a node saves it something: in a calm
    cluster it gets no term at all, as kube-scheduler alone would place it."""
    utilisation = {"a": 0.05, "b": 0.1, "c": 0.2, "d": 0.3}
    tiers = _costs(utilisation, dict(zip(utilisation, "1234", strict=True)))
    scores = [replace(BASE, name=name, link_utilization=u) for name, u in utilisation.items()]
    ranked = [(100.0 - i, i, score) for i, score in enumerate(scores)]
    field = FieldCost(scores, 0.5)
    calm = weighed(ranked[:3], field, tiers, 1e6, 0.5, own_size=False)
    assert not any(p.weight for p in calm.preferences) and calm.tier_terms == ()
    # A hot node among them: the others save what it costs, and get the tiers by rank.
    scores[3] = replace(scores[3], link_utilization=0.95)
    hot = weighed(ranked[:3], FieldCost(scores, 0.5), tiers, 1e6, 0.5, own_size=False)
    assert hot.preferences[0].weight and hot.tier_terms == BY_RANK.terms


# Seven quiet nodes and h at 88% of its link.
LOADS = {f"q{i}": (i + 1) * 1e8 for i in range(7)} | {"h": 2.2e9}


def _labelled_board(loads: dict[str, float]) -> tuple[FixedBoard, dict[str, str]]:
    """A board whose nodes carry the tiers the writer gives them, and those tiers."""
    measured = FixedBoard(loads, link_speed=10 * GBIT)
    default = measured.settings.steering.default_pod_bandwidth
    tiers = snapshot_tiers(measured.snapshot, {}, default, busy_above=0.5)
    labelled = {name: {"labels": {TIER_LABEL: tier}} for name, tier in tiers.items()}
    return FixedBoard(loads, link_speed=10 * GBIT, **labelled), tiers


def test_one_hot_node_is_the_only_one_its_pods_tier_term_leaves_out():
    """The tiers as the writer labels them: a hot link is tier 4 alone, so
    a pod's tier term leaves out that node and no quiet one."""
    board, tiers = _labelled_board(LOADS)
    assert [name for name, tier in tiers.items() if tier == "4"] == ["h"]
    admitted = pod(annotations={EXPECTED_BANDWIDTH: "1Mi"})
    terms = _terms(board.steerer.decide(admitted, {}, False), admitted)
    assert [(t["weight"], t["preference"]["matchExpressions"][0]["values"]) for t in terms] == [
        (60, ["1", "2", "3"])
    ]
    matched = [name for name, tier in tiers.items() if tier in ("1", "2", "3")]
    assert sorted(matched) == sorted(name for name in LOADS if name != "h")


def test_a_node_booked_past_a_point_since_the_measurement_leaves_the_tier_terms():
    """The tiers follow the measurement: a quiet node a heavy pod was just
    booked on is still tier 1, and its term would draw the next light pod
    beside it. The light pod's tier terms leave that node out by name, so
    kube-scheduler's NodeAffinity scores it nothing from them."""
    board, tiers = _labelled_board(LOADS)
    nodes = [node(name, labels={TIER_LABEL: tier}) for name, tier in tiers.items()]

    def light_pod_weights() -> tuple[list[dict], dict[str, int]]:
        admitted = pod(annotations={EXPECTED_BANDWIDTH: "1Mi"})
        decision = board.steerer.decide(admitted, {}, True)  # a dry run books nothing
        patched = apply_and_check(admitted, decision.patch)
        weights = preferred_weights(patched, nodes)
        terms = (patched["spec"].get("affinity") or {})["nodeAffinity"][PREFERRED]
        return terms, {item["metadata"]["name"]: weights.get(i, 0) for i, item in enumerate(nodes)}

    terms, before = light_pod_weights()
    assert not any("matchFields" in t["preference"] for t in terms)
    assert before == {name: 60 if name != "h" else 0 for name in tiers}
    # A pod of 6 Gbit/s (60% of a link) booked on the quietest node.
    heavy = pod(annotations={EXPECTED_BANDWIDTH: f"{int(0.6 * 10 * GBIT)}"})
    decision = board.steerer.decide(heavy, {}, False)
    booked_on = max(decision.preferences, key=lambda p: p.weight).node
    assert tiers[booked_on] == "1"
    terms, after = light_pod_weights()
    assert [t["preference"].get("matchFields") for t in terms] == [
        [{"key": "metadata.name", "operator": "NotIn", "values": [booked_on]}]
    ]
    assert after == before | {booked_on: 0}


def test_only_the_costliest_bookings_are_left_out_each_by_name():
    names = [f"n{i}" for i in range(LEFT_OUT_MOST + 3)]
    utilisation = dict.fromkeys([*names, "light", "named", "busy"], 0.1) | {"busy": 0.9}
    tiers = dict.fromkeys(utilisation, "1") | {"busy": "4", "unlabelled": ""}
    costs = _costs(utilisation | {"unlabelled": 0.1}, tiers)
    link = 10 * GBIT
    # n0 the heaviest booking; "light" booked under a point's cost; "busy"
    # outside the terms' tiers, "unlabelled" in none, "gone" not a candidate.
    unseen = {name: ((0.9 - 0.02 * i) * link, 1) for i, name in enumerate(names)}
    unseen |= {"light": (0.3 * link, 2), "named": (link, 1), "busy": (0.5 * link, 1)}
    unseen |= {"unlabelled": (link, 1), "gone": (link, 1)}
    terms = ((60, ("1", "2")),)
    left_out = costs.booked_since(terms, unseen, 1e6, named={"named"})
    assert left_out == tuple(sorted(names[:LEFT_OUT_MOST]))
    assert costs.booked_since((), unseen, 1e6) == ()  # no tier terms
    # kube-scheduler picks one of the term's 13 nodes: a booking must cost
    # 13 points more to save a point. 0.43 of a link on 0.1 costs 6.
    n10 = (0.43 * link, 1)
    assert costs.booked_since(terms, {"n10": n10}, 1e6) == ()
    assert costs.booked_since(terms, {"n10": (0.5 * link, 1)}, 1e6) == ("n10",)  # 40 points
    # Over more than 100 nodes no booking saves a point: none left out.
    many = _costs(
        dict.fromkeys(map(str, range(101)), 0.1), dict.fromkeys(map(str, range(101)), "1")
    )
    assert many.booked_since(((60, ("1",)),), {"0": (10 * link, 1)}, 1e6) == ()
    fewer = _costs(
        dict.fromkeys(map(str, range(100)), 0.1), dict.fromkeys(map(str, range(100)), "1")
    )
    assert fewer.booked_since(((60, ("1",)),), {"0": (10 * link, 1)}, 1e6) == ("0",)
