"""Parsing and formatting of the two unit families the config uses.

Durations are Go/Prometheus style (``15s``, ``2m``, ``1h30m``) because that is
what operators type into Prometheus and Kubernetes manifests already.
Bandwidths and resource amounts are Kubernetes quantities (``1Mi``, ``500k``,
``3800m``) for the same reason.

No import of the kubernetes client here: every CLI call imports this
module, and the client takes a third of a second to import.
"""

import math
import re
from datetime import UTC, datetime
from decimal import Decimal

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_DURATION_SECONDS = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 7 * 86400.0,
    "y": 365 * 86400.0,
}


def parse_duration(text: str) -> float:
    """``"1m30s"`` -> 90.0 seconds. Raises ValueError naming the text."""
    raw = str(text).strip()
    position = 0
    total = 0.0
    for match in _DURATION_PART.finditer(raw):
        if match.start() != position:
            break
        total += float(match.group(1)) * _DURATION_SECONDS[match.group(2)]
        position = match.end()
    if not raw or position != len(raw):
        raise ValueError(f"{text!r} is not a duration; write it like 15s, 2m or 1h30m")
    return total


# The serialization format of apimachinery's resource.Quantity (its doc
# comment in k8s.io/apimachinery/pkg/api/resource/quantity.go): a signed
# decimal number, then a binary suffix (Ki..Ei), a decimal exponent (e3,
# E-2) or a decimal suffix (n, u, m, none, k, M, G, T, P, E).
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<binary>[KMGTPE])i|[eE](?P<exponent>[+-]?[0-9]+)|(?P<decimal>[numkMGTPE]?))"
)
_DECIMAL_POWER = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_POWER = {"K": 10, "M": 20, "G": 30, "T": 40, "P": 50, "E": 60}


def parse_quantity(text: str | int | float) -> float:
    """``"1Mi"`` -> 1048576.0, ``"3800m"`` -> 3.8, ``"1e3"`` -> 1000.0: a
    Kubernetes quantity, as the API server reads one; finite values only.
    Raises ValueError naming the text."""
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a quantity; write it like 1Mi, 500k or 1000")
    if isinstance(text, int | float):
        value = float(text)
    else:
        match = _QUANTITY.fullmatch(str(text))
        if match is None:
            raise ValueError(f"{text!r} is not a quantity; write it like 1Mi, 500k or 1000")
        number = Decimal(match["number"])
        try:
            if match["binary"]:
                value = float(number * 2 ** _BINARY_POWER[match["binary"]])
            else:
                power = match["exponent"] or _DECIMAL_POWER[match["decimal"]]
                value = float(number.scaleb(int(power)))
        except ArithmeticError:  # decimal's Overflow: an exponent past its range
            value = math.inf
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite quantity")
    return value


def format_duration(seconds: float) -> str:
    """Short human age: ``42s``, ``3m10s``, ``2h5m``, ``3d``."""
    if not math.isfinite(seconds):
        return "-"
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        minutes, secs = divmod(whole, 60)
        return f"{minutes}m{secs}s" if secs else f"{minutes}m"
    if whole < 86400:
        hours, rest = divmod(whole, 3600)
        minutes = rest // 60
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    return f"{whole // 86400}d"


def promql_duration(seconds: float) -> str:
    """A range PromQL accepts in every version: whole milliseconds or seconds."""
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


def format_rate(bytes_per_second: float | None, bits: bool = False) -> str:
    """SI bytes/s (``12.3MB/s``) or bits/s (``98.4Mb/s``); ``-`` for no data."""
    if bytes_per_second is None or not math.isfinite(bytes_per_second):
        return "-"
    value = bytes_per_second * (8 if bits else 1)
    unit = "b/s" if bits else "B/s"
    for prefix in ("", "k", "M", "G", "T"):
        if abs(value) < 999.5 or prefix == "T":
            return f"{value:.0f}{prefix}{unit}" if prefix == "" else f"{value:.1f}{prefix}{unit}"
        value /= 1000.0
    raise AssertionError("unreachable")


def rfc3339(epoch: float) -> str:
    """An epoch time as RFC 3339 in UTC, whole seconds (as the API server writes times)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
