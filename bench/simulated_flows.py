"""The peers simulation's flow reader: the service graph's pairs as the
learner's flow query would read them from Prometheus."""

from collections.abc import Iterable

from bench.peer_cluster import Graph
from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.peer_traffic import PeerReport, pairs_in


class SimulatedFlows:
    """The learner's flow reader: the pairs as Istio's series would carry
    them (one reporter: the caller as source, the called as destination),
    matched by the product's own pairs_in."""

    def __init__(self, graph: Graph, settings: Settings) -> None:
        self.graph, self.settings = graph, settings

    def read(
        self, known: Iterable[Workload], at: float, waypoints: frozenset[tuple[str, str]]
    ) -> PeerReport:
        result = [
            {
                "metric": {
                    "source_workload": self.graph.names[a],
                    "source_workload_namespace": "default",
                    "destination_workload": self.graph.names[b],
                    "destination_workload_namespace": "default",
                },
                "value": [0, f"{rate:.3f}"],
            }
            for (a, b), rate in self.graph.pairs.items()
        ]
        return pairs_in(result, known, self.settings.peers, waypoints)
