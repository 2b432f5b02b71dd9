"""The webhook's own metrics in the Prometheus text exposition format.

A few dozen lines instead of a dependency: counters with labels, one
histogram, and gauges read at scrape time. Thread-safe; one registry per app
(tests build their own). Written as prometheus/client_python writes the
format (exposition.py, generate_latest): HELP text and label values escaped,
bucket bounds as Go floats ("10.0", "+Inf"); tests/e2e/test_monitoring.py
has promtool check what a running webhook serves.
"""

import math
import threading
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

# The API server's own webhook latency buckets
# (apiserver_admission_webhook_admission_duration_seconds), so the two line up.
ADMISSION_BUCKETS = (0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0)


def number(value: float) -> str:
    """A sample value exactly as Prometheus parses it back: a whole number in
    full (``:g`` would write 1234567891 as 1.23457e+09, and a counter past a
    million would stop moving in steps below its sixth digit), anything else
    as the shortest text that reads back to the same float."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**63:
        return str(int(value))
    return repr(float(value))


def go_float(value: float) -> str:
    """A bucket bound as client_python writes it (utils.floatToGoString):
    ``10.0``, ``0.005``, ``+Inf``; past six digits before the point, Go's
    exponent form."""
    value = float(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def help_lines(name: str, text: str, kind: str) -> list[str]:
    """The HELP and TYPE lines; HELP escapes backslash and newline (not quotes)."""
    escaped = text.replace("\\", "\\\\").replace("\n", "\\n")
    return [f"# HELP {name} {escaped}", f"# TYPE {name} {kind}"]


def _labels(names: Sequence[str], values: Sequence[str]) -> str:
    if not names:
        return ""
    pairs = ",".join(f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True))
    return "{" + pairs + "}"


class Counter:
    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()) -> None:
        self.name, self.help, self.label_names = name, help_text, tuple(labels)
        self._values: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        with self._lock:
            self._values[labels] = self._values.get(labels, 0.0) + amount

    def value(self, *labels: str) -> float:
        with self._lock:
            return self._values.get(labels, 0.0)

    def values(self) -> dict[tuple[str, ...], float]:
        with self._lock:
            return dict(self._values)

    def expose(self) -> list[str]:
        lines = help_lines(self.name, self.help, "counter")
        with self._lock:
            for labels, value in sorted(self._values.items()):
                lines.append(f"{self.name}{_labels(self.label_names, labels)} {number(value)}")
        return lines


class Histogram:
    def __init__(
        self, name: str, help_text: str, buckets: Sequence[float], labels: Sequence[str] = ()
    ) -> None:
        self.name, self.help, self.buckets, self.label_names = (
            name,
            help_text,
            tuple(sorted(buckets)),
            tuple(labels),
        )
        # Per label set: the count of observations in each bucket alone (the
        # last one past every bound), then [sum, count]. Cumulative counts are
        # summed at scrape time, so an observation is one increment, not one per bucket.
        self._data: dict[tuple[str, ...], list[float]] = {}
        self._lock = threading.Lock()

    def observe(self, seconds: float, *labels: str) -> None:
        if seconds != seconds:
            return  # NaN: in no bucket, and it would make the sum NaN for good
        index = bisect_left(self.buckets, seconds)  # the first bound >= seconds
        with self._lock:
            data = self._data.get(labels)
            if data is None:
                data = self._data[labels] = [0.0] * (len(self.buckets) + 3)
            data[index] += 1
            data[-2] += seconds
            data[-1] += 1

    def expose(self) -> list[str]:
        lines = help_lines(self.name, self.help, "histogram")
        with self._lock:
            for labels, data in sorted(self._data.items()):
                lines.extend(self._series(self.label_names, labels, data))
        return lines

    def _series(
        self, label_names: tuple[str, ...], labels: tuple[str, ...], data: Sequence[float]
    ) -> list[str]:
        names = (*label_names, "le")
        lines = []
        for index, bound in enumerate(self.buckets):
            cumulative = sum(data[: index + 1])
            lines.append(
                f"{self.name}_bucket{_labels(names, (*labels, go_float(bound)))} {number(cumulative)}"
            )
        lines.append(f"{self.name}_bucket{_labels(names, (*labels, '+Inf'))} {number(data[-1])}")
        lines.append(f"{self.name}_sum{_labels(label_names, labels)} {number(data[-2])}")
        lines.append(f"{self.name}_count{_labels(label_names, labels)} {number(data[-1])}")
        return lines


class OutcomeHistogram(Histogram):
    """A histogram kept per outcome and exposed summed over outcomes.

    One ``observe(seconds, outcome)`` per request both times it and counts
    its outcome, in one call under one lock; ``counts()`` hands the counts
    per outcome to a Reading at scrape time. Under load, every call and lock
    on the admission path costs far more than in a tight loop, so one update
    replaces two (a histogram and a counter; docs/design/admission-performance.md).
    """

    def __init__(self, name: str, help_text: str, buckets: Sequence[float]) -> None:
        super().__init__(name, help_text, buckets, labels=("outcome",))

    def counts(self) -> dict[tuple[str, ...], float]:
        with self._lock:
            return {labels: data[-1] for labels, data in self._data.items()}

    def expose(self) -> list[str]:
        lines = help_lines(self.name, self.help, "histogram")
        with self._lock:
            summed = [sum(column) for column in zip(*self._data.values(), strict=True)]
        if summed:
            lines.extend(self._series((), (), summed))
        return lines


class Gauge:
    def __init__(self, name: str, help_text: str, read: Callable[[], float | None]) -> None:
        self.name, self.help, self.read = name, help_text, read

    def expose(self) -> list[str]:
        value = self.read()
        lines = help_lines(self.name, self.help, "gauge")
        if value is not None and not math.isnan(value):
            lines.append(f"{self.name} {number(value)}")
        return lines


class Reading:
    """A labelled counter or gauge whose values live elsewhere, read at scrape time."""

    def __init__(
        self,
        name: str,
        help_text: str,
        kind: str,
        labels: Sequence[str],
        read: Callable[[], Mapping[tuple[str, ...], float]],
    ) -> None:
        self.name, self.help, self.kind, self.label_names, self.read = (
            name,
            help_text,
            kind,
            tuple(labels),
            read,
        )

    def expose(self) -> list[str]:
        lines = help_lines(self.name, self.help, self.kind)
        for labels, value in sorted(self.read().items()):
            lines.append(f"{self.name}{_labels(self.label_names, labels)} {number(value)}")
        return lines


class Exposable(Protocol):
    def expose(self) -> list[str]: ...


M = TypeVar("M", bound=Exposable)


class Registry:
    def __init__(self) -> None:
        self.metrics: list[Exposable] = []

    def add(self, metric: M) -> M:
        self.metrics.append(metric)
        return metric

    def expose(self) -> str:
        return "\n".join(line for metric in self.metrics for line in metric.expose()) + "\n"
