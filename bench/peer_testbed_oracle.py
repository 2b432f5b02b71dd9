"""The peer testbed's oracle: its servers where the scheduler stand-in
puts them, and each client pod as near its server's pods as the oracle's
spread allows."""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.peer_testbed_services import Services
from bench.testbed.cluster import PlacedPod, Placement
from bench.testbed.network import TestbedNode
from bench.testbed.workload import Arrival
from bench.testbed.zones import zone_of


class NearestServers(Placement):
    """Each client pod on the node that keeps most of its bytes in its
    zone, then on its node (a connection per server pod, so each server pod
    takes an equal share), at most half of a workload's pods (at least one)
    on one node; ties to the node with the fewest pods. The servers (of the
    rollout in progress: ``rolling_servers``) go where kube-scheduler's
    model puts them."""

    def __init__(
        self,
        nodes: Sequence[TestbedNode],
        link_bits: float,
        services: Services,
        zone_by_node: Mapping[str, str],
        rolling_servers: Callable[[], list[PlacedPod]],
        seed: int,
    ) -> None:
        super().__init__("oracle", nodes, link_bits, seed)
        self.nodes, self.services, self.zone_by_node = nodes, services, zone_by_node
        self.rolling_servers = rolling_servers
        self.rolled: dict[str, list[int]] = {}  # this rollout's pods per node

    def choose(self, pod: Any, arrival: Arrival, api_nodes: Any) -> int | None:
        if arrival.kind == "server":
            return super().choose(pod, arrival, api_nodes)
        nodes = self.nodes
        server, replicas = self.services.clients[arrival.workload]
        where = [p.node or "" for p in self.rolling_servers() if p.arrival.workload == server]
        most_here = max(1, replicas // 2)
        own = self.rolled.setdefault(arrival.workload, [0] * len(nodes))

        def cost(index: int) -> tuple[int, int, float]:
            node = nodes[index]
            cross_zone = sum(zone_of(node) != self.zone_by_node.get(n, "") for n in where)
            cross_node = sum(node.name != n for n in where)
            return (cross_zone, cross_node, float(self.state.cpu_requested[index]))

        allowed = [i for i in range(len(nodes)) if own[i] < most_here]
        chosen = min(allowed or range(len(nodes)), key=cost)
        own[chosen] += 1
        self.state.bind(chosen, arrival.replica_set, arrival.cpu, arrival.memory)
        return chosen
