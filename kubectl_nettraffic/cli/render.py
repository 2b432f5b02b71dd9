"""Pure formatting for ``kubectl nettraffic top``: the scores document in,
text out. No I/O, so every output form has a golden test."""

import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import yaml

from kubectl_nettraffic.units import format_duration, format_rate

SORT_KEYS = ("score", "traffic", "rx", "tx", "cpu", "memory", "name")
# top pods and top workloads (cli/top_pods.py)
POD_SORT_KEYS = ("traffic", "rx", "tx", "learned", "name")
WORKLOAD_SORT_KEYS = (*POD_SORT_KEYS, "pods")
_SORT_FIELDS = {
    "traffic": "trafficBytesPerSecond",
    "rx": "receiveBytesPerSecond",
    "tx": "transmitBytesPerSecond",
    "cpu": "cpuUsageRatio",
    "memory": "memoryUsageRatio",
}

GREEN, YELLOW, RED, DIM, RESET = "\x1b[32m", "\x1b[33m", "\x1b[31m", "\x1b[2m", "\x1b[0m"
BAR_WIDTH = 10


def sort_rows(rows: Sequence[Mapping[str, Any]], key: str) -> list[Mapping[str, Any]]:
    """``score``: best first (the document's order); measurements: busiest first; ``name``: A-Z."""
    if key == "score":
        return list(rows)
    if key == "name":
        return sorted(rows, key=lambda r: r["name"])
    field = _SORT_FIELDS[key]
    return sorted(rows, key=lambda r: (r.get(field) is None, -(r.get(field) or 0.0), r["name"]))


def _percent(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value * 100:.0f}%"


def data_age(document: Mapping[str, Any], now: float) -> float:
    generated = datetime.strptime(document["generatedAt"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return max(0.0, now - generated.timestamp())


def _status(row: Mapping[str, Any], stale: bool) -> str:
    if not row["eligible"]:
        return str(row["reason"] or "ineligible")
    if row["reason"]:
        return str(row["reason"])
    return "stale" if stale else "Ready"


def _bar(score: int) -> str:
    filled = round(score * BAR_WIDTH / 100)
    return "█" * filled + "░" * (BAR_WIDTH - filled)


def _colour(score: int, eligible: bool) -> str:
    if not eligible:
        return DIM
    return GREEN if score >= 67 else YELLOW if score >= 34 else RED


def table(
    document: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    now: float,
    wide: bool = False,
    headers: bool = True,
    bits: bool = False,
    colour: bool = False,
    bars: bool = False,
    previous: Mapping[str, int] | None = None,
) -> str:
    """kubectl-style columns; ``previous`` (name -> score) adds the change since the last frame."""
    age = format_duration(data_age(document, now))
    stale = bool(document.get("stale"))
    link_known = any(r.get("linkUtilization") is not None for r in rows)
    columns = ["NAME", "RX/s", "TX/s", "TRAFFIC"]
    if link_known:
        columns.append("LINK%")
    columns += ["CPU%", "MEM%", "SCORE"]
    if previous is not None:
        columns.append("CHANGE")
    if bars:
        columns.append("")
    columns.append("AGE")
    if wide:
        columns += ["IN-FLIGHT", "TIER", "SOURCE"]
    columns.append("STATUS")

    lines: list[list[str]] = []
    colours: list[str] = []
    for row in rows:
        cells = [
            row["name"],
            format_rate(row.get("receiveBytesPerSecond"), bits),
            format_rate(row.get("transmitBytesPerSecond"), bits),
            format_rate(row.get("trafficBytesPerSecond"), bits),
        ]
        if link_known:
            cells.append(_percent(row.get("linkUtilization")))
        cells += [
            _percent(row.get("cpuUsageRatio")),
            _percent(row.get("memoryUsageRatio")),
            str(row["score"]),
        ]
        if previous is not None:
            before = previous.get(row["name"])
            delta = 0 if before is None else row["score"] - before
            cells.append("=" if delta == 0 else f"{delta:+d}")
        if bars:
            cells.append(_bar(row["score"]))
        cells.append(age)
        if wide:
            cells += [
                str(row.get("inflightPods", 0)),
                row.get("tier") or "-",
                str(document.get("source", "-")),
            ]
        cells.append(_status(row, stale))
        lines.append(cells)
        colours.append(_colour(row["score"], row["eligible"]) if colour else "")

    texts = aligned(([columns] if headers else []) + lines)
    out = texts[:1] if headers else []
    for text, tint in zip(texts[len(out) :], colours, strict=True):
        out.append(f"{tint}{text}{RESET}" if tint else text)
    return "\n".join(out) + ("\n" if out else "")


def aligned(lines: Sequence[Sequence[str]]) -> list[str]:
    """Cells padded to their column's widest, three spaces apart, as kubectl prints tables."""
    if not lines:
        return []
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return [
        "   ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    ]


def as_json(document: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps({**document, "nodes": list(rows)}, indent=2) + "\n"


def as_yaml(document: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    return str(yaml.safe_dump({**document, "nodes": [dict(r) for r in rows]}, sort_keys=False))
