"""A workload's spread is kept: no preference names a node that would
break the spread the pod is scheduled with (scoring/spread.py)."""

import math
from dataclasses import replace

import jsonpatch
import pytest

from harness.reviews import pod
from kubectl_nettraffic.inflight.placed import PlacedPods
from kubectl_nettraffic.inflight.workload_counts import WorkloadCounts
from kubectl_nettraffic.kube.nodes import ZONE_LABEL
from kubectl_nettraffic.kube.pods import EXPECTED_BANDWIDTH, PREFERRED
from kubectl_nettraffic.kube.workloads import Workload, pod_template, pod_workload
from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.savings import Crowded, FieldCost, cost
from kubectl_nettraffic.scoring.spread import HOSTNAME_KEY, ZONE_KEY, Spread, SpreadRules
from tests.harness.scoreboards import MEASURED_AT, FixedBoard

LINK = 1e9
BASE = NodeScore("x", 0, 0, 0, LINK, 0.0, None, None, 100.0, 0.0, True, True, None)


def _constraint(key: str, skew: object) -> dict:
    return {"topologyKey": key, "maxSkew": skew, "whenUnsatisfiable": "ScheduleAnyway"}


def test_a_pod_s_own_constraints_replace_the_defaults():
    # The defaults count the pod's ReplicaSet alone, as kube-scheduler's do.
    assert SpreadRules.of(pod(), 5, 3) == SpreadRules(5, 3, defaults=True, per_template=True)
    # The default zone spread turned off (0): no zone kept at all.
    assert SpreadRules.of(pod(), 0, 0) == SpreadRules(
        None, None, defaults=True, per_template=True, fills_zones=False
    )
    # A pod of unknown size keeps the default zones even; its own as they are.
    assert SpreadRules.of(pod(), 5, 3).balanced() == SpreadRules(1, 3, 0, True, True)
    own = pod()
    own["spec"]["topologySpreadConstraints"] = [_constraint(ZONE_KEY, 2)]
    assert SpreadRules.of(own, 5, 3) == SpreadRules(2, None)  # no hostname one: none kept
    assert SpreadRules.of(own, 5, 3).balanced() == SpreadRules(2, None)
    # Its own with matchLabelKeys [pod-template-hash]: the ReplicaSet alone too.
    own["spec"]["topologySpreadConstraints"][0]["matchLabelKeys"] = ["pod-template-hash"]
    assert SpreadRules.of(own, 5, 3) == SpreadRules(2, None, per_template=True)
    own["spec"]["topologySpreadConstraints"] = [
        _constraint(HOSTNAME_KEY, 2),
        _constraint("example.com/rack", 1),  # left to kube-scheduler, counted
        _constraint(ZONE_KEY, "two"),  # malformed: counted, not read
        "not a constraint",
    ]
    assert SpreadRules.of(own, 5, 3) == SpreadRules(None, 2, unknown=3)


ZONE_OF = {"a1": "a", "a2": "a", "b1": "b", "c1": "c"}


def _places(pods_on: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    per_zone: dict[str, int] = {}
    for node, pods in pods_on.items():
        per_zone[ZONE_OF[node]] = per_zone.get(ZONE_OF[node], 0) + pods
    return pods_on, per_zone


@pytest.mark.parametrize(
    ("pods_on", "skew", "barred"),
    [
        ({}, 5, set()),  # nothing placed: every zone open
        ({"a1": 1}, 5, {"a"}),  # b and c hold none: filled first
        ({"a1": 1, "b1": 1, "c1": 1}, 5, set()),
        ({"a1": 4, "a2": 2, "b1": 1, "c1": 2}, 5, {"a"}),  # a holds 6 = 1 + 5
        ({"a1": 2, "b1": 1, "c1": 1}, 1, {"a"}),
    ],
)
def test_zones_past_the_skew_or_while_a_zone_is_empty_are_barred(pods_on, skew, barred):
    spread = Spread(SpreadRules(skew, None), _places(pods_on), ZONE_OF, {"a", "b", "c"})
    assert spread.barred_zones == barred
    assert spread.zone_allows("b1") == ("b" not in barred)


def test_own_constraints_naming_no_zone_keep_every_zone_but_no_skew():
    # Per hostname only: the empty zones first (a workload of three keeps
    # every zone), then no zone skew; the default spread turned off: none.
    hostname_only = SpreadRules(None, 3)
    zones = {"a", "b", "c"}
    assert Spread(hostname_only, _places({"a1": 1}), ZONE_OF, zones).barred_zones == {"a"}
    filled = _places({"a1": 9, "b1": 1, "c1": 1})
    assert Spread(hostname_only, filled, ZONE_OF, zones).barred_zones == set()
    off = SpreadRules(None, 3, fills_zones=False)
    assert Spread(off, _places({"a1": 1}), ZONE_OF, zones).barred_zones == set()


def test_a_pair_its_peers_pull_together_may_share_a_zone_but_not_a_third_pod():
    zones = {"a", "b", "c"}
    pair = Spread(SpreadRules(5, None), _places({"a1": 1}), ZONE_OF, zones, keeps_zones=False)
    assert pair.barred_zones == set()
    # The third pod of a workload that grew goes to an empty zone, as ever.
    third = Spread(SpreadRules(5, None), _places({"a1": 2}), ZONE_OF, zones, keeps_zones=False)
    assert third.barred_zones == {"a"}
    # A zone constraint of the pod's own with maxSkew 1 is kept whatever its pull.
    own = Spread(SpreadRules(1, None), _places({"a1": 1}), ZONE_OF, zones, keeps_zones=False)
    assert own.barred_zones == {"a"}


def test_a_node_holding_max_skew_pods_of_the_workload_is_full():
    spread = Spread(SpreadRules(None, 3), _places({"a1": 3, "a2": 2}), ZONE_OF, {"a", "b", "c"})
    assert spread.full("a1") and not spread.full("a2") and not spread.full("b1")
    # A pod of the workload on every candidate: the skew is over the fewest.
    everywhere = _places({"a1": 4, "a2": 2, "b1": 1, "c1": 3})
    spread = Spread(SpreadRules(None, 3), everywhere, ZONE_OF, {"a"}, fewest_on_node=1)
    assert [spread.full(n) for n in ZONE_OF] == [True, False, False, False]


def test_the_crowded_nodes_hold_more_of_the_workload_than_the_fewest():
    spread = Spread(SpreadRules(None, 3), _places({"a1": 3, "a2": 1}), ZONE_OF, {"a", "b", "c"})
    assert sorted(spread.crowded()) == ["a1", "a2"]  # b1 and c1 hold none
    everywhere = _places({"a1": 4, "a2": 1, "b1": 1, "c1": 3})
    spread = Spread(SpreadRules(None, 3), everywhere, ZONE_OF, {"a"}, fewest_on_node=1)
    assert sorted(spread.crowded()) == ["a1", "c1"]


def test_the_spread_s_pick_costs_the_mean_over_the_candidates_not_crowded():
    fills = {"a": 0.1, "b": 0.6, "c": 0.7, "d": 0.95}
    scores = {name: replace(BASE, name=name, link_utilization=f) for name, f in fills.items()}
    field = FieldCost(scores.values(), busy_above=0.5)
    read: list[list[str]] = []

    def crowded(names: list[str]) -> Crowded:
        def nodes() -> list[NodeScore]:
            read.append(names)
            return [scores[n] for n in names]

        return Crowded(len(names), nodes)

    for left_out in (["a"], ["a", "d"], ["b", "c", "d"]):
        rest = [s for name, s in scores.items() if name not in left_out]
        expected = sum(cost(s, 1e7, 0.5) for s in rest) / len(rest)
        pick = field.spread_pick(1e7, crowded(left_out))
        # What it is at most, knowing only how many are crowded: the nodes unread.
        assert pick.at_most >= expected - 1e-9 and read == []
        assert pick.exactly() == pytest.approx(expected)
        assert read.pop() == left_out
    # None left: the field's mean.
    everyone = field.spread_pick(1e7, crowded(list(scores)))
    assert everyone.at_most == math.inf
    assert everyone.exactly() == pytest.approx(field.mean(1e7))
    assert field.most(1e7) == pytest.approx(cost(scores["d"], 1e7, 0.5))


def test_the_fewest_pods_on_a_node_are_counted_as_pods_come_and_go():
    counts = WorkloadCounts()
    web = Workload("default", "Deployment", "web")
    for node in ("a1", "a1", "a2", "b1"):
        counts.add(web, node, 1)
    assert counts.fewest(web, nodes=4) == 0  # a node holds none
    assert counts.fewest(web, nodes=3) == 1
    counts.add(web, "a2", 1)
    counts.add(web, "b1", 1)
    assert counts.fewest(web, nodes=3) == 2
    assert counts.pods[web] == 6
    assert counts.holding_more(web, 2) == 0 and counts.holding_more(web, 1) == 3
    counts.add(web, "a1", -2)
    assert counts.fewest(web, nodes=3) == 0 and "a1" not in counts.per_node[web]
    assert counts.pods[web] == 4
    for node in ("a2", "b1"):
        counts.add(web, node, -2)
    assert web not in counts.pods and web not in counts.per_node


HOT_BESIDE_TWO_QUIET = {
    "a": 2 * 0.02 * LINK,
    "b": 2 * 0.03 * LINK,
    "h1": 1.9 * LINK,
    "h2": 1.9 * LINK,
}


def _third_of_a_burst(board: FixedBoard, admitted: dict) -> list[tuple[str, int]]:
    """The third pod's preferences, (node, weight), after two booked on "a"."""
    for _ in range(2):
        board.steerer.decide(admitted, {}, dry_run=False)
    with board.inflight.admission(board.snapshot) as admission:
        assert admission.in_flight(pod_workload(admitted)) == {"a": 2}
    return [
        (p.node, p.weight) for p in board.steerer.decide(admitted, {}, dry_run=False).preferences
    ]


def test_a_node_the_pod_s_own_hostname_spread_filled_gets_no_term():
    # Two quiet nodes beside hot ones: the third pod still ranks "a" first
    # (its bookings lower it but little), but "a" holds as many of the
    # workload's pods as the pod's own hostname maxSkew 2 lets it.
    # "b" is weighed as the first the pod may be sent to, and the pod is
    # booked there: kube-scheduler's own spread passes over "a".
    admitted = pod(annotations={EXPECTED_BANDWIDTH: "1k"})
    admitted["spec"]["topologySpreadConstraints"] = [_constraint(HOSTNAME_KEY, 2)]
    board = FixedBoard(HOT_BESIDE_TWO_QUIET, link_speed=LINK)
    preferences = _third_of_a_burst(board, admitted)
    assert preferences[0] == ("a", 0)
    assert [(node, weight) for node, weight in preferences if weight] == [("b", 100)]
    with board.inflight.admission(board.snapshot) as admission:
        assert admission.in_flight(pod_workload(admitted)) == {"a": 2, "b": 1}


def test_the_default_hostname_spread_yields_to_a_hot_link_avoided():
    # The same under the cluster's default (hostnameMaxSkew 2), a soft score
    # to kube-scheduler: "b" keeps the spread as well, so it holds.
    admitted = pod(annotations={EXPECTED_BANDWIDTH: "1k"})
    board = FixedBoard(HOT_BESIDE_TWO_QUIET, link_speed=LINK, steering={"hostnameMaxSkew": 2})
    preferences = _third_of_a_burst(board, admitted)
    assert preferences[0] == ("a", 0)
    assert [node for node, weight in preferences if weight] == ["b"]
    # Without "b", the spread would send the pod onto a hot link: the hot
    # links avoided outweigh it, and "a" keeps its term.
    one_quiet = {name: load for name, load in HOT_BESIDE_TWO_QUIET.items() if name != "b"}
    board = FixedBoard(one_quiet, link_speed=LINK, steering={"hostnameMaxSkew": 2})
    preferences = _third_of_a_burst(board, admitted)
    assert preferences[0][0] == "a" and preferences[0][1] > 0


def test_in_a_calm_cluster_the_default_hostname_spread_holds():
    # Nothing hot: "a" saves no point, so the default spread holds there for
    # a pod steered in full (its size unknown: booked at the default).
    calm = {name: 2 * share * LINK for name, share in {"a": 0.02, "b": 0.03, "c": 0.04}.items()}
    board = FixedBoard(calm, link_speed=LINK, steering={"hostnameMaxSkew": 1})
    admitted = pod()
    first = board.steerer.decide(admitted, {}, dry_run=False).preferences
    assert first[0].node == "a" and first[0].weight > 0
    second = {
        p.node: p.weight for p in board.steerer.decide(admitted, {}, dry_run=False).preferences
    }
    assert second["a"] == 0 and second["b"] > 0


def _running_on(board: FixedBoard, admitted: dict, nodes: list[str]) -> None:
    """A steered pod of ``admitted``'s workload the watch shows running on
    each of ``nodes``, its traffic measured already."""
    workload = pod_workload(admitted)
    assert workload is not None
    for node in nodes:
        board.inflight.place_seen(node, workload, pod_template(admitted))


def _terms(board: FixedBoard, admitted: dict) -> dict[str, int]:
    decision = board.steerer.decide(admitted, {}, dry_run=True)
    return {p.node: p.weight for p in decision.preferences}


def test_full_nodes_yield_where_kube_scheduler_s_own_spread_would_pick_busy_links():
    # The workload holds a pod on each quiet node and none on the two busy
    # ones (a pod costs 3 points there), the default hostname skew 1: every
    # quiet node is full. The field costs the pod under a point on average,
    # but kube-scheduler's own spread sends it to the nodes with fewest of
    # the workload, the busy ones: the quiet nodes keep their terms.
    quiet = [f"q{i}" for i in range(1, 6)]
    loads = {name: 2 * (0.02 + i / 1000) * LINK for i, name in enumerate(quiet)}
    loads |= {"b1": 2 * 0.515 * LINK, "b2": 2 * 0.515 * LINK}
    board = FixedBoard(loads, link_speed=LINK, steering={"hostnameMaxSkew": 1})
    admitted = pod(annotations={EXPECTED_BANDWIDTH: "1Mi"})
    _running_on(board, admitted, quiet)
    weighed = {node for node, weight in _terms(board, admitted).items() if weight}
    assert weighed and weighed <= set(quiet)


def test_a_full_node_gets_no_term_where_kube_scheduler_s_own_spread_would_pick_a_quiet_one():
    # Hot links in the field, but they hold a pod of the workload already, as
    # does "a": kube-scheduler's own spread sends the pod to "b", as quiet
    # as "a". The default spread holds: "a" gets no term, "b" does.
    loads = {"a": 2 * 0.02 * LINK, "b": 2 * 0.03 * LINK, "h1": 1.9 * LINK, "h2": 1.9 * LINK}
    board = FixedBoard(loads, link_speed=LINK, steering={"hostnameMaxSkew": 1})
    admitted = pod(annotations={EXPECTED_BANDWIDTH: "1Mi"})
    _running_on(board, admitted, ["a", "h1", "h2"])
    decision = board.steerer.decide(admitted, {}, dry_run=True)
    assert [(p.node, bool(p.weight)) for p in decision.preferences][:2] == [
        ("a", False),
        ("b", True),
    ]


# Zone a is the quietest, one node hot in each zone: every pod has
# something to gain, so its terms are sent.
LOADS = {
    "a1": 0.02,
    "a2": 0.03,
    "a3": 0.95,
    "b1": 0.10,
    "b2": 0.11,
    "b3": 0.95,
    "c1": 0.12,
    "c2": 0.13,
    "c3": 0.95,
}


def _board(replica: str | None = None, **steering: object) -> FixedBoard:
    zones = {name: {"labels": {ZONE_LABEL: f"zone-{name[0]}"}} for name in LOADS}
    loads = {name: 2 * share * LINK for name, share in LOADS.items()}
    return FixedBoard(loads, link_speed=LINK, steering=steering, replica=replica, **zones)


def _first_terms(board: FixedBoard, admitted: dict, pods: int, bound: bool = False) -> list[str]:
    """Each pod's first preference; ``bound``: a binding watch shows the pod
    bound there."""
    firsts = []
    for _ in range(pods):
        decision = board.steerer.decide(admitted, {}, dry_run=False)
        patched = jsonpatch.apply_patch(admitted, decision.patch or [])
        terms = patched["spec"]["affinity"]["nodeAffinity"][PREFERRED]
        best = max(
            (t for t in terms if "matchFields" in t["preference"]), key=lambda t: t["weight"]
        )
        firsts.append(best["preference"]["matchFields"][0]["values"][0])
        if bound:
            board.inflight.shown(decision.booking_key, MEASURED_AT)
            board.inflight.rebook(decision.booking_key, firsts[-1])
    return firsts


def test_a_burst_of_three_keeps_a_pod_in_every_zone():
    admitted = pod(annotations={EXPECTED_BANDWIDTH: "1Mi"})
    firsts = _first_terms(_board(), admitted, 3)
    assert sorted(f[0] for f in firsts) == ["a", "b", "c"]
    # Unkept (0), all three would prefer zone a's quietest nodes.
    unkept = _first_terms(_board(zoneMaxSkew=0, hostnameMaxSkew=0), admitted, 3)
    assert {f[0] for f in unkept} == {"a"}


@pytest.mark.parametrize(
    ("replica", "bound", "third"), [("r1", True, "c1"), ("r1", False, "a1"), (None, False, "a1")]
)
def test_a_workload_s_pods_count_in_its_spread_after_their_measurement(replica, bound, third):
    # Zones kept even (zoneMaxSkew 1): two pods go to zones a and b. Once a
    # measurement shows them (their bookings forgotten), they still count
    # where a binding watch showed them bound and will say when they go (a
    # replica id): the next pod goes to zone c, the only one without.
    # Not shown bound (never created, or Pending), or without a watch,
    # their places go with their bookings: zone a, the quietest, again.
    board = _board(replica, zoneMaxSkew=1)
    admitted = pod(annotations={EXPECTED_BANDWIDTH: "1Mi"})
    assert _first_terms(board, admitted, 2, bound) == ["a1", "b1"]
    assert board.measure_at(MEASURED_AT + 3600) is not None
    with board.inflight.admission(board.snapshot) as admission:
        assert admission.in_flight(pod_workload(admitted)) == {}
    assert _first_terms(board, admitted, 1) == [third]


def _rolled_out(template: str) -> dict:
    """A pod of the Deployment web's ReplicaSet for ``template``."""
    return pod(
        generate_name=f"web-{template}-",
        labels={"app": "web", "pod-template-hash": template},
        annotations={EXPECTED_BANDWIDTH: "1Mi"},
    )


def test_a_rollout_s_new_pods_keep_every_zone_while_the_old_ones_are_booked():
    # The defaults count the ReplicaSet alone (kube-scheduler's default
    # selector is the ReplicaSet's): the new template's three pods fill the
    # three zones, though the old template's three are still in flight.
    board = _board()
    assert sorted(f[0] for f in _first_terms(board, _rolled_out("1111"), 3)) == ["a", "b", "c"]
    assert sorted(f[0] for f in _first_terms(board, _rolled_out("2222"), 3)) == ["a", "b", "c"]
    # A constraint of the pod's own on the workload's pods counts both
    # templates: 1/1/1 before the new ones, so skew 5 lets zone a take them all.
    own = _board(zoneMaxSkew=0, hostnameMaxSkew=0)
    for template in ("1111", "2222"):
        admitted = _rolled_out(template)
        admitted["spec"]["topologySpreadConstraints"] = [_constraint(ZONE_KEY, 5)]
        firsts = _first_terms(own, admitted, 3)
    assert {f[0] for f in firsts} == {"a"}


def test_a_pod_s_own_zone_constraint_is_kept_and_unknown_keys_are_counted():
    admitted = pod(annotations={EXPECTED_BANDWIDTH: "1Mi"})
    admitted["spec"]["topologySpreadConstraints"] = [
        _constraint(ZONE_KEY, 2),
        _constraint("example.com/rack", 1),
    ]
    board = _board(zoneMaxSkew=0, hostnameMaxSkew=0)
    firsts = _first_terms(board, admitted, 3)
    assert sorted(f[0] for f in firsts) == ["a", "b", "c"]
    assert board.steerer.notes["spread-unknown-key"] == 3


def test_the_pod_being_placed_keeps_a_pod_s_room_in_the_zone_skew():
    # Its own zone constraint, maxSkew 2, and every pod shown bound where it
    # was booked: the preferences keep the zones within a skew of 1, so the
    # pod still keeps 2 if kube-scheduler puts it in a fuller zone than its
    # first preference (its terms weigh against its other plugins).
    admitted = pod(annotations={EXPECTED_BANDWIDTH: "1Mi"})
    admitted["spec"]["topologySpreadConstraints"] = [_constraint(ZONE_KEY, 2)]
    board = _board("r1", zoneMaxSkew=0, hostnameMaxSkew=0)
    zones = [first[0] for first in _first_terms(board, admitted, 6, bound=True)]
    assert zones[:4] == ["a", "b", "c", "a"] or zones[:4] == ["a", "c", "b", "a"]
    for placed in range(1, len(zones) + 1):
        counts = [zones[:placed].count(zone) for zone in "abc"]
        assert max(counts) - min(counts) <= 1, zones


def test_a_spread_that_leaves_no_node_the_pod_fits_is_relaxed():
    # Kept to zone a by its nodeSelector; after one pod there, zone a is
    # barred (b and c hold none), so the choice is made without the spread.
    admitted = pod(annotations={EXPECTED_BANDWIDTH: "1Mi"})
    admitted["spec"]["nodeSelector"] = {ZONE_LABEL: "zone-a"}
    board = _board()
    assert [f[0] for f in _first_terms(board, admitted, 2)] == ["a", "a"]
    assert board.steerer.notes["spread-relaxed"] == 1


def test_bindings_outside_the_zone_booked_widen_the_room_kept_for_unbound_pods():
    placed = PlacedPods()
    placed.set_zones({"a1": "a", "a2": "a", "b1": "b"})
    web = Workload("default", "Deployment", "web")
    template = Workload("default", "ReplicaSet", "web-1111")
    for key in (1, 2, 3, 4):
        placed.place(key, web, template, "a1", bound=False)
    # No binding shown yet: one pod's room while any is unbound.
    assert placed.skew_room(web) == placed.skew_room(template) == 1
    placed.move(1, "a2")  # bound in the zone booked
    placed.move(2, "b1")  # bound in another one
    assert placed.off_zone_share == 0.5
    # Two unbound, each outside its zone half the time, each adding two.
    assert placed.skew_room(web) == 2
    placed.move(3, "a1")
    placed.move(4, "a1")
    assert placed.off_zone_share == 0.25
    # Every pod shown bound: one pod's room stays, the pod being placed.
    assert placed.unbound == {} and placed.skew_room(web) == 1
    # The pods counted where they were bound.
    assert placed.workloads.per_zone[web] == {"a": 3, "b": 1}
