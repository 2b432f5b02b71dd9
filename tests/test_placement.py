"""Pure placement rules: table tests and a hypothesis property test."""

from hypothesis import example, given, settings
from hypothesis import strategies as st

from harness.reviews import pod
from kubectl_nettraffic.labels import parse_selector
from tests.harness.choices import choose, heap_choice, heaps_over, scanned
from tests.harness.scoreboards import FixedBoard
from tests.harness.scoreboards import fixed_board as _board

EVERYONE = parse_selector("")


def test_weights_are_graded_by_score_and_quartered_by_rank():
    board = _board({"a": 0.0, "b": 5e6, "c": 10e6, "d": 20e6})
    snap = board.snapshot
    prefs = choose(snap, 3)
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
    prefs = choose(snap, 4)
    assert [p.weight for p in prefs] == [100, 20, 6, 1]
    # Past the fourth, every weight is 1.
    board = _board({f"n{i}": 0.0 for i in range(10)})
    snap = board.snapshot
    prefs = choose(snap, 10)
    assert [p.weight for p in prefs] == [100, 25, 6, 1, 1, 1, 1, 1, 1, 1]


def test_choice_is_independent_of_cluster_size_past_the_top():
    """Early stop: a node whose live score cannot beat the N-th best is never read."""
    from kubectl_nettraffic.inflight.node_points import NodePoints

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
    assert [p.node for p in choose(snap, 2, unseen={"a": (2e6, 2)})] == ["b", "a"]


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
    from kubectl_nettraffic.inflight.replica_share import NodeBlocks, ReplicaShare

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


def test_the_grouped_heap_is_exact_past_the_other_replicas_best_150():
    """The other replica's nodes are the best 150 by score, each a whole
    pod's handicap down: the choice reads each group's best and chooses
    what the scan does, this replica's best three."""
    from kubectl_nettraffic.inflight.replica_share import NodeBlocks, ReplicaShare

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
