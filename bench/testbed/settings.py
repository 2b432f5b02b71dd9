"""What one testbed run is set to: its nodes, links, pods, placements and
timing, and the suite's short form."""

from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.testbed.workload import Mix

POLICIES = ("nettraffic", "default", "optimum")


@dataclass(frozen=True)
class TestbedSettings:
    nodes: int = 8
    hot_nodes: int = 2
    link_bits: float = 50e6
    mix: Mix = field(default_factory=Mix)
    hold: float = 30.0  # seconds after the last arrival, every pod running
    policies: Sequence[str] = POLICIES
    faults: bool = True  # also run nettraffic with the faults
    # Creation to binding, seconds, uniform: kube-scheduler binds a pod tens
    # to hundreds of milliseconds after it is created (its scheduling cycle,
    # then the Binding call through a rate-limited client).
    bind_delay: tuple[float, float] = (0.05, 0.25)
    seed: int = 1
    scrape_interval: float = 2.0
    # The product's window and refresh, scaled to a run of minutes (its
    # defaults, 2m and 15s, are for 15-30 s scrapes).
    window: float = 10.0
    refresh: float = 2.0
    idle_seconds: float = 10.0  # the idle calibration at start
    # TCP's bursts as the kernel sizes them for a peer microseconds away
    # (up to 64 KiB), instead of by pacing rate alone (bench/testbed/network.py).
    kernel_tcp_bursts: bool = False


def short_settings() -> TestbedSettings:
    """The suite's short form: 4 nodes, 2 of them hot, a bulk pod and three
    latency pods, nettraffic against the default scheduler."""
    return TestbedSettings(
        nodes=4,
        hot_nodes=2,
        mix=Mix(
            bulk_workloads=(("ingest-annotated", "annotated"),),
            bulk_per_workload=1,
            latency_pods=3,
            exiting_pods=0,
            spread=8.0,
        ),
        hold=8.0,
        policies=("nettraffic", "default"),
        faults=False,
        idle_seconds=3.0,
    )
