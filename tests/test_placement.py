"""Pure placement rules: table tests and a hypothesis property test."""

import copy
import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harness.fakeapi import node
from harness.reviews import pod
from kubectl_nettraffic.kube.node_affinity import pod_fits
from kubectl_nettraffic.kube.nodes import ZONE_LABEL, node_from_json
from kubectl_nettraffic.kube.pods import PREFERRED, REQUIRED
from kubectl_nettraffic.labels import parse_selector
from kubectl_nettraffic.learning.workload_bandwidth import LearnedBandwidth
from kubectl_nettraffic.scoring.placement import Preference
from kubectl_nettraffic.serving import serving_parts
from kubectl_nettraffic.steering.affinity_patch import affinity_patch, metadata_ops, patch_text
from kubectl_nettraffic.steering.patch_check import PatchCheckFailed, apply_and_check
from kubectl_nettraffic.steering.pod_bandwidth import expected_bandwidth
from tests.harness.choices import choose, heap_choice, heaps_over, scanned
from tests.harness.scoreboards import FixedBoard
from tests.harness.scoreboards import fixed_board as _board

EVERYONE = parse_selector("")


LINK = 1e9  # bytes/s; FixedTraffic sends half of a node's load each way


def _at(utilization: float) -> float:
    """The load that fills a LINK's busier direction to ``utilization``."""
    return 2 * utilization * LINK


def _terms(admitted, decision) -> list[tuple[str, int]]:
    patched = jsonpatch.apply_patch(admitted, decision.patch or [])
    affinity = (patched["spec"].get("affinity") or {}).get("nodeAffinity") or {}
    return [
        (term["preference"]["matchFields"][0]["values"][0], term["weight"])
        for term in affinity.get(PREFERRED) or []
        if "matchFields" in term["preference"]
    ]


def _light_pod() -> dict:
    return pod(annotations={"nettraffic.io/expected-bandwidth": "1k"})


def test_in_a_calm_cluster_no_node_saves_a_point_and_the_pod_gets_no_term():
    # Every link 3-15% busy: below steering.busyAbove (half), nodes are alike.
    loads = {f"n{i}": _at(0.03 + 0.12 * i / 9) for i in range(10)}
    board = FixedBoard(loads, link_speed=LINK)
    admitted = _light_pod()
    decision = board.steerer.decide(admitted, {}, dry_run=False)
    assert [p.weight for p in decision.preferences] == [0, 0, 0]
    assert _terms(admitted, decision) == []  # neither node nor tier terms
    assert "tier" not in (decision.patch_json() or "")
    # Still booked, on the quietest node, for the binding watch to move.
    assert decision.booking_key and decision.preferences[0].node == "n0"
    assert board.steerer.notes["no-gain"] == 1


def test_a_node_weighs_its_rank_and_no_more_than_it_saves():
    # a 10%, b 60%, c and d 95%: costs 0, 20, 90, 90 points (busy above
    # 50%), the field's mean 50; a saves 50, b 30, c costs 40 more: no term.
    # Both a and b save a full 10 points or more: weighed by rank alone (the
    # best 100, the next at most a quarter of it).
    loads = {"a": _at(0.10), "b": _at(0.60), "c": _at(0.95), "d": _at(0.95)}
    board = FixedBoard(loads, link_speed=LINK)
    admitted = _light_pod()
    decision = board.steerer.decide(admitted, {}, dry_run=False)
    assert [(p.node, p.weight) for p in decision.preferences] == [("a", 100), ("b", 25), ("c", 0)]
    assert _terms(admitted, decision) == [("a", 100), ("b", 25)]


def test_quiet_nodes_beside_hot_ones_are_preferred_in_full():
    # Three of ten nodes 90% full: the field costs 0.3 x 80 = 24 points,
    # which every quiet node saves.
    loads = {f"n{i}": _at(0.9 if i < 3 else 0.05 + 0.01 * i) for i in range(10)}
    decision = FixedBoard(loads, link_speed=LINK).steerer.decide(_light_pod(), {}, dry_run=False)
    assert [p.weight for p in decision.preferences] == [100, 25, 6]


def test_a_small_saving_steers_in_proportion():
    # One node of ten 60% full: the field costs 20 / 10 = 2 points, a fifth
    # of a full saving: the weights by rank, a fifth of them.
    loads = {f"n{i}": _at(0.6 if i == 9 else 0.05 + 0.001 * i) for i in range(10)}
    decision = FixedBoard(loads, link_speed=LINK).steerer.decide(_light_pod(), {}, dry_run=False)
    assert [p.weight for p in decision.preferences] == [20, 5, 1]


def test_a_pod_of_unknown_size_is_steered_in_full_with_its_zones_kept_even():
    # The calm cluster above, in three zones, the quietest four in zone a.
    loads = {f"n{i}": _at(0.03 + 0.12 * i / 9) for i in range(10)}
    zones = {f"n{i}": {"labels": {ZONE_LABEL: "a" if i < 4 else "bc"[i % 2]}} for i in range(10)}
    board = FixedBoard(loads, link_speed=LINK, **zones)
    # Nothing learned, no annotation: booked at the default, its size
    # unknown: in full, whatever the saving ...
    first = board.steerer.decide(pod(), {}, dry_run=False)
    assert [p.weight for p in first.preferences] == [100, 25, 6]
    assert first.preferences[0].node == "n0"
    # ... and the zones of its workload kept even: the next two go to the
    # zones without one yet, not to the quieter nodes of zone a.
    second = board.steerer.decide(pod(), {}, dry_run=False)
    third = board.steerer.decide(pod(), {}, dry_run=False)
    firsts = {zones[d.preferences[0].node]["labels"][ZONE_LABEL] for d in (first, second, third)}
    assert firsts == {"a", "b", "c"}
    # A pod of known light size gets no term there.
    light = FixedBoard(loads, link_speed=LINK).steerer.decide(_light_pod(), {}, dry_run=False)
    assert [p.weight for p in light.preferences] == [0, 0, 0]


def _zones_of_firsts(board: FixedBoard, zones: dict, pods: int) -> dict[str, int]:
    """The zones of ``pods`` unknown-size pods' first preferences, counted."""
    counts: dict[str, int] = {}
    for _ in range(pods):
        first = board.steerer.decide(pod(), {}, dry_run=False).preferences[0].node
        zone = zones[first]["labels"][ZONE_LABEL]
        counts[zone] = counts.get(zone, 0) + 1
    return counts


def test_under_load_a_pod_of_unknown_size_keeps_only_its_spread_s_skew():
    # Three zones, the quietest four nodes in zone a. Calm: six pods of
    # unknown size go two to a zone (kept even, as kube-scheduler alone
    # keeps them). With three nodes of zone b and c 90% full (the field
    # costs the pod points): zone a takes more, within the default skew 5.
    zones = {f"n{i}": {"labels": {ZONE_LABEL: "a" if i < 4 else "bc"[i % 2]}} for i in range(10)}
    calm = {f"n{i}": _at(0.03 + 0.12 * i / 9) for i in range(10)}
    even = _zones_of_firsts(FixedBoard(calm, link_speed=LINK, **zones), zones, 6)
    assert even == {"a": 2, "b": 2, "c": 2}
    loaded = {**calm, "n7": _at(0.9), "n8": _at(0.9), "n9": _at(0.9)}
    steered = _zones_of_firsts(FixedBoard(loaded, link_speed=LINK, **zones), zones, 6)
    assert steered["a"] > 2 and set(steered) == {"a", "b", "c"}


def test_a_burst_is_steered_in_full_only_where_stacked_it_would_cost_a_point():
    # Pods of 3% of a link; stacked, a burst of them fills 6%, 9%, ...
    heavy = {"nettraffic.io/expected-bandwidth": f"{0.03 * LINK:.0f}"}
    # Every link 3-15% busy: a burst of two (6%, past HEAVY_BURST) stacked
    # on any node leaves it under half full; nothing to save, no term.
    calm = FixedBoard({f"n{i}": _at(0.03 + 0.12 * i / 9) for i in range(10)}, link_speed=LINK)
    for _ in range(2):
        decision = calm.steerer.decide(pod(annotations=heavy), {}, dry_run=False)
        assert [p.weight for p in decision.preferences] == [0, 0, 0]
    # Links 35-45% busy: the pod alone and a burst of two cost the mean
    # candidate under a point more; a burst of three stacked (9%) costs it
    # 1.9 points more, so the third is steered in full: the bookings spread
    # the burst that kube-scheduler alone would stack, before it is measured.
    busy = FixedBoard({f"n{i}": _at(0.35 + 0.10 * i / 9) for i in range(10)}, link_speed=LINK)
    decisions = [busy.steerer.decide(pod(annotations=heavy), {}, dry_run=False) for _ in range(3)]
    weights = [[p.weight for p in decision.preferences] for decision in decisions]
    assert weights == [[0, 0, 0], [0, 0, 0], [100, 25, 6]]


def test_choice_is_independent_of_cluster_size_past_the_top():
    """Early stop: a node whose live score cannot beat the N-th best is never read."""
    from kubectl_nettraffic.ranking.node_points import NodePoints

    loads = {f"n{i:04d}": float(i) * 1e3 for i in range(5000)}
    heaps = heaps_over(_board(loads).snapshot)
    read = []

    class Reading(NodePoints):
        __slots__ = ()

        def of(self, score, group):
            read.append(score.name)
            return super().of(score, group)

    # A pod whose points are reckoned node by node (its workload's pods in
    # flight on a node it never reaches), so each node read is seen.
    points = Reading(heaps.groups, heaps.least_penalty, 0.0, 0.0, unlearned={"n4999": 1})
    assert [entry[2].name for entry in heaps.shared.best(3, points)] == ["n0000", "n0001", "n0002"]
    assert len(read) <= 4


def test_inflight_load_moves_the_choice():
    snap = _board({"a": 1e6, "b": 2e6, "c": 8e6}).snapshot
    assert [node for node, _ in choose(snap, 2, unseen={"a": (2e6, 2)})] == ["b", "a"]


@pytest.mark.parametrize(
    ("spec", "fits"),
    [
        ({"nodeSelector": {"zone": "a"}}, {"x"}),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "zone", "operator": "NotIn", "values": ["a"]}
                                    ]
                                }
                            ]
                        }
                    }
                }
            },
            {"y", "z"},
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "gen", "operator": "Gt", "values": ["3"]}
                                    ]
                                },
                                {
                                    "matchFields": [
                                        {"key": "metadata.name", "operator": "In", "values": ["x"]}
                                    ]
                                },
                            ]
                        }
                    }
                }
            },
            {"x", "z"},
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{}]
                        }
                    }
                }
            },
            set(),
        ),  # an empty term matches nothing, as in Kubernetes
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}
                            ]
                        }
                    }
                }
            },
            {"x", "y"},
        ),
    ],
)
def test_pod_constraints(spec, fits):
    nodes = [
        node_from_json(node("x", labels={"zone": "a", "gen": "2"})),
        node_from_json(node("y", labels={"zone": "b", "gen": "3"})),
        node_from_json(node("z", labels={"zone": "b", "gen": "5", "gpu": "yes"})),
    ]
    predicate = pod_fits(pod(spec=spec))
    assert {n.name for n in nodes if predicate(n)} == fits


def test_bandwidth_annotation():
    annotated = pod(annotations={"nettraffic.io/expected-bandwidth": "10Mi"})
    assert expected_bandwidth(annotated, None, 1.0) == (10 * 2**20, "annotation", None)
    unusable = pod(annotations={"nettraffic.io/expected-bandwidth": "10 MB"})
    value, source, warning = expected_bandwidth(unusable, None, 7.0)
    assert (value, source) == (7.0, "default")
    assert "'10 MB' is not a bandwidth" in warning and "10Mi" in warning
    assert "booked at the default, 7" in warning
    # With a learned figure to fall back on, the warning names it, not the default.
    learned = LearnedBandwidth({}, 3e6, 0.0)
    value, source, warning = expected_bandwidth(unusable, learned, 7.0)
    assert (value, source) == (3e6, "cluster")
    assert "booked at the cluster-wide learned figure, 3e+06" in warning


def test_patch_check_rejects_a_patch_that_would_change_other_fields():
    original = pod()
    bad = [{"op": "replace", "path": "/spec/restartPolicy", "value": "Never"}]
    with pytest.raises(
        PatchCheckFailed, match="replace /spec/restartPolicy reaches outside spec.affinity"
    ):
        apply_and_check(original, bad)
    bad_weight = affinity_patch(original, [Preference("a", 0, 1.0)], {})
    with pytest.raises(PatchCheckFailed, match="outside 1..100"):
        apply_and_check(original, bad_weight)


@pytest.mark.parametrize("part", ["metadata", "spec"])
@pytest.mark.parametrize("value", [..., None, False, ["x"]])
def test_patch_check_runs_on_the_pods_own_parts(part, value):
    """A patch that adds under a part the pod lacks (or that is not an
    object) would fail at the API server: the check fails it first."""
    original = pod()
    if value is ...:
        del original[part]
    else:
        original[part] = value
    patch = affinity_patch(pod(), [Preference("a", 100, 1.0)], {"nettraffic.io/x": "y"})
    with pytest.raises(PatchCheckFailed, match=f"the pod has no {part} object"):
        apply_and_check(original, patch)
    with pytest.raises((jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError)):
        jsonpatch.apply_patch(original, patch)  # as the API server would find


@pytest.mark.parametrize("part", ["metadata", "spec"])
def test_pods_without_metadata_or_spec_objects_are_not_touched(part):
    board = _board({"a": 1e6})
    broken = pod()
    broken[part] = None
    decision = board.steerer.decide(broken, None, False)
    assert decision.patch is None and decision.skip == "malformed-pod"


_wrong_json = st.one_of(
    st.text(max_size=4),
    st.integers(-3, 3),
    st.booleans(),
    st.lists(st.text(max_size=3), min_size=1, max_size=2),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), min_size=1, max_size=2),
)
# Places in a pod that steering reads, and the JSON type each must have there.
_TYPED_PARTS = [
    (("metadata", "annotations"), dict),
    (("metadata", "labels"), dict),
    (("metadata", "ownerReferences"), list),
    (("metadata", "ownerReferences", 0), dict),
    (("spec", "nodeSelector"), dict),
    (("spec", "tolerations"), list),
    (("spec", "tolerations", 0), dict),
    (("spec", "affinity"), dict),
    (("spec", "affinity", "nodeAffinity"), dict),
    (("spec", "affinity", "nodeAffinity", REQUIRED), dict),
    (("spec", "affinity", "nodeAffinity", REQUIRED, "nodeSelectorTerms"), list),
    (("spec", "affinity", "nodeAffinity", REQUIRED, "nodeSelectorTerms", 0), dict),
    (
        ("spec", "affinity", "nodeAffinity", REQUIRED, "nodeSelectorTerms", 0, "matchExpressions"),
        list,
    ),
    (("spec", "affinity", "nodeAffinity", PREFERRED), list),
    (("spec", "affinity", "nodeAffinity", PREFERRED, 0), dict),
    (("spec", "affinity", "nodeAffinity", PREFERRED, 0, "preference"), dict),
]


def _well_typed_pod() -> dict[str, Any]:
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    return pod(
        spec={
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "affinity": {
                "nodeAffinity": {
                    REQUIRED: {"nodeSelectorTerms": [term]},
                    PREFERRED: [{"weight": 5, "preference": term}],
                }
            },
        },
    )


@settings(max_examples=300, deadline=None)
@given(part=st.sampled_from(_TYPED_PARTS), value=_wrong_json)
def test_a_pod_with_a_wrong_typed_part_is_skipped_as_malformed(part, value):
    path, wanted = part
    if isinstance(value, wanted):
        value = 7  # a number is the wrong type for every part listed
    broken = _well_typed_pod()
    parent: Any = broken
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    board = _board({"a": 1e6, "b": 2e6})
    decision = board.steerer.decide(broken, None, False)
    assert decision.skip == "malformed-pod" and decision.patch is None
    where = "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in path)[1:]
    assert f"nettraffic: {where} is " in decision.warnings[0], decision.warnings


def test_the_well_typed_pod_of_the_malformed_test_is_steered():
    board = _board({"a": 1e6, "b": 2e6})
    decision = board.steerer.decide(_well_typed_pod(), None, False)
    # No node has the zone its required affinity asks for: a soft skip, after every rule ran.
    assert decision.skip == "no-candidate", decision


def test_patch_check_rejects_an_op_writing_inside_an_earlier_value():
    # Applied, the second op would change the first op's value in the patch we send.
    original = pod()
    nested = [
        {"op": "add", "path": "/metadata/annotations", "value": {}},
        {"op": "add", "path": "/metadata/annotations/a", "value": "b"},
    ]
    with pytest.raises(PatchCheckFailed, match="inside the value added at /metadata/annotations"):
        apply_and_check(original, nested)
    assert nested[0]["value"] == {}


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(st.text(alphabet="ab~/01", max_size=5), min_size=1, max_size=4, unique=True),
    field=st.sampled_from(["annotations", "labels"]),
)
def test_patch_check_adds_map_members_as_jsonpatch_does(keys, field):
    """Members added to a map the pod has are set without jsonpatch's walk,
    to the same result, keys with escaped "/" and "~" included."""
    original = pod(annotations={"a~/": "old", "b": "kept"}, labels={"ab": "old"})
    patch = metadata_ops(original, field, {key: f"v{i}" for i, key in enumerate(keys)})
    checked = apply_and_check(original, patch)
    stock = jsonpatch.apply_patch(copy.deepcopy(original), patch)
    assert checked["metadata"][field] == stock["metadata"][field]
    assert original["metadata"]["annotations"] == {"a~/": "old", "b": "kept"}  # a copy was patched


@pytest.mark.parametrize("path", ["/metadata/annotations/a~2", "/metadata/labels/~"])
def test_patch_check_fails_a_stray_tilde_as_jsonpatch_does(path):
    original = pod(annotations={"a": "b"})  # both maps there
    patch = [{"op": "add", "path": path, "value": "b"}]
    with pytest.raises(PatchCheckFailed, match="does not apply: .*escape"):
        apply_and_check(original, patch)
    with pytest.raises(jsonpatch.JsonPointerException):
        jsonpatch.apply_patch(original, patch)


def test_stale_and_missing_snapshots_skip_with_a_warning():
    now = [1000.0]
    board = FixedBoard({"a": 1.0}, clock=lambda: now[0])
    assert board.steerer.decide(pod(), None, False).preferences
    now[0] += 121
    decision = board.steerer.decide(pod(), None, False)
    assert decision.skip == "stale-snapshot" and "121s old" in decision.warnings[0]
    unmeasured = serving_parts(board.settings).steerer
    assert unmeasured.decide(pod(), None, False).skip == "no-snapshot"


def test_the_steerer_adopts_each_new_snapshot():
    loads = {"a": 1e6, "b": 5e8}
    board = _board(loads)  # its traffic source reads ``loads`` at every refresh
    assert board.steerer.decide(pod(), None, False).preferences[0].node == "a"
    loads["a"], loads["b"] = 5e8, 1e6
    board.refresh()
    assert board.steerer.decide(pod(), None, False).preferences[0].node == "b"


# ---------------------------------------------------------------- property

_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=5))
_label = st.text(alphabet="abcxyz-./", min_size=1, max_size=8)
_term = st.fixed_dictionaries(
    {
        "weight": st.integers(1, 100),
        "preference": st.fixed_dictionaries(
            {
                "matchExpressions": st.lists(
                    st.fixed_dictionaries(
                        {
                            "key": _label,
                            "operator": st.sampled_from(["In", "NotIn", "Exists"]),
                            "values": st.lists(_label, max_size=2),
                        }
                    ),
                    max_size=2,
                )
            }
        ),
    }
)
_node_affinity = st.one_of(
    st.none(),
    st.just({}),
    st.fixed_dictionaries(
        {},
        optional={
            "preferredDuringSchedulingIgnoredDuringExecution": st.lists(_term, max_size=3),
            "requiredDuringSchedulingIgnoredDuringExecution": st.just(
                {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}
                    ]
                }
            ),
        },
    ),
)
_affinity = st.one_of(
    st.none(),
    st.just({}),
    st.fixed_dictionaries(
        {},
        optional={
            "nodeAffinity": _node_affinity,
            "podAntiAffinity": st.just({"preferredDuringSchedulingIgnoredDuringExecution": []}),
        },
    ),
)
_annotations = st.one_of(st.none(), st.dictionaries(_label, st.text(max_size=5), max_size=3))


def _leaves(value, path=()):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))
    else:
        yield path, value


def _lookup(value, path):
    for part in path:
        value = value[part]
    return value


@settings(max_examples=300, deadline=None)
@given(
    affinity=_affinity,
    annotations=_annotations,
    extra=st.dictionaries(_label, _json_leaf, max_size=3),
    # Names that JSON must escape, too: the patch text is written from templates.
    names=st.lists(
        st.sampled_from(["a", "b", "c", 'q"uote', "back\\slash", "n\u00fcrnberg-1"]),
        min_size=1,
        max_size=3,
        unique=True,
    ),
)
def test_patch_is_idempotent_and_never_removes_a_field(affinity, annotations, extra, names):
    original = pod(spec={"affinity": affinity} if affinity is not None else {})
    if annotations is not None:
        original["metadata"]["annotations"] = annotations
    original["metadata"]["labels"].update({k: str(v) for k, v in extra.items()})
    if affinity is None:
        original["spec"].pop("affinity", None)
    preferences = [Preference(n, 100 - i, 50.0) for i, n in enumerate(names)]
    ours = {"nettraffic.io/preferred-nodes": ",".join(names), "nettraffic.io/source": "prometheus"}

    once = jsonpatch.apply_patch(
        copy.deepcopy(original), affinity_patch(original, preferences, ours)
    )
    twice = jsonpatch.apply_patch(copy.deepcopy(once), affinity_patch(once, preferences, ours))
    assert twice == once
    patch = affinity_patch(original, preferences, ours)
    # What goes on the wire is what the stock encoder writes for these ops, byte for byte.
    assert patch_text(patch) == json.dumps(patch, separators=(",", ":"))
    sent = copy.deepcopy(patch)
    checked = apply_and_check(original, patch)
    assert patch == sent  # the check leaves the patch it returns untouched
    # ... and patches exactly as stock jsonpatch does, on the parts it may touch.
    assert checked["spec"].get("affinity") == once["spec"].get("affinity")
    assert checked["metadata"].get("annotations") == once["metadata"].get("annotations")
    for path, value in _leaves(original):
        if value is None and path[-1] in (
            "affinity",
            "nodeAffinity",
            "annotations",
            "preferredDuringSchedulingIgnoredDuringExecution",
        ):
            continue  # null is Kubernetes' "absent": ours may fill it
        assert _lookup(once, path) == value, path


@settings(max_examples=100, deadline=None)
@given(
    loads=st.lists(st.floats(0, 1e8), min_size=1, max_size=30),
    bookings=st.lists(st.tuples(st.integers(0, 29), st.floats(0, 5e7)), max_size=40),
    count=st.integers(1, 5),
    share=st.one_of(
        st.none(), st.integers(2, 3).flatmap(lambda n: st.tuples(st.integers(0, n - 1), st.just(n)))
    ),
    bandwidth=st.floats(0, 5e7),
)
@example(
    loads=[2.2e-311], bookings=[(0, 0.0)], count=1, share=None, bandwidth=0.0
)  # once an infinite penalty, then NaN
# Four equal best nodes, two of them the other replica's.
@example(loads=[0, 0, 0, 0, 1e3, 1e8], bookings=[(5, 0.0)], count=1, share=(0, 2), bandwidth=5e7)
def test_live_heap_chooses_exactly_what_the_scan_chooses(loads, bookings, count, share, bandwidth):
    """Also with the replica share: other replicas' nodes counting a pod of
    this size more, their group's bound."""
    from kubectl_nettraffic.ranking.replica_share import NodeBlocks, ReplicaShare

    names = [f"n{i:02d}" for i in range(len(loads))]
    owner = None if share is None else ReplicaShare(share[0], NodeBlocks(names, share[1]))
    handicap = None if owner is None else owner.handicap(bandwidth)
    snap = _board(dict(zip(names, loads, strict=True))).snapshot
    inflight: dict[str, tuple[float, int]] = {}
    heaps = heaps_over(snap, inflight, owner)
    for index, booked in bookings:
        name = f"n{index % len(loads):02d}"
        extra, pods = inflight.get(name, (0.0, 0))
        inflight[name] = (extra + booked, pods + 1)
        heaps.update(name)
        full = scanned(
            snap, count, (handicap and (lambda s: -handicap(s))) or (lambda s: 0.0), inflight
        )
        chosen = heap_choice(heaps, count, bandwidth)
        assert [entry[2].name for entry in chosen] == [name for _, name in full]


def test_nothing_is_capped_the_only_node_a_pod_fits_is_found_however_far_down():
    loads = {f"n{i:03d}": i * 1e3 for i in range(300)}
    board = FixedBoard(loads, n299={"labels": {"disk": "ssd"}})
    constrained = pod()
    constrained["spec"]["nodeSelector"] = {"disk": "ssd"}
    decision = board.steerer.decide(constrained, {}, dry_run=True)
    assert [p.node for p in decision.preferences] == ["n299"]


def test_the_heap_stays_right_after_many_bookings_of_nodes_below_its_root():
    """Bookings of nodes that are not the best leave superseded entries
    behind; read or not, the heap drops them in time (it never holds more
    than twice its nodes) and its top is the live order throughout."""
    from kubectl_nettraffic.ranking.candidates import CandidateHeap, HeapLayout

    loads = {f"n{i}": i * 1e5 for i in range(6)}
    snap = _board(loads).snapshot
    unseen: dict[str, tuple[float, int]] = {}
    live = CandidateHeap(HeapLayout(snap.candidates), unseen)
    for step in range(400):
        name = f"n{1 + step % 5}"  # never n0, the best throughout
        extra, pods = unseen.get(name, (0.0, 0))
        unseen[name] = (extra + 1e3, pods + 1)
        live.update(name)
        by_score = {s.name: s.score_with(unseen.get(s.name, (0.0, 0))[0]) for s in snap.candidates}
        expected = sorted(by_score, key=lambda n: -by_score[n])
        if step < 200:  # read after every booking, then not at all
            assert [entry[2].name for entry in live.top(6)] == expected
            assert [entry[0] for entry in live.top(6)] == [by_score[n] for n in expected]
        assert sum(len(heap) for heap in live._heaps) <= 2 * 6
    assert [entry[2].name for entry in live.top(6)] == expected


def test_the_grouped_heap_is_exact_past_the_other_replicas_best_150():
    """The other replica's nodes are the best 150 by score, each a whole
    pod's handicap down: the choice reads each group's best and chooses
    what the scan does, this replica's best three."""
    from kubectl_nettraffic.ranking.replica_share import NodeBlocks, ReplicaShare

    names = [f"n{i:03d}" for i in range(400)]
    share = ReplicaShare(0, NodeBlocks(names, 2))
    theirs = [n for n in names if not share.owns(n)]
    mine = [n for n in names if share.owns(n)]
    order = theirs[:150] + mine + theirs[150:]  # the heaps' blocks are over every node
    loads = {name: i * 1e3 for i, name in enumerate(order)}
    snap = _board(loads).snapshot
    bandwidth = 1e9  # each of the other replica's nodes 100+ points down
    handicap = share.handicap(bandwidth)
    full = scanned(snap, 3, lambda s: -handicap(s))
    chosen = heap_choice(heaps_over(snap, share=share), 3, bandwidth)
    assert [name for _, name in full] == mine[:3]
    assert [entry[2].name for entry in chosen] == mine[:3]
