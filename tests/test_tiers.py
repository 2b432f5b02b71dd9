"""Traffic tiers: busy nodes apart, the others by rank, with hysteresis, and the
label writes they need."""

import json
from dataclasses import replace

import jsonpatch

from harness.reviews import pod
from kubectl_nettraffic.kube.nodes import ZONE_COPY_LABEL, ZONE_LABEL
from kubectl_nettraffic.kube.pods import EXPECTED_BANDWIDTH, PREFERRED
from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.placement import Preference
from kubectl_nettraffic.scoring.savings import FULL_SAVING, fullness_at, fullness_with
from kubectl_nettraffic.scoring.tiers import TIER_LABEL, Busy, assign_tiers, tier_changes
from kubectl_nettraffic.steering.affinity_patch import affinity_patch
from kubectl_nettraffic.steering.patch_check import apply_and_check
from tests.harness.scoreboards import FixedBoard

BASE = NodeScore("x", 0, 0, 0, None, None, None, None, 0.0, 0.0, True, True, None)


def _ranked(names):
    return [replace(BASE, name=name) for name in names]


def test_nodes_are_put_in_rank_quarters():
    names = [f"n{i}" for i in range(8)]
    assert assign_tiers(_ranked(names), {}) == {
        "n0": "1",
        "n1": "1",
        "n2": "2",
        "n3": "2",
        "n4": "3",
        "n5": "3",
        "n6": "4",
        "n7": "4",
    }
    assert assign_tiers(_ranked(["only"]), {}) == {"only": "3"}  # the middle of one place


def test_a_node_keeps_its_tier_until_it_is_past_the_margin():
    names = [f"n{i:03d}" for i in range(100)]
    first = assign_tiers(_ranked(names), {}, margin=0.05)
    assert first["n024"] == "1" and first["n025"] == "2"
    # n024 drops 4 places (position 0.285 < 0.25 + 0.05): still tier 1.
    moved = names[:24] + names[25:29] + ["n024"] + names[29:]
    assert assign_tiers(_ranked(moved), first, margin=0.05)["n024"] == "1"
    # 6 places (0.305): past the margin, it takes the tier of its rank.
    moved = names[:24] + names[25:31] + ["n024"] + names[31:]
    again = assign_tiers(_ranked(moved), first, margin=0.05)
    assert again["n024"] == "2"
    # Neighbours that moved up one place each stay where they were.
    assert all(again[name] == first[name] for name in names if name != "n024")
    # A label that is not a tier is replaced.
    assert assign_tiers(_ranked(names), {"n000": "quiet"})["n000"] == "1"


GBIT = 1.25e8  # bytes/s


def _on_links(utilisation: list[float]) -> list[NodeScore]:
    """Nodes n0.. on 10 Gbit/s links at ``utilisation``, ranked as given."""
    return [
        replace(BASE, name=f"n{i}", link_speed=10 * GBIT, link_utilization=u)
        for i, u in enumerate(utilisation)
    ]


def _busy(ranked: list[NodeScore], bandwidth: float = 0.0) -> Busy:
    """As snapshot_tiers reckons it at steering.busyAbove 0.5: busy from 10
    points (55% full), busy no more under 5 (52.5%)."""
    fullness = {score.name: fullness_with(score, bandwidth) for score in ranked}
    return Busy(fullness, fullness_at(FULL_SAVING, 0.5), fullness_at(FULL_SAVING / 2, 0.5))


def test_the_busiest_tier_holds_only_the_busy_nodes():
    # One hot link among eight: it alone is tier 4, the others split in thirds.
    ranked = _on_links([0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.9])
    tiers = assign_tiers(ranked, {}, busy=_busy(ranked))
    assert [tiers[f"n{i}"] for i in range(8)] == ["1", "1", "2", "2", "2", "3", "3", "4"]
    # By rank alone the quarter held a quiet node too.
    assert assign_tiers(ranked, {})["n6"] == "4"
    # A calm cluster has no busiest tier; nor one whose fullest link would
    # cost a pod 4 points (52%): not worth steering every pod off it.
    calm = _on_links([0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.45])
    assert set(assign_tiers(calm, {}, busy=_busy(calm)).values()) == {"1", "2", "3"}
    assert assign_tiers(calm, {}, busy=_busy(calm, 0.07 * 10 * GBIT))["n7"] == "3"
    # ... until the typical pod's own bytes would cost it 10 points there.
    assert assign_tiers(calm, {}, busy=_busy(calm, 0.11 * 10 * GBIT))["n7"] == "4"
    # Where more than a quarter are busy, the tiers are rank quarters.
    loaded = _on_links([0.05, 0.1, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9])
    assert assign_tiers(loaded, {}, busy=_busy(loaded)) == assign_tiers(loaded, {})


def test_a_busy_node_leaves_the_busiest_tier_under_half_the_cost():
    ranked = _on_links([0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.54])
    labelled = {"n7": "4"}
    # 8 points: it stays busy.
    assert assign_tiers(ranked, labelled, busy=_busy(ranked))["n7"] == "4"
    # Not labelled busy yet, the same link is not.
    assert assign_tiers(ranked, {}, busy=_busy(ranked))["n7"] == "3"
    # 4 points: it leaves.
    quieter = _on_links([0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.52])
    assert assign_tiers(quieter, labelled, busy=_busy(quieter))["n7"] == "3"


def test_only_changed_labels_are_written_and_unranked_nodes_lose_theirs():
    assigned = {"a": "1", "b": "2"}
    current = {"a": "1", "b": "3", "c": "4", "d": None}
    assert tier_changes(assigned, current) == {"b": "2", "c": None}


QUIET_AND_BUSY = ((100, ("1", "2")), (70, ("3",)))


def test_the_tier_terms_are_added_once_a_term_per_weight():
    preferences = [Preference("n1", 100, 90.0)]
    patch = affinity_patch(pod(), preferences, {}, tier_terms=QUIET_AND_BUSY)
    terms = _tier_terms(patch)
    assert [(t["weight"], t["preference"]["matchExpressions"]) for t in terms] == [
        (100, [{"key": TIER_LABEL, "operator": "In", "values": ["1", "2"]}]),
        (70, [{"key": TIER_LABEL, "operator": "In", "values": ["3"]}]),
    ]
    # The op texts are what the generic encoder writes.
    assert [op.json for op in patch] == [json.dumps(op, separators=(",", ":")) for op in patch]
    # A pod that has them already does not get them twice.
    steered = jsonpatch.apply_patch(pod(), patch)
    again = affinity_patch(steered, [Preference("n2", 100, 80.0)], {}, tier_terms=QUIET_AND_BUSY)
    added = [op["value"] for op in again if op["path"].endswith(f"{PREFERRED}/-")]
    assert len(added) == 1 and "matchFields" in added[0]["preference"]
    # None asked: none added.
    assert _tier_terms(affinity_patch(pod(), preferences, {})) == []


def _tier_terms(patch, admitted=None):
    patched = apply_and_check(admitted or pod(), patch)
    terms = patched["spec"]["affinity"]["nodeAffinity"][PREFERRED]
    return [t for t in terms if "matchExpressions" in t["preference"]]


def test_tier_terms_leave_out_the_zones_the_spread_bars():
    """Each tier term, also outside the barred zones on the zone copy; the
    op texts are still what the generic encoder writes."""
    barred = frozenset({"zone-b", "zone-a"})
    preferences = [Preference("n1", 100, 90.0)]
    patch = affinity_patch(pod(), preferences, {}, tier_terms=QUIET_AND_BUSY, barred_zones=barred)
    terms = _tier_terms(patch)
    assert [t["weight"] for t in terms] == [100, 70]
    outside = {"key": ZONE_COPY_LABEL, "operator": "NotIn", "values": ["zone-a", "zone-b"]}
    assert all(t["preference"]["matchExpressions"][1:] == [outside] for t in terms)
    assert [op.json for op in patch] == [json.dumps(op, separators=(",", ":")) for op in patch]
    # None barred: the shared terms, on the tier label alone.
    unbarred = _tier_terms(affinity_patch(pod(), preferences, {}, tier_terms=QUIET_AND_BUSY))
    assert all(len(t["preference"]["matchExpressions"]) == 1 for t in unbarred)


def test_a_workload_s_next_pod_s_tier_terms_leave_out_the_zones_it_holds():
    """Under a zone spread that fills every zone first, each pod's tier terms
    leave out the zones its workload's earlier pods took."""
    loads = {f"{zone}{i}": 1e9 * (i == 2) for zone in "abc" for i in (1, 2)}
    zones = {  # a2, b2, c2 hot, in the busiest tier
        name: {"labels": {ZONE_LABEL: f"zone-{name[0]}", TIER_LABEL: "1" if i == "1" else "4"}}
        for name, i in ((name, name[1]) for name in loads)
    }
    board = FixedBoard(loads, steering={"zoneMaxSkew": 1}, **zones)
    outside = []
    for _ in range(3):
        admitted = pod(annotations={EXPECTED_BANDWIDTH: "100Mi"})
        decision = board.steerer.decide(admitted, {}, False)
        assert decision.patch is not None
        zones = [
            expression["values"]
            for term in _tier_terms(decision.patch, admitted)
            for expression in term["preference"]["matchExpressions"]
            if expression["key"] == ZONE_COPY_LABEL
        ]
        outside.append(zones[0] if zones else [])
    assert outside == [[], ["zone-a"], ["zone-a", "zone-b"]]
