"""The webhook's metrics exposition: what Prometheus reads from /metrics."""

import random
import re

import pytest

from webhook.metrics import (
    ADMISSION_BUCKETS,
    Counter,
    Histogram,
    OutcomeHistogram,
    Reading,
    Registry,
    go_float,
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
        assert samples[f'latency_seconds_bucket{{le="{float(bound)!r}"}}'] == expected, bound
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
    assert samples['h_bucket{verb="prioritize",le="1.0"}'] == 1


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
    # Summed over outcomes, line for line what one histogram of every admission
    # shows; the sums added in another order, equal to the last bits.
    summed, single = by_outcome.expose(), plain.expose()
    assert [line for line in summed if "_sum" not in line] == [
        line for line in single if "_sum" not in line
    ]
    assert _samples("\n".join(summed))["h_sum"] == pytest.approx(
        _samples("\n".join(single))["h_sum"]
    )
    assert by_outcome.counts() == {("mutated",): 40, ("skipped",): 7, ("ignored",): 3}


def test_large_counters_are_exposed_exactly():
    """A counter is written in full, however large: in ``:g`` format
    1,234,567,891 was 1.23457e+09, and a counter past a million stopped
    moving in steps below its sixth digit, so rate() of it read zero."""
    counter = Counter("big_total", "help", ("kind",))
    counter.inc("a", amount=1_234_567_891)
    counter.inc("b", amount=2**53)
    counter.inc("c", amount=1_234_567)
    counter.inc("c")
    histogram = Histogram("latency_seconds", "help", ADMISSION_BUCKETS)
    for _ in range(1_000_001):
        histogram.observe(0.001)
    text = "\n".join([*counter.expose(), *histogram.expose()])
    assert 'big_total{kind="a"} 1234567891\n' in text
    assert 'big_total{kind="b"} 9007199254740992\n' in text
    assert 'big_total{kind="c"} 1234568\n' in text
    assert "latency_seconds_count 1000001" in text
    samples = _samples(text)
    assert samples['big_total{kind="b"}'] == 2**53
    assert samples["latency_seconds_sum"] == sum([0.001] * 1_000_001)  # every digit kept


def test_values_that_are_not_whole_read_back_as_the_same_float():
    from webhook.metrics import number

    for value in (0.1, 1 / 3, 1e-9, 123456.789012345, 1e22 + 0.5, -2.5):
        assert float(number(value)) == value
    assert [number(v) for v in (float("inf"), float("-inf"), float("nan"))] == [
        "+Inf",
        "-Inf",
        "NaN",
    ]


def test_help_text_is_escaped_as_the_format_asks():
    counter = Counter("odd_total", 'a back\\slash\nand a newline, "quoted"')
    assert counter.expose()[0] == '# HELP odd_total a back\\\\slash\\nand a newline, "quoted"'


def test_a_nan_observation_leaves_the_histogram_as_it_was():
    histogram = Histogram("latency_seconds", "help", ADMISSION_BUCKETS)
    histogram.observe(0.2)
    histogram.observe(float("nan"))
    samples = _samples("\n".join(histogram.expose()))
    assert samples["latency_seconds_sum"] == 0.2 and samples["latency_seconds_count"] == 1
    assert samples['latency_seconds_bucket{le="0.005"}'] == 0


@pytest.mark.parametrize(
    ("bound", "text"),
    [(10, "10.0"), (0.005, "0.005"), (2.5, "2.5"), (1e7, "1e+07"), (123456789.0, "1.23456789e+08")],
)
def test_bucket_bounds_are_written_as_client_python_writes_them(bound, text):
    assert go_float(bound) == text
    histogram = Histogram("h", "help", (bound,))
    histogram.observe(0.0)
    assert f'h_bucket{{le="{text}"}} 1' in histogram.expose()


def test_the_operators_guide_lists_every_metric():
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "webhook", "webhook_metrics.py"), encoding="utf-8") as source:
        names = set(re.findall(r'"(nettraffic_[a-z_]+)"', source.read()))
    with open(os.path.join(root, "docs", "operations.md"), encoding="utf-8") as guide:
        documented = set(re.findall(r"`(nettraffic_[a-z_]+)", guide.read()))
    assert names and not names - documented
