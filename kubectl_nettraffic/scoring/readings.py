"""What the sources read for one node: the values scoring works on.

Plain values with no I/O, so that scoring (pure) need not import the
sources that fill them (sources/prometheus.py, sources/metrics_server.py).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeTraffic:
    receive: float  # bytes/s
    transmit: float  # bytes/s
    link_speed: float | None  # bytes/s over included devices with a known speed
    exporters: tuple[str, ...]


@dataclass(frozen=True)
class NodeUsage:
    cpu: float  # cores
    memory: float  # bytes
