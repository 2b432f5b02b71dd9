"""Cost of the bookings store (inflight/bookings.py) under a long burst:
1,000 admissions/s for 150 s over 5,000 nodes (150,000 bookings inside
podStartup + window), beside the definition summed over every booking,
which is what a refresh cost before the store kept running sums; and what
holding the bookings adds to a full garbage collection, against the same
numbers held in lists. Three runs: the median and the worst.

    python -m bench.ledger
"""

import gc
import statistics
import time
from collections.abc import Callable

from bench.report import bench_parser, write_section
from harness.ledger import unseen_summed_over_every_booking
from kubectl_nettraffic.inflight.bookings import Bookings

NODES, RATE, SECONDS = 5000, 1000, 150
POD_STARTUP, WINDOW = 10.0, 120.0
START = 1.8e9


def timings(runs: int, action: Callable[[], object]) -> list[float]:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        seconds.append(time.perf_counter() - started)
    return seconds


def _median_worst(seconds: list[float], scale: float, unit: str) -> str:
    return f"{statistics.median(seconds) * scale:.1f} / {max(seconds) * scale:.1f} {unit}"


def full_collection_ms() -> float:
    """The median of five full collections."""
    return statistics.median(timings(5, gc.collect)) * 1e3


def collection_rows(bookings: list[tuple[str, float, float]]) -> list[str]:
    """A full garbage collection stops every thread; what held bookings add to it."""
    baseline = full_collection_ms()
    store = Bookings(POD_STARTUP, WINDOW)
    for node, bandwidth, at in bookings:
        store.add(node, bandwidth, at)
    with_store = full_collection_ms()
    del store
    # The same numbers in lists, three per node, as the ledger kept them before.
    as_lists: dict[str, tuple[list[float], list[float], list[float]]] = {}
    for node, bandwidth, at in bookings:
        times, total, weighted = as_lists.setdefault(node, ([], [0.0], [0.0]))
        times.append(at)
        total.append(total[-1] + bandwidth)
        weighted.append(weighted[-1] + bandwidth * at)
    with_lists = full_collection_ms()
    return [
        "| a full garbage collection, every thread stopped | time |",
        "|---|---|",
        f"| nothing more held | {baseline:.1f} ms |",
        f"| the store holding the bookings (columns) | {with_store:.1f} ms |",
        f"| the same numbers held in lists, as per-node lists kept them before | {with_lists:.1f} ms |",
    ]


def main(argv: list[str] | None = None) -> int:
    args = bench_parser(__doc__).parse_args(argv)
    bookings = [(f"node-{i % NODES:05d}", 1e6, START + i / RATE) for i in range(RATE * SECONDS)]
    booking_seconds, refresh_seconds = [], []
    for _ in range(3):
        store = Bookings(POD_STARTUP, WINDOW)
        store.measure(START)
        started = time.perf_counter()
        for node, bandwidth, at in bookings:
            store.add(node, bandwidth, at)
        booking_seconds.append((time.perf_counter() - started) / len(bookings))
        measured_at = START + SECONDS
        started = time.perf_counter()
        store.measure(measured_at)
        refresh_seconds.append(time.perf_counter() - started)
        view = store.view
    expected = unseen_summed_over_every_booking(bookings, measured_at, POD_STARTUP, WINDOW)
    assert view.keys() == expected.keys()
    assert all(abs(view[n][0] - expected[n][0]) <= 1e-6 * expected[n][0] for n in expected)
    naive = timings(
        3, lambda: unseen_summed_over_every_booking(bookings, measured_at, POD_STARTUP, WINDOW)
    )
    rows = [
        "| cost (median / worst of 3) | running sums (bookings.py) | summed over every booking |",
        "|---|---|---|",
        f"| one booking | {_median_worst(booking_seconds, 1e6, 'µs')} | (append) |",
        f"| a new measurement time | {_median_worst(refresh_seconds, 1e3, 'ms')} "
        f"| {_median_worst(naive, 1e3, 'ms')} |",
    ]
    gc_rows = collection_rows(bookings)
    table = "\n".join([*rows, "", *gc_rows])
    print(table)
    if not args.no_write:
        write_section(
            "ledger",
            "Bookings store under a long burst",
            "python -m bench.ledger",
            f"{RATE:,} admissions/s for {SECONDS} s over {NODES:,} nodes: "
            f"{RATE * SECONDS:,} bookings not yet fully visible (podStartup {POD_STARTUP:g} s, "
            f"window {WINDOW:g} s). Median and worst of 3; both give the same sums (checked).\n\n{table}",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
