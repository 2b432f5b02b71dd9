"""Bookings follow the binding: the BindingWatch against the fake API server
over HTTP, moving and dropping bookings in a real Steerer's in-flight state."""

import copy

import jsonpatch
import pytest

from harness.reviews import pod
from kubectl_nettraffic.inflight.bookings import DELAY_WEIGHT, WATCH_DELAY
from kubectl_nettraffic.kube.binding_watch import BindingWatch
from kubectl_nettraffic.kube.client import api_client
from kubectl_nettraffic.kube.nodes import ZONE_LABEL
from kubectl_nettraffic.kube.pods import BANDWIDTH_SOURCE, BOOKING, EXPECTED_BANDWIDTH, STEERED_BY
from tests.conftest import wait_for
from tests.harness.scoreboards import MEASURED_AT, FixedBoard, first_choice, zoned_board

PODS = ("api/v1", "default", "pods")
HEAVY = 100 * 2**20


@pytest.fixture
def board():
    return FixedBoard({"a": 0.0, "b": 1e6, "c": 2e6}, replica="replica1")


@pytest.fixture
def steerer(board):
    return board.steerer


@pytest.fixture
def watch(fake_api, kubeconfig, board):
    watch = BindingWatch(api_client(kubeconfig), board.inflight, "replica1", horizon=150.0)
    watch.start()
    assert watch.synced.wait(10)
    yield watch
    watch.stop()
    fake_api.close_watches()


def _steer(steerer, name, bandwidth=HEAVY):
    """Admit a pod as the API server would: steer it, apply the patch, name it."""
    admitted = pod(annotations={EXPECTED_BANDWIDTH: str(bandwidth)})
    decision = steerer.decide(admitted, {}, dry_run=False)
    steered = jsonpatch.apply_patch(admitted, decision.patch)
    steered["metadata"]["name"] = name
    steered.update(apiVersion="v1", kind="Pod")
    return steered, decision


def _inflight(steerer):
    return dict(steerer.inflight.view())


def test_a_booked_pod_carries_its_replica_and_key(steerer):
    steered, decision = _steer(steerer, "p1")
    assert steered["metadata"]["labels"][STEERED_BY] == "replica1"
    assert steered["metadata"]["annotations"][BOOKING] == str(decision.booking_key)
    assert decision.booking_key > 0
    # A dry run books nothing, so it is neither labelled nor keyed.
    dry = steerer.decide(pod(), {}, dry_run=True)
    assert dry.booking_key == 0
    assert STEERED_BY not in str(dry.patch) and BOOKING not in str(dry.patch)


def test_a_pod_bound_elsewhere_moves_its_booking_and_the_next_choice_sees_it(
    fake_api, board, steerer, watch
):
    first, decision = _steer(steerer, "p1")
    assert decision.preferences[0].node == "a"
    # Booked on a, a heavy pod makes b the best choice for the next one ...
    assert steerer.decide(pod(), {}, dry_run=True).preferences[0].node == "b"
    fake_api.put(first)
    first["spec"]["nodeName"] = "c"  # ... but the scheduler bound it to c
    fake_api.put(first)
    wait_for(lambda: watch.counts()["moved"] == 1)
    inflight = _inflight(steerer)
    assert "a" not in inflight and inflight["c"] == (HEAVY, 1)
    # a is free again, but kube-scheduler declined it: it is named first
    # again only once the next measurement is adopted.
    assert steerer.decide(pod(), {}, dry_run=True).preferences[0].node == "b"
    assert board.refresh() is not None
    assert steerer.decide(pod(), {}, dry_run=True).preferences[0].node == "a"
    # Later updates of the bound pod (kubelet's status) change nothing.
    first["status"] = {"phase": "Running"}
    fake_api.put(first)
    second, _ = _steer(steerer, "p2", bandwidth=1000)
    second["spec"]["nodeName"] = "a"  # bound where it was booked
    fake_api.put(second)
    wait_for(lambda: watch.counts()["kept"] == 1)
    assert watch.counts() == {
        "moved": 1,
        "kept": 1,
        "dropped": 0,
        "seen": 0,
        "placed": 0,
        "gone": 0,
    }
    assert _inflight(steerer)["c"] == (HEAVY, 1)


def test_a_pod_deleted_or_failed_before_binding_drops_its_booking(fake_api, steerer, watch):
    deleted, _ = _steer(steerer, "p1")
    fake_api.put(deleted)
    failed, _ = _steer(steerer, "p2")
    never_bound, _ = _steer(steerer, "p3")
    fake_api.put(never_bound)
    assert sum(pods for _, pods in _inflight(steerer).values()) == 3
    fake_api.delete(PODS, "p1")
    failed["status"] = {"phase": "Failed", "reason": "OutOfcpu"}
    fake_api.put(failed)
    wait_for(lambda: watch.counts()["dropped"] == 2)
    # The pod never bound keeps its booking on its first preference.
    (node, (unseen, pods)), *others = _inflight(steerer).items()
    assert not others and pods == 1 and unseen == HEAVY
    assert (
        node
        == never_bound["metadata"]["annotations"]["nettraffic.io/preferred-nodes"].split(",")[0]
    )


def test_a_pod_that_ends_after_its_binding_takes_its_booking_with_it(
    fake_api, kubeconfig, board, steerer, watch
):
    """A Job's pod that exits at once sends nothing more: its node is free
    again at once, here and on the replica that saw it, not a podStartup
    plus a window later."""
    other = FixedBoard({"a": 0.0, "b": 1e6, "c": 2e6}, replica="replica2")
    theirs = _watch(fake_api, kubeconfig, other, "replica2")
    try:
        job, decision = _steer(steerer, "p1")
        assert decision.preferences[0].node == "a"
        job["spec"]["nodeName"] = "c"
        fake_api.put(job)
        wait_for(lambda: watch.counts()["moved"] == 1 and theirs.counts()["moved"] == 1)
        assert _inflight(steerer) == _inflight(other.steerer) == {"c": (HEAVY, 1)}
        job["status"] = {"phase": "Succeeded"}
        fake_api.put(job)
        wait_for(lambda: watch.counts()["gone"] == 1 and theirs.counts()["gone"] == 1)
        assert _inflight(steerer) == _inflight(other.steerer) == {}
        assert board.refresh() is not None  # a, declined, is named first again
        # Shown first bound and failed at once: its booking, still on its
        # first preference, goes as well.
        crashed, decision = _steer(steerer, "p2")
        assert decision.preferences[0].node == "a"
        crashed["spec"]["nodeName"] = "a"
        crashed["status"] = {"phase": "Failed"}
        fake_api.put(crashed)
        wait_for(lambda: watch.counts()["gone"] == 2)
        assert _inflight(steerer) == {}
        assert steerer.decide(pod(), {}, dry_run=True).preferences[0].node == "a"
        # A pod still running keeps its booking; its deletion afterwards, and
        # the ended pods' own deletions, change nothing more.
        running, _ = _steer(steerer, "p3")
        running["spec"]["nodeName"] = "a"
        fake_api.put(running)
        wait_for(lambda: watch.counts()["kept"] == 1)
        fake_api.delete(PODS, "p1")
        fake_api.delete(PODS, "p2")
        running["status"] = {"phase": "Running"}  # an event after them, to wait on
        fake_api.put(running)
        wait_for(lambda: watch.ignored()["no-booking"] == 1)
        assert _inflight(steerer) == {"a": (HEAVY, 1)}
        assert watch.counts()["gone"] == 2 and watch.counts()["dropped"] == 0
    finally:
        theirs.stop()
        fake_api.close_watches()


def _watch(fake_api, kubeconfig, board, replica, horizon=150.0):
    watch = BindingWatch(api_client(kubeconfig), board.inflight, replica, horizon)
    watch.start()
    assert watch.synced.wait(10)
    return watch


def test_a_pod_another_replica_steered_is_booked_here_moves_and_drops(
    fake_api, kubeconfig, steerer, watch
):
    other = FixedBoard({"a": 0.0, "b": 1e6, "c": 2e6}, replica="replica2")
    theirs = _watch(fake_api, kubeconfig, other, "replica2")
    try:
        first, decision = _steer(steerer, "p1")  # steered by replica 1
        assert decision.preferences[0].node == "a"
        fake_api.put(first)
        wait_for(lambda: theirs.counts()["seen"] == 1)
        # Replica 2 books it where replica 1 did, at what replica 1 booked ...
        assert _inflight(other.steerer) == {"a": (HEAVY, 1)}
        # ... so its own next pod goes elsewhere.
        assert other.steerer.decide(pod(), {}, dry_run=True).preferences[0].node == "b"
        first["spec"]["nodeName"] = "c"
        fake_api.put(first)
        wait_for(lambda: theirs.counts()["moved"] == 1)
        assert _inflight(other.steerer) == {"c": (HEAVY, 1)}
        second, _ = _steer(steerer, "p2")
        fake_api.put(second)
        wait_for(lambda: theirs.counts()["seen"] == 2)
        fake_api.delete(PODS, "p2")
        wait_for(lambda: theirs.counts()["dropped"] == 1)
        assert _inflight(other.steerer) == {"c": (HEAVY, 1)}
        # Replica 1 books its own pods once: what it sees of them is its own.
        wait_for(lambda: watch.counts()["moved"] == 1)
        assert watch.counts()["seen"] == 0
    finally:
        theirs.stop()
        fake_api.close_watches()


def test_a_restarted_replica_rebuilds_its_bookings_from_the_pods(fake_api, kubeconfig, steerer):
    bound, _ = _steer(steerer, "p1")
    bound["spec"]["nodeName"] = "b"
    fake_api.put(bound)
    unbound, decision = _steer(steerer, "p2", bandwidth=1000)
    fake_api.put(unbound)
    old, _ = _steer(steerer, "p3")
    old["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"  # measured long since
    fake_api.put(old)
    # The same webhook pod after a restart: a new process, a new replica id.
    restarted = FixedBoard({"a": 0.0, "b": 1e6, "c": 2e6}, replica="replica9")
    watch = _watch(fake_api, kubeconfig, restarted, "replica9")
    try:
        assert watch.counts()["seen"] == 2
        # p1 where it was bound; p2 on its first preference (b as well: p1
        # was booked on a when p2 was steered).
        assert decision.preferences[0].node == "b"
        assert _inflight(restarted.steerer) == {"b": (HEAVY + 1000.0, 2)}
    finally:
        watch.stop()
        fake_api.close_watches()


def test_pods_without_a_usable_booking_are_left_alone(fake_api, kubeconfig, steerer, watch):
    theirs, _ = _steer(steerer, "p1")
    theirs["metadata"]["labels"] = {STEERED_BY: "replica2"}
    theirs["metadata"]["annotations"]["nettraffic.io/booked-bandwidth"] = "NaN"
    fake_api.put(theirs)
    old, _ = _steer(steerer, "p3")  # measured long since, not bound: neither booked nor placed
    old["metadata"]["labels"] = {STEERED_BY: "replica2"}
    old["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    fake_api.put(old)
    mine, _ = _steer(steerer, "p2")
    mine["spec"]["nodeName"] = "b"
    fake_api.put(mine)
    wait_for(lambda: watch.counts()["moved"] + watch.counts()["kept"] == 1)
    assert watch.counts()["seen"] == 0
    ignored = watch.ignored()
    assert ignored["unusable"] == 1 and ignored["too-old"] == 1
    watch_requests = [r for r in fake_api.requests if r.path == "/api/v1/pods"]
    assert {r.query["labelSelector"][0] for r in watch_requests} == {STEERED_BY}


def test_replicas_that_saw_each_others_pods_put_different_nodesfirst_choice(fake_api, kubeconfig):
    """Near-equal nodes are shared: in crc32 order c and d are the first
    half of the nodes, replica1's, and a and e replica2's (by crc32 modulo 2,
    a and c would be replica2's); each counts on the other's a whole pod of
    the size it places while it admits (replica_share.py)."""
    loads = {"a": 1e6, "d": 1e6, "c": 0.0, "e": 0.0}
    labels = ("replica1", "replica2")
    boards = [FixedBoard(loads, replica=label) for label in labels]
    heavy = pod(annotations={EXPECTED_BANDWIDTH: "400000"})  # 10 score points
    # A pod limited to some nodes is placed by a scan of the nodes, not off the heaps.
    selecting = copy.deepcopy(heavy)
    term = {"key": "kubernetes.io/hostname", "operator": "In", "values": sorted(loads)}
    selecting["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [term]}]
            }
        }
    }

    def firsts(admitted=heavy):
        return [b.steerer.decide(admitted, {}, dry_run=True).preferences[0].node for b in boards]

    assert firsts() == ["c", "c"]  # neither has seen the other
    watches = [
        _watch(fake_api, kubeconfig, b, label) for b, label in zip(boards, labels, strict=True)
    ]
    try:
        for board, label in zip(boards, labels, strict=True):
            steered, _ = _steer(board.steerer, f"pod-of-{label}", bandwidth=1)
            fake_api.put(steered)
        wait_for(lambda: [w.counts()["seen"] for w in watches] == [1, 1])
        assert firsts() == ["c", "e"]
        assert firsts(selecting) == ["c", "e"]
    finally:
        for w in watches:
            w.stop()
        fake_api.close_watches()


def test_the_watch_times_how_long_it_takes_to_show_this_replicas_pods(fake_api, kubeconfig):
    now = [MEASURED_AT]  # the admissions' and the watch's clock
    board = FixedBoard({"a": 0.0, "b": 1e6}, clock=lambda: now[0], replica="replica1")
    inflight = board.inflight
    watch = BindingWatch(
        api_client(kubeconfig), inflight, "replica1", horizon=150.0, clock=lambda: now[0]
    )
    watch.start()
    try:
        assert watch.synced.wait(10)
        assert inflight.watch_delay == WATCH_DELAY  # nothing measured yet
        steered, _ = _steer(board.steerer, "p1")
        now[0] += 0.25  # the watch shows it 250 ms after its admission
        fake_api.put(steered)
        wait_for(lambda: inflight.watch_delay != WATCH_DELAY)
        # the average moves a tenth of the way
        assert inflight.watch_delay == pytest.approx(WATCH_DELAY + DELAY_WEIGHT * (0.25 - 0.05))
        measured = inflight.watch_delay
        now[0] += 1.0
        steered["spec"]["nodeName"] = "a"  # its later events time nothing
        fake_api.put(steered)
        wait_for(lambda: watch.counts()["kept"] == 1)
        assert inflight.watch_delay == measured
    finally:
        watch.stop()
        fake_api.close_watches()


def test_another_replicas_pod_booked_at_the_default_spreads_its_workload_here(fake_api, kubeconfig):
    """Scores a 100, b 97.5, c 0 (test_unlearned.LOADS): a pod at
    the default (1Mi) costs a node 0.26 points, another replica's node 0.26
    more, and a pod of the same workload booked at the default 5."""
    loads = {"a": 0.0, "b": 1e7, "c": 4e8}
    boards = [FixedBoard(loads, replica=label) for label in ("replica1", "replica2")]
    theirs = _watch(fake_api, kubeconfig, boards[1], "replica2")
    try:
        web = pod(generate_name="web-7d9c4b-")
        decision = boards[0].steerer.decide(web, {}, dry_run=False)
        assert decision.preferences[0].node == "a"
        steered = jsonpatch.apply_patch(web, decision.patch)
        steered["metadata"]["name"] = "web-7d9c4b-x1"
        steered.update(apiVersion="v1", kind="Pod")
        assert steered["metadata"]["annotations"][BANDWIDTH_SOURCE] == "default"
        fake_api.put(steered)
        wait_for(lambda: theirs.counts()["seen"] == 1)

        def first(generate_name):
            admitted = pod(generate_name=generate_name)
            return boards[1].steerer.decide(admitted, {}, dry_run=True).preferences[0].node

        assert first("web-7d9c4b-") == "b"  # web's next pod goes elsewhere ...
        assert first("api-5f6d-") == "a"  # ... another workload's does not
    finally:
        theirs.stop()
        fake_api.close_watches()


def test_events_that_change_nothing_are_counted_and_book_nothing_twice(fake_api, steerer, watch):
    # A binding for a booking this process never made (or measured since).
    stranger, _ = _steer(steerer, "p0", bandwidth=1000)
    stranger["metadata"]["annotations"][BOOKING] = "987654"
    stranger["spec"]["nodeName"] = "a"
    fake_api.put(stranger)
    wait_for(lambda: watch.ignored()["no-booking"] == 1)
    # Bound to a node the scores do not know: the booking goes with it.
    elsewhere, _ = _steer(steerer, "p1")
    elsewhere["spec"]["nodeName"] = "node-not-scored"
    fake_api.put(elsewhere)
    wait_for(lambda: watch.counts()["moved"] == 1)
    assert _inflight(steerer)["node-not-scored"] == (HEAVY, 1)
    assert steerer.decide(pod(), {}, dry_run=True).preferences  # choices go on
    # Shown bound first, then unbound (a replayed older state), then bound again.
    late, decision = _steer(steerer, "p2")
    late["spec"]["nodeName"] = "b"
    fake_api.put(late)
    del late["spec"]["nodeName"]
    fake_api.put(late)
    late["spec"]["nodeName"] = "b"
    fake_api.put(late)
    fake_api.put(late)  # and again: a duplicate
    wait_for(lambda: watch.ignored()["no-booking"] >= 4)
    assert watch.counts()["moved"] + watch.counts()["kept"] == 2
    # Every pod counted once, where it was bound; the stranger's key booked nothing.
    total = sum(pods for _, pods in _inflight(steerer).values())
    assert total == 3 and _inflight(steerer)["b"][1] >= 1
    assert decision.booking_key != 987654


def test_another_replicas_rollout_pod_counts_in_its_replica_sets_spread_here(fake_api, kubeconfig):
    """The default spread counts a rollout's ReplicaSet alone, on every
    replica: once replica 2 sees replica 1's pod of web-1111 in zone a, its
    own next pod of web-1111 keeps out of a (b and c hold none), while a
    pod of web-2222, the same Deployment's next template, may go there."""
    loads = {"a": 0.0, "b": 1e6, "c": 2e6}
    zones = {name: {"labels": {ZONE_LABEL: f"zone-{name}"}} for name in loads}
    boards = [FixedBoard(loads, replica=r, **zones) for r in ("replica1", "replica2")]
    theirs = _watch(fake_api, kubeconfig, boards[1], "replica2")

    def rolled_out(template: str) -> dict:
        labels = {"app": "web", "pod-template-hash": template}
        return pod(f"web-{template}-", labels=labels, annotations={EXPECTED_BANDWIDTH: "1k"})

    try:
        web = rolled_out("1111")
        decision = boards[0].steerer.decide(web, {}, dry_run=False)
        assert decision.preferences[0].node == "a"
        steered = jsonpatch.apply_patch(web, decision.patch)
        steered["metadata"]["name"] = "web-1111-x1"
        steered.update(apiVersion="v1", kind="Pod")
        fake_api.put(steered)
        wait_for(lambda: theirs.counts()["seen"] == 1)

        def first(template: str) -> str:
            decided = boards[1].steerer.decide(rolled_out(template), {}, dry_run=True)
            return decided.preferences[0].node

        assert first("1111") == "b"
        assert first("2222") == "a"
    finally:
        theirs.stop()
        fake_api.close_watches()


def test_a_bound_pod_counts_in_its_spread_until_it_terminates(fake_api, kubeconfig):
    """Past its measurement a bound pod still counts in its workload's
    spread, on every replica (another replica's pod too old to book is
    placed as the watch shows it), until it terminates, finishes or is deleted."""
    board = zoned_board("replica1")
    mine = _watch(fake_api, kubeconfig, board, "replica1")
    try:
        names = []
        for name in ("p1", "p2"):
            steered, decision = _steer(board.steerer, name, bandwidth=1000)
            steered["spec"]["nodeName"] = decision.preferences[0].node
            steered["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
            fake_api.put(steered)
            names.append(decision.preferences[0].node)
        assert names == ["a", "b"]
        wait_for(lambda: mine.counts()["kept"] == 2)
        # Measured long since: no booking left, but the zones a and b hold one.
        assert board.measure_at(MEASURED_AT + 3600) is not None
        assert _inflight(board.steerer) == {}
        assert first_choice(board) == "c"
        # A replica started now places them too (too old to book).
        theirs_board = zoned_board("replica2")
        assert theirs_board.measure_at(MEASURED_AT + 3600) is not None
        theirs = _watch(fake_api, kubeconfig, theirs_board, "replica2", horizon=150.0)
        try:
            assert theirs.counts()["placed"] == 2 and theirs.ignored()["too-old"] == 2
            assert first_choice(theirs_board) == "c"
            # p1 terminating (kube-scheduler's spread skips it): zone a holds
            # none again, on both replicas; its deletion then changes nothing.
            p1 = fake_api.get(PODS, "p1")
            assert p1 is not None
            p1["metadata"]["deletionTimestamp"] = "2020-01-01T01:00:00Z"
            fake_api.put(p1)
            wait_for(lambda: mine.counts()["gone"] == 1 and theirs.counts()["gone"] == 1)
            assert first_choice(board) == "a" and first_choice(theirs_board) == "a"
            fake_api.delete(PODS, "p1")
            # p2 finished (kube-scheduler lists no Succeeded pod): b holds none.
            p2 = fake_api.get(PODS, "p2")
            assert p2 is not None
            p2["status"] = {"phase": "Succeeded"}
            fake_api.put(p2)
            wait_for(lambda: mine.counts()["gone"] == 2 and theirs.counts()["gone"] == 2)
            assert first_choice(board) == "a"
            fake_api.delete(PODS, "p2")
        finally:
            theirs.stop()
    finally:
        mine.stop()
        fake_api.close_watches()


def test_a_list_after_a_dropped_watch_forgets_the_pods_deleted_meanwhile(fake_api, kubeconfig):
    board = zoned_board("replica1")
    watch = _watch(fake_api, kubeconfig, board, "replica1")
    steered, decision = _steer(board.steerer, "p1", bandwidth=1000)
    steered["spec"]["nodeName"] = decision.preferences[0].node
    fake_api.put(steered)
    wait_for(lambda: watch.counts()["kept"] == 1)
    watch.stop()
    fake_api.close_watches()
    fake_api.delete(PODS, "p1")  # while no watch runs
    assert board.measure_at(MEASURED_AT + 3600) is not None
    assert first_choice(board) == "b"  # zone a still holds p1 here
    relisted = _watch(fake_api, kubeconfig, board, "replica1")
    try:
        assert first_choice(board) == "a"
    finally:
        relisted.stop()
        fake_api.close_watches()


def test_the_zone_skew_keeps_a_pod_s_room_whether_or_not_the_pods_are_shown_bound(
    fake_api, kubeconfig
):
    """A pod not shown bound may run in another zone than booked, and so may
    the pod being placed: the zones are kept a pod's room short of maxSkew
    (here 2) before the binding shows and after."""
    loads = {"a": 0.0, "b": 1e6, "c": 2e6}
    zones = {name: {"labels": {ZONE_LABEL: f"zone-{name}"}} for name in loads}
    board = FixedBoard(loads, replica="replica1", steering={"zoneMaxSkew": 2}, **zones)
    watch = _watch(fake_api, kubeconfig, board, "replica1")
    try:
        pods = []
        for name in ("p1", "p2", "p3", "p4"):
            steered, decision = _steer(board.steerer, name, bandwidth=1000)
            steered["spec"]["nodeName"] = decision.preferences[0].node
            pods.append(steered)
        assert [p["spec"]["nodeName"] for p in pods] == ["a", "b", "c", "a"]
        for steered in pods[:3]:
            fake_api.put(steered)
        wait_for(lambda: watch.counts()["kept"] == 3)
        # Zone a holds 2 of 1/1/1 + p4, p4 not shown bound: a pod's room is
        # kept for it.
        assert first_choice(board) == "b"
        fake_api.put(pods[3])
        wait_for(lambda: watch.counts()["kept"] == 4)
        # p4 shown bound in zone a: the preferences still keep a pod's room
        # (a skew of 1 here), as the pod being placed may be bound in a
        # fuller zone than the one named.
        assert first_choice(board) == "b"
    finally:
        watch.stop()
        fake_api.close_watches()


def test_a_pod_admitted_but_never_created_leaves_its_workload_s_spread(fake_api, kubeconfig):
    """A pod the watch never shows (a quota or another webhook refused it
    after this one) counts in its workload's spread while its booking is
    in flight, and goes with it; so does one created while the watch was
    down, and the list that follows places it again."""
    board = zoned_board("replica1")
    _, refused = _steer(board.steerer, "refused", bandwidth=1000)  # never created
    assert refused.preferences[0].node == "a"
    created, _ = _steer(board.steerer, "p1", bandwidth=1000)
    created["spec"]["nodeName"] = "a"  # bound beside the refused one's first preference
    fake_api.put(created)  # no watch runs
    assert first_choice(board) == "c"  # zones a and b hold a pod each while in flight
    assert board.measure_at(MEASURED_AT + 3600) is not None
    assert first_choice(board) == "a" and board.inflight.never_shown == 2
    watch = _watch(fake_api, kubeconfig, board, "replica1")
    try:
        assert watch.counts()["placed"] == 1
        assert first_choice(board) == "b"  # zone a holds p1 again
    finally:
        watch.stop()
        fake_api.close_watches()


def test_a_pod_still_pending_when_measured_leaves_its_spread_until_it_is_bound(
    fake_api, kubeconfig
):
    """kube-scheduler's spread counts bound pods alone: a pod shown but not
    bound when its booking is measured leaves its workload's spread (not
    counted as never created), and comes back when the watch shows it bound."""
    board = zoned_board("replica1")
    watch = _watch(fake_api, kubeconfig, board, "replica1")
    try:
        pending, decision = _steer(board.steerer, "pending", bandwidth=1000)
        assert decision.preferences[0].node == "a"
        fake_api.put(pending)  # stored, not bound
        wait_for(lambda: board.inflight.watch_delay != WATCH_DELAY)  # shown
        assert first_choice(board) == "b"  # zone a holds it while in flight
        assert board.measure_at(MEASURED_AT + 3600) is not None
        assert first_choice(board) == "a" and board.inflight.never_shown == 0
        pending["spec"]["nodeName"] = "a"
        fake_api.put(pending)
        wait_for(lambda: watch.counts()["placed"] == 1)
        assert first_choice(board) == "b"
    finally:
        watch.stop()
        fake_api.close_watches()
