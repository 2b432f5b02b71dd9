"""The peer testbed's figures for one placement over one rollout, and the
testbed's constants."""

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from bench.testbed.stats import percentiles

NODES = 6
ZONE_DELAY_MS = 0.5  # each way
REQUESTS_PER_SECOND = 100
RESPONSE_BYTES = 8000
# The default twice: the gap between its two rollouts is the run-to-run
# noise the calm verdicts allow.
POLICIES = ("default", "default-again", "nettraffic", "nettraffic-peers", "oracle")
# Goals against the default scheduler in the same run (issue 62).
CLIENTS_P99_GOAL, CROSS_ZONE_GOAL = 0.63, 0.40


@dataclass
class Figures:
    """What one placement's clients felt and sent over ``hold`` seconds."""

    policy: str
    p99_ms: float  # pooled over every client pod
    pod_p99s_ms: list[float]
    cross_zone: float  # share of the clients' bytes to and from servers
    inter_node: float
    bytes_per_second: float
    webhook_failures: int = 0
    # The share of those bytes that would cross zones with every client pod
    # in the zone holding most of its server's pods: what no placement of
    # the clients goes below, where the servers run.
    least_cross_zone: float = float("nan")
    # The probe's p99 (a client and its server in one zone, on two nodes,
    # outside the placement) over the same seconds, and on the idle testbed.
    probe_p99_ms: float = float("nan")
    idle_probe_ms: float = float("nan")
    zones: dict[str, tuple[int, int]] = field(default_factory=dict)  # workload -> pods, zones

    def pods_near(self) -> int:
        """Client pods whose own p99 is within half the zones' round trip of
        the probe's: their requests stayed in their zone (one in a hundred
        across zones adds the whole round trip to the p99)."""
        return sum(p99 <= self.probe_p99_ms + ZONE_DELAY_MS for p99 in self.pod_p99s_ms)


def p99(pairs: Sequence[tuple[float, float]]) -> float:
    """In seconds, of (send time, round trip) pairs, as bench.testbed reads them."""
    return percentiles(pairs, (0.99,))[0]


def median_pod_p99(figures: Figures) -> float:
    return statistics.median(figures.pod_p99s_ms) if figures.pod_p99s_ms else float("nan")


def least_cross_zone(server_zones: Sequence[str]) -> float:
    """The least share of a client pod's bytes that cross zones wherever it
    runs, its connections spread evenly over server pods in ``server_zones``
    (one entry per pod): in the zone that holds most of them."""
    if not server_zones:
        return float("nan")
    return 1 - max(map(server_zones.count, server_zones)) / len(server_zones)


def zones_per_workload(placed: Iterable[tuple[str, str]]) -> dict[str, tuple[int, int]]:
    """(workload, zone) of each pod -> each workload's pods and zones."""
    zones: dict[str, list[str]] = {}
    for workload, zone in placed:
        zones.setdefault(workload, []).append(zone)
    return {w: (len(found), len(set(found))) for w, found in zones.items()}
