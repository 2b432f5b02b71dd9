"""What one testbed run measured, as the report reads it."""

from dataclasses import dataclass, field

from bench.testbed.settings import TestbedSettings


@dataclass(frozen=True)
class Placed:
    pod: str
    workload: str
    kind: str
    node: str
    preferred: list[str]
    bandwidth_source: str
    created: float  # seconds after the policy's run started
    p99: float | None = None  # a latency pod's, seconds


@dataclass
class PolicyResult:
    policy: str
    started: float
    ended: float
    latency: list[tuple[float, float]]  # (send time, round trip s or -1 lost), all latency pods
    probe: list[tuple[float, float]]  # the idle link's reference client, the same seconds
    bulk: list[tuple[str, float, float]]  # (pod, achieved bits/s, target bits/s)
    hot_node_seconds: float
    landed_hot: dict[str, int]  # kind -> pods bound to a node hot at that moment
    placements: list[Placed]
    failed_pods: int
    webhook_failures: int
    push_ratio: float = float("nan")  # the data pushes' mean transmit rate / link rate
    top_at_peak: str = ""
    top_after_fault: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass
class TestbedResult:
    settings: TestbedSettings
    idle: list[tuple[float, float]]
    policies: list[PolicyResult]
    leftovers: list[str]
    cpu_busy: float  # the machine's busy share over the run, 0..1
