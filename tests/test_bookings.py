"""The bookings store: what a measurement cannot see yet, kept as running sums per node."""

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.ledger import unseen_summed_over_every_booking
from kubectl_nettraffic.inflight.bookings import (
    DELAY_MOST,
    DELAY_WEIGHT,
    WATCH_DELAY,
    Bookings,
    Walk,
)
from kubectl_nettraffic.kube.workloads import Workload


def _view(store: Bookings, measured_at: float):
    store.measure(measured_at)
    return store.view


def _prepare(store: Bookings, measured_at: float) -> Walk | None:
    """A walk beside the bookings, as InflightState.adopt starts one."""
    edge = store.edge_of(measured_at)
    return store.walk(edge, store.start()) if store.is_newer(edge) else None


def test_the_store_counts_only_what_the_measurement_cannot_see_yet():
    store = Bookings(pod_startup=10, window=120)
    store.add("a", 1000.0, at=100.0)
    store.add("a", 500.0, at=200.0)
    assert _view(store, 100.0) == {"a": (1500.0, 2)}  # measured before either started
    unseen, pods = _view(store, 170.0)["a"]  # first pod 60s into its 120s window
    assert unseen == pytest.approx(1000 * 0.5 + 500) and pods == 2
    store.measure(231.0)  # first pod fully visible now
    assert _view(store, 231.0)["a"][1] == 1
    store.measure(400.0)
    assert _view(store, 400.0) == {}


def test_a_booking_between_refreshes_counts_by_its_phase():
    store = Bookings(pod_startup=10.0, window=100.0)
    assert _view(store, 1000.0) == {}  # its edge: pods admitted from 990 on are unseen
    store.add("ramp", 1000.0, at=985.0)  # 95 s into the 100 s ramp: 95% unseen
    store.add("hidden", 1000.0, at=990.0)
    store.add("hidden", 500.0, at=996.0)
    view = _view(store, 1000.0)
    assert view["ramp"] == (pytest.approx(950.0), 1)
    assert view["hidden"] == (1500.0, 2)


def test_the_view_follows_adds_between_refreshes():
    store = Bookings(pod_startup=10, window=120)
    assert _view(store, 100.0) == {}
    store.add("a", 1000.0, at=101.0)
    store.add("a", 1000.0, at=102.0)
    store.add("b", 10.0, at=103.0)
    assert _view(store, 100.0) == {"a": (2000.0, 2), "b": (10.0, 1)}
    # A new measurement time moves both of a's bookings into their ramp.
    assert _view(store, 171.0)["a"] == pytest.approx((2000.0 - 1000 * (60 + 59) / 120, 2))


def test_an_older_measurement_does_not_move_the_view_back():
    store = Bookings(pod_startup=10, window=120)
    store.add("a", 1000.0, at=100.0)
    latest = _view(store, 171.0)  # the pod 61 s into its ramp
    assert _view(store, 100.0) is latest  # a reader with the previous snapshot
    store.add("a", 500.0, at=172.0)  # updates the view the Steerer holds
    assert latest["a"] == (pytest.approx(1000 * 59 / 120 + 500), 2)


def _quarters(low: float, high: float) -> st.SearchStrategy[float]:
    # Times on a quarter-second grid are exact in binary at epoch size, so the
    # oracle and the store agree exactly on which phase a booking is in; off
    # the grid, float rounding can put a booking a hair either side of an edge.
    return st.integers(int(low * 4), int(high * 4)).map(lambda quarters: quarters / 4)


@settings(max_examples=400, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(
                st.just("add"),
                st.sampled_from(["a", "b", "c"]),
                st.floats(1.0, 1e8),
                _quarters(-5.0, 30.0),  # seconds since the previous booking; < 0: a clock step back
            ),
            st.tuples(st.just("view"), _quarters(-50.0, 400.0)),  # measured at, from "now"
            # The n-th booking so far (modulo their number) bound to a node, or dropped.
            st.tuples(st.just("move"), st.integers(0, 100), st.sampled_from(["a", "b", "c", "d"])),
            st.tuples(st.just("drop"), st.integers(0, 100)),
            # A measurement's view worked out beside the bookings, put in place later.
            st.tuples(st.just("prepare"), _quarters(-50.0, 400.0)),
            st.tuples(st.just("commit")),
        ),
        max_size=60,
    ),
    pod_startup=_quarters(0.0, 30.0),
    window=_quarters(10.0, 300.0),
)
def test_the_sums_equal_the_definition_summed_over_every_booking(steps, pod_startup, window):
    store = Bookings(pod_startup=pod_startup, window=window)
    now, latest = 1.8e9, float("-inf")  # epoch-sized times, as in production
    measured_at: float | None = None
    bookings: dict[int, tuple[str, float, float]] = {}  # by key
    settled: set[int] = set()
    keys_used = 0
    # A prepared view: (it, measured at, whether only bookings after it came
    # since, the nodes they went to).
    pending: tuple[Walk, float, bool, set[str]] | None = None
    for step in steps:
        if step[0] == "add":
            _, node, bandwidth, gap = step
            now += gap
            # Keys are unique (Bookings.add): one the oracle forgot may still be
            # in the store's log, so never reuse one.
            keys_used += 1
            key = keys_used
            store.add(node, bandwidth, at=now, key=key)
            latest = max(latest, now)  # a clock step back books at the latest time seen
            bookings[key] = (node, bandwidth, latest)
            if pending is not None:
                prepared, asked, clean, touched = pending
                clean = clean and latest >= asked - pod_startup
                pending = (prepared, asked, clean, touched | {node})
        elif step[0] == "prepare":
            asked = now + step[1]
            prepared = _prepare(store, asked)
            assert (prepared is None) == (measured_at is not None and asked <= measured_at)
            if prepared is not None:
                pending = (prepared, asked, True, set())
        elif step[0] == "commit":
            if pending is None:
                continue
            prepared, asked, clean, touched = pending
            pending = None
            committed = store.commit(prepared)
            if clean:  # only bookings after the measurement came meanwhile
                assert committed is not None and committed[0] == touched
            elif committed is None:  # void: InflightState walks under its lock instead
                store.measure(asked)
            measured_at = asked if measured_at is None else max(measured_at, asked)
            edge = measured_at - pod_startup - window
            bookings = {k: b for k, b in bookings.items() if b[2] > edge}
            _assert_view_is(_view(store, asked), bookings, measured_at, pod_startup, window)
        elif step[0] in ("move", "drop"):
            keys = sorted(bookings.keys() | settled)
            if not keys:
                continue
            key = keys[step[1] % len(keys)]
            live = key in bookings and key not in settled
            # What the booking still counts for: none once a measurement shows it.
            unseen = 0.0
            if live:
                node, bandwidth, at = bookings[key]
                unseen = bandwidth
                if measured_at is not None:
                    single = unseen_summed_over_every_booking(
                        [bookings[key]], measured_at, pod_startup, window
                    )
                    unseen = single.get(node, (0.0, 0))[0]
            if step[0] == "move":
                moved = store.move(key, step[2])
                if live and unseen > 0:
                    assert moved is not None and moved.left == node
                    bookings[key] = (step[2], bandwidth, at)
                else:
                    assert moved is None
            else:
                dropped = store.drop(key)
                if live and unseen > 0:
                    assert dropped is not None and dropped[0] == node
                    bookings.pop(key)
                else:
                    assert dropped is None
            settled.add(key)
            if pending is not None and live and unseen > 0:
                pending = (pending[0], pending[1], False, pending[3])  # voids it
        else:
            previous, asked = measured_at, now + step[1]  # may go back in time
            # Measurements only move forward: an older one is answered for the latest.
            measured_at = asked if previous is None else max(previous, asked)
            if measured_at != previous:  # a new measurement time forgets what it fully shows
                edge = measured_at - pod_startup - window
                bookings = {k: b for k, b in bookings.items() if b[2] > edge}
                if pending is not None:
                    pending = (pending[0], pending[1], False, pending[3])  # voids it
            _assert_view_is(_view(store, asked), bookings, measured_at, pod_startup, window)


def _assert_view_is(view, bookings, measured_at, pod_startup, window):
    expected = unseen_summed_over_every_booking(bookings.values(), measured_at, pod_startup, window)
    assert view.keys() == expected.keys()
    for node, (unseen, pods) in expected.items():
        assert view[node][1] == pods
        assert view[node][0] == pytest.approx(unseen, rel=1e-6, abs=1e-3)


def test_a_long_run_keeps_exact_sums_while_forgotten_bookings_are_trimmed():
    store = Bookings(pod_startup=5, window=60)
    bookings = []
    at = 1.8e9
    for i in range(5000):
        at += 0.1
        bandwidth = 1e6 * (1 + i % 7)
        store.add("ab"[i % 2], bandwidth, at=at)
        bookings.append(("ab"[i % 2], bandwidth, at))
        if i % 250 == 0:
            expected = unseen_summed_over_every_booking(bookings, at, 5, 60)
            view = _view(store, at)
            assert view.keys() == expected.keys()
            for node, (unseen, pods) in expected.items():
                assert view[node] == (pytest.approx(unseen, rel=1e-9), pods)
    # 500 s of bookings against a 65 s horizon: most were forgotten and trimmed.
    assert len(store._times) < 2500


def test_views_walked_beside_a_booking_thread_sum_every_booking():
    """Real threads: one books without pause while another walks to a new
    measurement time again and again, as InflightState.adopt does: the walk
    outside the lock, its start and its commit under it. Every view put in
    place counts every booking made, before and during its walk."""
    store = Bookings(pod_startup=10, window=120)
    start, bookings, done, lock = 1.8e9, [], threading.Event(), threading.Lock()

    def book():
        for i in range(40_000):
            at = start + i * 0.0025  # 100 s of bookings
            with lock:
                store.add("abcdefg"[i % 7], float(1 + i % 5), at=at, key=i + 1)
                bookings.append(("abcdefg"[i % 7], float(1 + i % 5), at))
        done.set()

    booker = threading.Thread(target=book)
    booker.start()
    walks, committed = 0, 0
    while not done.is_set():
        with lock:
            if not bookings:
                continue
            measured_at = bookings[-1][2]  # bookings after it come while it is walked
            edge = store.edge_of(measured_at)
            begun = store.start() if store.is_newer(edge) else None
        if begun is None:
            continue
        walked = store.walk(edge, begun)
        with lock:
            walks += 1
            committed += store.commit(walked) is not None
            # Nothing is forgotten within 100 s: the view counts every booking made so far.
            assert sum(count for _, count in store.view.values()) == len(bookings)
    booker.join()
    measured_at = bookings[-1][2]
    expected = unseen_summed_over_every_booking(bookings, measured_at, 10, 120)
    view = _view(store, measured_at)
    # Only appends came beside them: every walk was put in place, none walked again.
    assert committed == walks > 0
    assert view.keys() == expected.keys()
    for node, (unseen, pods) in expected.items():
        assert view[node] == (pytest.approx(unseen, rel=1e-9), pods)


WEB = Workload("shop", "Deployment", "web")
API = Workload("shop", "Deployment", "api")


def test_a_booking_moves_once():
    store = Bookings(pod_startup=10, window=120, replica="r1")
    store.measure(90.0)
    store.add("a", 1000.0, at=100.0, key=7, replica="r1", workload=WEB, unlearned=True)
    assert store.is_pending(7) and store.view == {"a": (1000.0, 1)}
    assert store.move(7, "b") is not None
    assert not store.is_pending(7) and store.move(7, "c") is None and store.drop(7) is None
    assert store.view == {"b": (1000.0, 1)} and store.unlearned == {WEB: {"b": 1}}


def test_a_pod_that_ends_after_its_binding_takes_what_is_unseen_of_its_row_once():
    store = Bookings(pod_startup=10, window=120, replica="r1")
    store.measure(90.0)
    store.add("a", 1000.0, at=100.0, key=7, replica="r1", workload=WEB, unlearned=True)
    store.add("a", 500.0, at=101.0, key=8, replica="r1", workload=API)
    store.add("c", 200.0, at=102.0, key=9, replica="r1", workload=API)
    assert store.move(7, "b") is not None and store.move(8, "a") is not None
    # In the ramp, half shown: the other half goes, with its unlearned count.
    store.measure(100.0 + 10 + 60)
    assert store.view["b"] == (pytest.approx(500.0), 1)
    assert store.end(7) == ("b", [(WEB, "b", -1)])
    assert "b" not in store.view and store.unlearned == {} and 7 not in store.placed
    assert store.end(7) is None  # once
    # Ended while still pending (its binding and its end shown at once).
    assert store.end(9) == ("c", []) and "c" not in store.view
    assert store.in_flight.per_node == {API: {"a": 1}}
    # Measured already: nothing left to take.
    store.measure(400.0)
    assert store.end(8) is None


def test_unlearned_pods_count_where_their_booking_is_until_measured():
    store = Bookings(pod_startup=10, window=120)
    assert store.add("a", 1.0, at=100.0, key=1, workload=WEB, unlearned=True) == (WEB, "a", 1)
    store.add("a", 1.0, at=101.0, key=2, workload=WEB, unlearned=True)
    store.add("b", 1.0, at=102.0, key=3, workload=API, unlearned=True)
    store.add("b", 1.0, at=103.0, key=4)  # learned: counted for no workload
    assert store.unlearned == {WEB: {"a": 2}, API: {"b": 1}}
    moved = store.move(2, "c")
    assert moved is not None and moved.counts == [(WEB, "a", -1), (WEB, "c", 1)]
    assert store.drop(3) == ("b", [(API, "b", -1)])
    assert store.unlearned == {WEB: {"a": 1, "c": 1}}
    # One expiry rule: a measurement that shows a pod's traffic forgets its count.
    assert store.measure(100.0 + 10 + 120) == [(WEB, "a", -1)]
    assert store.unlearned == {WEB: {"c": 1}}
    assert store.measure(400.0) == [(WEB, "c", -1)] and store.unlearned == {}


def test_every_workload_counts_in_flight_where_its_booking_is_until_measured():
    # The fan-in room of peers and the workload's spread read one view of
    # every booking, learned or not, that moves and goes with its row.
    store = Bookings(pod_startup=10, window=120)
    store.add("a", 1.0, at=100.0, key=1, workload=WEB)
    store.add("a", 1.0, at=101.0, key=2, workload=WEB, unlearned=True)
    store.add("b", 1.0, at=102.0, key=3, workload=API)
    store.add("b", 1.0, at=103.0, key=4)  # no workload: counted for none
    assert store.in_flight.per_node == {WEB: {"a": 2}, API: {"b": 1}}
    assert store.unlearned == {WEB: {"a": 1}}
    moved = store.move(1, "c")
    assert moved is not None and moved.counts == []  # learned: no unlearned count moves
    assert store.drop(3) == ("b", [])
    assert store.in_flight.per_node == {WEB: {"a": 1, "c": 1}}
    assert store.measure(100.0 + 10 + 120) == []  # key 1's row is measured, its count goes
    assert store.in_flight.per_node == {WEB: {"a": 1}}
    assert store.measure(400.0) == [(WEB, "a", -1)] and store.in_flight.per_node == {}


def test_the_pods_in_flight_count_per_zone_too_and_again_when_the_zones_change():
    store = Bookings(pod_startup=10, window=120)
    store.in_flight.set_zones({"a": "z1", "b": "z1", "c": "z2"})
    for key, node in enumerate("abcd", start=1):  # d has no zone
        store.add(node, 1.0, at=100.0 + key, key=key, workload=WEB)
    assert store.in_flight.per_zone == {WEB: {"z1": 2, "z2": 1}}
    store.move(1, "c")
    assert store.in_flight.per_zone == {WEB: {"z1": 1, "z2": 2}}
    store.in_flight.set_zones({"a": "z1", "b": "z2", "c": "z2", "d": "z2"})  # relabelled
    assert store.in_flight.per_zone == {WEB: {"z2": 4}}


def test_a_node_a_booking_moves_off_declines_once_per_measurement():
    store = Bookings(pod_startup=10, window=120)
    store.measure(90.0)
    for key in (1, 2, 3):
        store.add("a", 1.0, at=100.0 + key, key=key)
    assert store.move(1, "b").declined == 100.0
    assert store.move(2, "c").declined == 0.0  # declined already
    assert store.move(3, "a").declined == 0.0  # bound where it was booked: kept
    assert store.declined == {"a": 100.0} and store.declined_total == 1
    store.measure(95.0)
    assert store.declined == {}  # named on the new measurement again


def test_the_watch_delay_is_timed_on_this_replicas_own_pods():
    store = Bookings(pod_startup=10, window=120, replica="me")
    assert store.watch_delay == WATCH_DELAY  # nothing timed yet
    store.add("a", 1.0, at=100.0, key=1, replica="me")
    store.add("a", 1.0, at=100.0, key=2, replica="other")  # another replica's: not timed
    store.shown(2, 100.5)
    assert store.watch_delay == WATCH_DELAY
    store.shown(1, 100.25)
    assert store.watch_delay == pytest.approx(WATCH_DELAY + DELAY_WEIGHT * (0.25 - WATCH_DELAY))
    timed = store.watch_delay
    store.shown(1, 100.5)  # its later events time nothing
    assert store.watch_delay == timed


def test_a_pod_the_watch_never_shows_counts_as_shown_after_the_most():
    store = Bookings(pod_startup=10, window=120, replica="me")
    store.add("a", 1.0, at=100.0, key=1, replica="me")
    store.time_unshown(100.0 + DELAY_MOST / 2)
    assert store.watch_delay == WATCH_DELAY  # not late yet
    store.time_unshown(100.0 + DELAY_MOST)
    assert store.watch_delay == pytest.approx(
        WATCH_DELAY + DELAY_WEIGHT * (DELAY_MOST - WATCH_DELAY)
    )
    late = store.watch_delay
    store.shown(1, 200.0)  # counted already
    assert store.watch_delay == late


def test_without_a_replica_id_nothing_is_timed():
    store = Bookings(pod_startup=10, window=120)
    store.add("a", 1.0, at=100.0, key=1)
    store.time_unshown(200.0)
    store.shown(1, 200.0)
    assert store.watch_delay == WATCH_DELAY
