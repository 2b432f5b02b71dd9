"""In-flight ledger: what a measurement cannot see yet, kept as running sums per node."""

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.ledger import unseen_summed_over_every_booking
from kubectl_nettraffic.inflight.ledger import InflightLedger, NextView


def test_ledger_counts_only_what_the_measurement_cannot_see_yet():
    ledger = InflightLedger(pod_startup=10, window=120)
    ledger.add("a", 1000.0, at=100.0)
    ledger.add("a", 500.0, at=200.0)
    assert ledger.view(100.0) == {"a": (1500.0, 2)}  # measured before either started
    unseen, pods = ledger.view(170.0)["a"]  # first pod 60s into its 120s window
    assert unseen == pytest.approx(1000 * 0.5 + 500) and pods == 2
    ledger.prune(231.0)  # first pod fully visible now
    assert ledger.view(231.0)["a"][1] == 1
    ledger.prune(400.0)
    assert ledger.view(400.0) == {}


def test_a_booking_between_refreshes_counts_by_its_phase():
    ledger = InflightLedger(pod_startup=10.0, window=100.0)
    assert ledger.view(1000.0) == {}  # its edge: pods admitted from 990 on are unseen
    ledger.add("ramp", 1000.0, at=985.0)  # 95 s into the 100 s ramp: 95% unseen
    ledger.add("hidden", 1000.0, at=990.0)
    ledger.add("hidden", 500.0, at=996.0)
    view = ledger.view(1000.0)
    assert view["ramp"] == (pytest.approx(950.0), 1)
    assert view["hidden"] == (1500.0, 2)


def test_ledger_view_follows_adds_between_refreshes():
    ledger = InflightLedger(pod_startup=10, window=120)
    assert ledger.view(100.0) == {}
    ledger.add("a", 1000.0, at=101.0)
    ledger.add("a", 1000.0, at=102.0)
    ledger.add("b", 10.0, at=103.0)
    assert ledger.view(100.0) == {"a": (2000.0, 2), "b": (10.0, 1)}
    # A new measurement time moves both of a's bookings into their ramp.
    assert ledger.view(171.0)["a"] == pytest.approx((2000.0 - 1000 * (60 + 59) / 120, 2))


def test_an_older_measurement_does_not_move_the_view_back():
    ledger = InflightLedger(pod_startup=10, window=120)
    ledger.add("a", 1000.0, at=100.0)
    latest = ledger.view(171.0)  # the pod 61 s into its ramp
    assert ledger.view(100.0) is latest  # a reader with the previous snapshot
    ledger.add("a", 500.0, at=172.0)  # updates the view the Steerer holds
    assert latest["a"] == (pytest.approx(1000 * 59 / 120 + 500), 2)


def _quarters(low: float, high: float) -> st.SearchStrategy[float]:
    # Times on a quarter-second grid are exact in binary at epoch size, so the
    # oracle and the ledger agree exactly on which phase a booking is in; off
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
def test_ledger_sums_equal_the_definition_summed_over_every_booking(steps, pod_startup, window):
    ledger = InflightLedger(pod_startup=pod_startup, window=window)
    now, latest = 1.8e9, float("-inf")  # epoch-sized times, as in production
    measured_at: float | None = None
    bookings: dict[int, tuple[str, float, float]] = {}  # by key
    settled: set[int] = set()
    # A prepared view: (it, measured at, whether only bookings after it came
    # since, the nodes they went to).
    pending: tuple[NextView, float, bool, set[str]] | None = None
    for step in steps:
        if step[0] == "add":
            _, node, bandwidth, gap = step
            now += gap
            key = len(settled) + len(bookings) + 1
            while key in bookings or key in settled:
                key += 1
            ledger.add(node, bandwidth, at=now, key=key)
            latest = max(latest, now)  # a clock step back books at the latest time seen
            bookings[key] = (node, bandwidth, latest)
            if pending is not None:
                prepared, asked, clean, touched = pending
                clean = clean and latest >= asked - pod_startup
                pending = (prepared, asked, clean, touched | {node})
        elif step[0] == "prepare":
            asked = now + step[1]
            prepared = ledger.prepare(asked)
            assert (prepared is None) == (measured_at is not None and asked <= measured_at)
            if prepared is not None:
                pending = (prepared, asked, True, set())
        elif step[0] == "commit":
            if pending is None:
                continue
            prepared, asked, clean, touched = pending
            pending = None
            committed = ledger.commit(prepared)
            if clean:  # only bookings after the measurement came meanwhile
                assert committed == touched
            measured_at = asked if measured_at is None else max(measured_at, asked)
            edge = measured_at - pod_startup - window
            bookings = {k: b for k, b in bookings.items() if b[2] > edge}
            _assert_view_is(ledger.view(asked), bookings, measured_at, pod_startup, window)
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
                moved = ledger.move(key, step[2])
                if live and unseen > 0:
                    assert moved == (node, pytest.approx(unseen, rel=1e-6, abs=1e-3))
                    bookings[key] = (step[2], bandwidth, at)
                else:
                    assert moved is None
            else:
                dropped = ledger.drop(key)
                if live and unseen > 0:
                    assert dropped == (node, pytest.approx(unseen, rel=1e-6, abs=1e-3))
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
            _assert_view_is(ledger.view(asked), bookings, measured_at, pod_startup, window)


def _assert_view_is(view, bookings, measured_at, pod_startup, window):
    expected = unseen_summed_over_every_booking(bookings.values(), measured_at, pod_startup, window)
    assert view.keys() == expected.keys()
    for node, (unseen, pods) in expected.items():
        assert view[node][1] == pods
        assert view[node][0] == pytest.approx(unseen, rel=1e-6, abs=1e-3)


def test_a_long_run_keeps_exact_sums_while_forgotten_bookings_are_trimmed():
    ledger = InflightLedger(pod_startup=5, window=60)
    bookings = []
    at = 1.8e9
    for i in range(5000):
        at += 0.1
        bandwidth = 1e6 * (1 + i % 7)
        ledger.add("ab"[i % 2], bandwidth, at=at)
        bookings.append(("ab"[i % 2], bandwidth, at))
        if i % 250 == 0:
            expected = unseen_summed_over_every_booking(bookings, at, 5, 60)
            view = ledger.view(at)
            assert view.keys() == expected.keys()
            for node, (unseen, pods) in expected.items():
                assert view[node] == (pytest.approx(unseen, rel=1e-9), pods)
    # 500 s of bookings against a 65 s horizon: most were forgotten and trimmed.
    assert len(ledger._times) < 2500


def test_views_prepared_beside_a_booking_thread_sum_every_booking():
    """Real threads: one books without pause while another prepares and
    commits a new measurement time again and again; every view put in
    place counts every booking made, before and during its walk."""
    ledger = InflightLedger(pod_startup=10, window=120)
    start, bookings, done = 1.8e9, [], threading.Event()

    def book():
        for i in range(40_000):
            at = start + i * 0.0025  # 100 s of bookings
            ledger.add("abcdefg"[i % 7], float(1 + i % 5), at=at, key=i + 1)
            bookings.append(("abcdefg"[i % 7], float(1 + i % 5), at))
        done.set()

    booker = threading.Thread(target=book)
    booker.start()
    prepared_views, committed = 0, 0
    while not done.is_set():
        booked = len(bookings)
        if not booked:
            continue
        measured_at = bookings[booked - 1][2]  # bookings after it come while it is walked
        prepared = ledger.prepare(measured_at)
        if prepared is not None:
            prepared_views += 1
            committed += ledger.commit(prepared) is not None
            # Nothing is forgotten within 100 s: the view counts every booking
            # made so far (one more may be booked and not listed yet).
            listed = len(bookings)
            pods = sum(count for _, count in list(ledger.view(measured_at).values()))
            assert listed <= pods <= len(bookings) + 1
    booker.join()
    measured_at = bookings[-1][2]
    expected = unseen_summed_over_every_booking(bookings, measured_at, 10, 120)
    view = ledger.view(measured_at)
    # Only appends came beside them: every prepared view was put in place, none walked again.
    assert committed == prepared_views > 0
    assert view.keys() == expected.keys()
    for node, (unseen, pods) in expected.items():
        assert view[node] == (pytest.approx(unseen, rel=1e-9), pods)
