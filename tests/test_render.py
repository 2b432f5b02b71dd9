"""Golden outputs of `top` for table, wide, json and yaml (pure rendering).

Regenerate after a deliberate change with: UPDATE_GOLDEN=1 pytest tests/test_render.py
"""

import os
from datetime import UTC, datetime

import pytest

from kubectl_nettraffic.cli import render

GOLDEN = os.path.join(os.path.dirname(__file__), "golden")
NOW = datetime(2026, 11, 22, 3, 0, 42, tzinfo=UTC).timestamp()

DOCUMENT = {
    "generatedAt": "2026-11-22T03:00:00Z",
    "source": "prometheus",
    "window": "2m",
    "stale": False,
    "nodes": [
        {
            "name": "edge-b",
            "receiveBytesPerSecond": 120000.0,
            "transmitBytesPerSecond": 80000.0,
            "trafficBytesPerSecond": 200000.0,
            "linkUtilization": 0.0016,
            "cpuUsageRatio": 0.21,
            "memoryUsageRatio": 0.4,
            "inflightPods": 0,
            "inflightBytesPerSecond": 0.0,
            "score": 99,
            "tier": "1",
            "eligible": True,
            "reason": None,
        },
        {
            "name": "edge-a",
            "receiveBytesPerSecond": 41000000.0,
            "transmitBytesPerSecond": 2500000.0,
            "trafficBytesPerSecond": 43500000.0,
            "linkUtilization": 0.348,
            "cpuUsageRatio": 0.55,
            "memoryUsageRatio": 0.61,
            "inflightPods": 2,
            "inflightBytesPerSecond": 2097152.0,
            "score": 64,
            "tier": "2",
            "eligible": True,
            "reason": None,
        },
        {
            "name": "data-1",
            "receiveBytesPerSecond": 118000000.0,
            "transmitBytesPerSecond": 3000000.0,
            "trafficBytesPerSecond": 121000000.0,
            "linkUtilization": 0.968,
            "cpuUsageRatio": 0.9,
            "memoryUsageRatio": 0.72,
            "inflightPods": 0,
            "inflightBytesPerSecond": 0.0,
            "score": 0,
            "tier": "4",
            "eligible": True,
            "reason": None,
        },
        {
            "name": "gpu-0",
            "receiveBytesPerSecond": None,
            "transmitBytesPerSecond": None,
            "trafficBytesPerSecond": None,
            "linkUtilization": None,
            "cpuUsageRatio": None,
            "memoryUsageRatio": None,
            "inflightPods": 0,
            "inflightBytesPerSecond": 0.0,
            "score": 0,
            "tier": None,
            "eligible": False,
            "reason": "tainted nvidia.com/gpu:NoSchedule",
        },
    ],
}


def _golden(name: str, text: str) -> None:
    path = os.path.join(GOLDEN, name)
    if os.environ.get("UPDATE_GOLDEN"):
        with open(path, "w") as handle:
            handle.write(text)
    with open(path) as handle:
        assert text == handle.read()


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("top-table.txt", lambda rows: render.table(DOCUMENT, rows, NOW)),
        ("top-wide.txt", lambda rows: render.table(DOCUMENT, rows, NOW, wide=True)),
        (
            "top-bits-no-headers.txt",
            lambda rows: render.table(DOCUMENT, rows, NOW, bits=True, headers=False),
        ),
        (
            "top-terminal.txt",
            lambda rows: render.table(DOCUMENT, rows, NOW, colour=True, bars=True),
        ),
        ("top.json", lambda rows: render.as_json(DOCUMENT, rows)),
        ("top.yaml", lambda rows: render.as_yaml(DOCUMENT, rows)),
    ],
)
def test_golden(name, make):
    _golden(name, make(DOCUMENT["nodes"]))


def test_sorting():
    names = lambda key: [r["name"] for r in render.sort_rows(DOCUMENT["nodes"], key)]  # noqa: E731
    assert names("score") == ["edge-b", "edge-a", "data-1", "gpu-0"]
    assert names("traffic") == [
        "data-1",
        "edge-a",
        "edge-b",
        "gpu-0",
    ]  # busiest first, no data last
    assert names("tx") == ["data-1", "edge-a", "edge-b", "gpu-0"]
    assert names("name") == ["data-1", "edge-a", "edge-b", "gpu-0"]


def test_watch_shows_the_change_since_the_last_frame():
    text = render.table(DOCUMENT, DOCUMENT["nodes"], NOW, previous={"edge-b": 90, "edge-a": 64})
    lines = text.splitlines()
    assert "CHANGE" in lines[0]
    assert "+9" in lines[1] and "=" in lines[2]


def test_no_colour_codes_unless_asked():
    assert "\x1b[" not in render.table(DOCUMENT, DOCUMENT["nodes"], NOW)
