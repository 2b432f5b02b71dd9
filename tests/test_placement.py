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
from kubectl_nettraffic.kube.nodes import node_from_json
from kubectl_nettraffic.kube.pods import PREFERRED, REQUIRED
from kubectl_nettraffic.labels import parse_selector
from kubectl_nettraffic.learning.workload_bandwidth import LearnedBandwidth
from kubectl_nettraffic.scoring.placement import Preference, choose_nodes
from kubectl_nettraffic.serving import serving_parts
from kubectl_nettraffic.steering.affinity_patch import affinity_patch, patch_text
from kubectl_nettraffic.steering.patch_check import PatchCheckFailed, apply_and_check
from kubectl_nettraffic.steering.pod_bandwidth import expected_bandwidth
from tests.harness.scoreboards import FixedBoard
from tests.harness.scoreboards import fixed_board as _board

EVERYONE = parse_selector("")


def test_weights_are_graded_by_score_and_quartered_by_rank():
    board = _board({"a": 0.0, "b": 5e6, "c": 10e6, "d": 20e6})
    snap = board.snapshot
    prefs = choose_nodes(snap.candidates, snap.tainted, snap.nodes, pod(), EVERYONE, {}, 3)
    # Scores 100, 75, 50: b's weight would be its score, but at most a
    # quarter of a's (25); c's at most a quarter of b's.
    assert [(p.node, p.weight, round(p.score)) for p in prefs] == [
        ("a", 100, 100),
        ("b", 25, 75),
        ("c", 6, 50),
    ]
    # Far apart, the score gap is the lower bound of the two.
    board = _board({"a": 0.0, "b": 16e6, "c": 18e6, "d": 20e6})
    snap = board.snapshot
    prefs = choose_nodes(snap.candidates, snap.tainted, snap.nodes, pod(), EVERYONE, {}, 4)
    assert [p.weight for p in prefs] == [100, 20, 6, 1]
    # Past the fourth, every weight is 1.
    board = _board({f"n{i}": 0.0 for i in range(10)})
    snap = board.snapshot
    prefs = choose_nodes(snap.candidates, snap.tainted, snap.nodes, pod(), EVERYONE, {}, 10)
    assert [p.weight for p in prefs] == [100, 25, 6, 1, 1, 1, 1, 1, 1, 1]


def test_choice_is_independent_of_cluster_size_past_the_top():
    """Early stop: a node whose base score cannot beat the N-th best is never looked at."""
    loads = {f"n{i:04d}": float(i) * 1e3 for i in range(5000)}
    board = _board(loads)
    snap = board.snapshot
    looked = []

    class Watching(dict):
        def get(self, key, default=None):
            looked.append(key)
            return super().get(key, default)

    prefs = choose_nodes(
        snap.candidates, snap.tainted, Watching(snap.nodes), pod(), EVERYONE, {}, 3
    )
    assert [p.node for p in prefs] == ["n0000", "n0001", "n0002"]
    assert len(looked) <= 4


def test_inflight_load_moves_the_choice():
    board = _board({"a": 1e6, "b": 2e6, "c": 8e6})
    snap = board.snapshot
    prefs = choose_nodes(
        snap.candidates, snap.tainted, snap.nodes, pod(), EVERYONE, {"a": (2e6, 2)}, 2
    )
    assert [p.node for p in prefs] == ["b", "a"]


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
    """Also with a handicap: other replicas' nodes counting part of a pod
    more, read by a walk (handicapped_top) and off the heap split in groups
    by the share (top_grouped)."""
    from kubectl_nettraffic.inflight.candidates import CandidateHeap, HeapLayout
    from kubectl_nettraffic.inflight.replica_share import NodeBlocks, ReplicaShare
    from kubectl_nettraffic.scoring.placement import handicapped_top

    names = [f"n{i:02d}" for i in range(len(loads))]
    owner = None if share is None else ReplicaShare(share[0], NodeBlocks(names, share[1]))
    handicap = None if owner is None else owner.handicap(bandwidth)
    board = _board(dict(zip(names, loads, strict=True)))
    snap = board.snapshot
    inflight: dict[str, tuple[float, int]] = {}
    live = CandidateHeap(HeapLayout(snap.candidates), inflight)
    penalties = sorted({s.penalty_per_byte for s in snap.candidates})
    grouped = CandidateHeap(
        HeapLayout(
            snap.candidates,
            group_of=None if owner is None else (
                lambda s: 0 if owner.owns(s.name) else 1 + penalties.index(s.penalty_per_byte)
            ),
        ),
        inflight,
    )  # fmt: skip
    handicaps = [0.0] + [p * bandwidth for p in penalties] if owner else [0.0]
    for index, booked in bookings:
        name = f"n{index % len(loads):02d}"
        extra, pods = inflight.get(name, (0.0, 0))
        inflight[name] = (extra + booked, pods + 1)
        live.update(name)
        grouped.update(name)
        scanned = choose_nodes(
            snap.candidates, snap.tainted, snap.nodes, pod(), EVERYONE, inflight, count,
            None, handicap,
        )  # fmt: skip
        walked = choose_nodes(
            snap.candidates, snap.tainted, snap.nodes, pod(), EVERYONE, inflight, count,
            lambda c: live.top(c) if handicap is None else handicapped_top(live, c, handicap),
            handicap,
        )  # fmt: skip
        from_groups = choose_nodes(
            snap.candidates, snap.tainted, snap.nodes, pod(), EVERYONE, inflight, count,
            lambda c: grouped.top_grouped(c, handicaps), handicap,
        )  # fmt: skip
        assert [p.node for p in walked] == [p.node for p in scanned]
        assert [p.node for p in from_groups] == [p.node for p in scanned]


def test_a_handicap_reaching_past_the_best_nodes_chooses_among_them():
    """handicapped_top reads at most MOST_READ nodes: with every one of the
    best 128 handicapped, the 300th (the only one spared) is not reached."""
    from kubectl_nettraffic.inflight.candidates import CandidateHeap, HeapLayout
    from kubectl_nettraffic.scoring.placement import MOST_READ, handicapped_top

    board = _board({f"n{i:03d}": i * 1e3 for i in range(300)})
    live = CandidateHeap(HeapLayout(board.snapshot.candidates), {})

    def spared(name):
        return lambda score: 0.0 if score.name == name else 1000.0

    assert MOST_READ == 128
    # Within reach, exact: n127 is the 128th best by live score.
    assert [e[2].name for e in handicapped_top(live, 1, spared("n127"))] == ["n127"]
    assert [e[2].name for e in handicapped_top(live, 2, spared("n299"))] == ["n000", "n001"]


def test_the_heap_stays_right_after_many_bookings_of_nodes_below_its_root():
    """Bookings of nodes that are not the best leave superseded entries
    behind; read or not, the heap drops them in time (it never holds more
    than twice its nodes) and its top is the live order throughout."""
    from kubectl_nettraffic.inflight.candidates import CandidateHeap, HeapLayout

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


def test_the_grouped_heap_is_exact_past_the_walk_s_read_limit():
    """The other replica's nodes are the best 150 by score, each a whole
    pod's handicap down: the walk stops at MOST_READ nodes and chooses among
    them; the heap split by the share reads each group's top and chooses
    what the scan does, this replica's best three."""
    from kubectl_nettraffic.inflight.candidates import CandidateHeap, HeapLayout
    from kubectl_nettraffic.inflight.replica_share import NodeBlocks, ReplicaShare
    from kubectl_nettraffic.scoring.placement import MOST_READ, handicapped_top

    names = [f"n{i:03d}" for i in range(400)]
    share = ReplicaShare(0, NodeBlocks(names, 2))
    theirs = [n for n in names if not share.owns(n)][:150]
    mine = [n for n in names if share.owns(n)][:100]
    loads = {name: i * 1e3 for i, name in enumerate(theirs + mine)}
    snap = _board(loads).snapshot
    assert len(theirs) > MOST_READ
    bandwidth = 1e9  # each of the other replica's nodes 100+ points down
    handicap = share.handicap(bandwidth)
    penalties = sorted({s.penalty_per_byte for s in snap.candidates})
    grouped = CandidateHeap(
        HeapLayout(
            snap.candidates,
            group_of=lambda s: 0 if share.owns(s.name) else 1 + penalties.index(s.penalty_per_byte),
        ),
        {},
    )
    handicaps = [0.0, *(p * bandwidth for p in penalties)]
    scanned = choose_nodes(
        snap.candidates, snap.tainted, snap.nodes, pod(), EVERYONE, {}, 3, None, handicap
    )
    from_groups = choose_nodes(
        snap.candidates, snap.tainted, snap.nodes, pod(), EVERYONE, {}, 3,
        lambda c: grouped.top_grouped(c, handicaps), handicap,
    )  # fmt: skip
    walked = handicapped_top(CandidateHeap(HeapLayout(snap.candidates), {}), 3, handicap)
    assert [p.node for p in scanned] == mine[:3]
    assert [p.node for p in from_groups] == mine[:3]
    assert [e[2].name for e in walked] == theirs[:3]  # all it read were theirs
