"""Cost of the in-flight ledger under a long burst: 1,000 admissions/s for
150 s over 5,000 nodes (150,000 bookings inside podStartup + window), beside
the definition summed over every booking, which is what a refresh cost
before the ledger kept running sums.

    python -m bench.ledger
"""

import argparse
import time
from collections.abc import Callable

from bench.report import write_section
from kubectl_nettraffic.ledger import InflightLedger
from tests.harness.ledger import unseen_summed_over_every_booking

NODES, RATE, SECONDS = 5000, 1000, 150
POD_STARTUP, WINDOW = 10.0, 120.0
START = 1.8e9


def best_of(runs: int, action: Callable[[], object]) -> float:
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return min(timings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    bookings = [(f"node-{i % NODES:05d}", 1e6, START + i / RATE) for i in range(RATE * SECONDS)]
    booking_seconds, refresh_seconds = [], []
    for _ in range(3):
        ledger = InflightLedger(POD_STARTUP, WINDOW)
        ledger.view(START)
        started = time.perf_counter()
        for node, bandwidth, at in bookings:
            ledger.add(node, bandwidth, at)
        booking_seconds.append((time.perf_counter() - started) / len(bookings))
        measured_at = START + SECONDS
        started = time.perf_counter()
        view = ledger.view(measured_at)
        refresh_seconds.append(time.perf_counter() - started)
    expected = unseen_summed_over_every_booking(bookings, measured_at, POD_STARTUP, WINDOW)
    assert view.keys() == expected.keys()
    assert all(abs(view[n][0] - expected[n][0]) <= 1e-6 * expected[n][0] for n in expected)
    naive = best_of(
        3, lambda: unseen_summed_over_every_booking(bookings, measured_at, POD_STARTUP, WINDOW)
    )
    rows = [
        "| cost | running sums (ledger.py) | summed over every booking |",
        "|---|---|---|",
        f"| one booking | {min(booking_seconds) * 1e6:.1f} µs | (append) |",
        f"| a new measurement time | {min(refresh_seconds) * 1e3:.1f} ms | {naive * 1e3:.1f} ms |",
    ]
    table = "\n".join(rows)
    print(table)
    if not args.no_write:
        write_section(
            "ledger",
            "In-flight ledger under a long burst",
            "python -m bench.ledger",
            f"{RATE:,} admissions/s for {SECONDS} s over {NODES:,} nodes: "
            f"{RATE * SECONDS:,} bookings not yet fully visible (podStartup {POD_STARTUP:g} s, "
            f"window {WINDOW:g} s). Best of 3; both give the same sums (checked).\n\n{table}",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
