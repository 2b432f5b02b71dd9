"""The webhook's metrics exposition: what Prometheus reads from /metrics."""

import random
import re

from webhook.metrics import (
    ADMISSION_BUCKETS,
    Counter,
    Histogram,
    OutcomeHistogram,
    Reading,
    Registry,
)


def _samples(text: str) -> dict[str, float]:
    return {
        match[1]: float(match[2])
        for match in re.finditer(r"^(\S+) (\S+)$", text, re.MULTILINE)
        if not match[1].startswith("#")
    }


def test_histogram_buckets_are_cumulative_and_bounds_inclusive():
    histogram = Histogram("latency_seconds", "help", ADMISSION_BUCKETS)
    rng = random.Random(5)
    observed = [0.005, 0.025, 25.0, 30.0, 0.0] + [rng.uniform(0, 30) for _ in range(500)]
    for value in observed:
        histogram.observe(value)
    samples = _samples("\n".join(histogram.expose()))
    for bound in ADMISSION_BUCKETS:
        expected = sum(1 for value in observed if value <= bound)  # le: at or below
        assert samples[f'latency_seconds_bucket{{le="{bound:g}"}}'] == expected, bound
    assert samples['latency_seconds_bucket{le="+Inf"}'] == len(observed)
    assert samples["latency_seconds_count"] == len(observed)
    assert abs(samples["latency_seconds_sum"] - sum(observed)) < 1e-3


def test_histogram_keeps_label_sets_apart_and_sorts_its_bounds():
    histogram = Histogram("h", "help", (1.0, 0.1), labels=("verb",))
    histogram.observe(0.05, "filter")
    histogram.observe(0.5, "prioritize")
    samples = _samples("\n".join(histogram.expose()))
    assert samples['h_bucket{verb="filter",le="0.1"}'] == 1
    assert samples['h_bucket{verb="prioritize",le="0.1"}'] == 0
    assert samples['h_bucket{verb="prioritize",le="1"}'] == 1


def test_a_reading_exposes_another_counter_at_scrape_time():
    outcomes = Counter("reviews_total", "help", ("outcome",))
    registry = Registry()
    registry.add(outcomes)
    registry.add(
        Reading("mutations_total", "help", "counter", (), lambda: {(): outcomes.value("mutated")})
    )
    outcomes.inc("mutated")
    outcomes.inc("mutated")
    outcomes.inc("skipped")
    samples = _samples(registry.expose())
    assert samples["mutations_total"] == 2
    assert samples['reviews_total{outcome="skipped"}'] == 1


def test_an_outcome_histogram_exposes_one_histogram_and_counts_each_outcome():
    plain = Histogram("h", "help", ADMISSION_BUCKETS)
    by_outcome = OutcomeHistogram("h", "help", ADMISSION_BUCKETS)
    assert by_outcome.expose() == plain.expose() and by_outcome.counts() == {}
    rng = random.Random(3)
    outcomes = ["mutated"] * 40 + ["skipped"] * 7 + ["ignored"] * 3
    for outcome in outcomes:
        seconds = rng.uniform(0, 0.2)
        plain.observe(seconds)
        by_outcome.observe(seconds, outcome)
    # Summed over outcomes, line for line what one histogram of every admission shows
    # (the sums to the exposition's 6 decimals).
    assert by_outcome.expose() == plain.expose()
    assert by_outcome.counts() == {("mutated",): 40, ("skipped",): 7, ("ignored",): 3}
