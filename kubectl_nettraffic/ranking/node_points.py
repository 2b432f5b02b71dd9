"""The points each node gains or loses for one pod's choice, beside its live
score: one mapping, read by the one choice (candidates.py's
``CandidateHeap.best``) and by nothing else.

For a pod of ``bandwidth`` bytes/s, a node n of link penalty p(n) (points
per byte/s) in zone z(n):

    points(n) = pull(n)                          its peers there or in its zone
              - (p(n) - p_fastest) * bandwidth   what the pod fills of a slower link
              - p(n) * others    (not owned)     what another replica may steer there unseen
              - 5 * pods(n)      (unlearned)     its workload's pods in flight there
              = -inf where the pod may not go    (nodeSelector, required affinity,
                                                  a zone its workload's spread bars)

Why each term: docs/design/behaviour.md. The declined nodes' points are in
the heaps already (candidates.py). Every term but the pull and the
unlearned pods is the same on every node of a heap's group (zone, link
speed, ownership), so a group's ``bound`` is exact there; the pull of a
node beyond its zone's is ``raised``; a zone the spread bars has no bound
(-inf).
"""

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Protocol

from kubectl_nettraffic.kube.nodes import Node
from kubectl_nettraffic.ranking.candidates import Group
from kubectl_nettraffic.ranking.handicaps import POINTS_PER_POD
from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.spread import Spread


class Pull(Protocol):
    """The points a pod's peers add to some nodes (steering/peer_pull.py's PodPull)."""

    # False: its workload's second pod may join its first in a zone (scoring/spread.py).
    keeps_zones: bool

    def points(self, score: NodeScore) -> float:
        """What the node gains: its zone's part and its own."""
        ...

    def zone_points(self, zone: str) -> float:
        """The most a node of ``zone`` gains for the zone alone."""
        ...

    def own_nodes(self) -> Iterator[tuple[str, float]]:
        """The nodes that gain more than their zone, as (node, the points
        beyond it), the most first."""
        ...


class NodePoints:
    """One pod's points per node (the module's docstring), over the groups
    of the heap it is chosen from."""

    __slots__ = (
        "_bandwidth",
        "_bounds",
        "_fits",
        "_groups",
        "_least",
        "_link",
        "_nodes",
        "_others",
        "_pull",
        "_spread",
        "_unlearned",
        "uniform",
    )

    def __init__(
        self,
        groups: Sequence[Group],
        least_penalty: float,
        bandwidth: float,
        others_unseen: float,
        unlearned: Mapping[str, int] | None = None,
        pull: Pull | None = None,
        fits: Callable[[Node], bool] | None = None,
        nodes: Mapping[str, Node] | None = None,
        spread: Spread | None = None,
    ) -> None:
        self._groups, self._least, self._bandwidth = groups, least_penalty, bandwidth
        self._others = others_unseen
        self._unlearned, self._pull, self._fits, self._nodes = unlearned, pull, fits, nodes or {}
        self._spread = spread if spread is not None and spread.barred_zones else None
        self._link = bandwidth > 0
        self._bounds = [self._bound(group) for group in groups]
        grouped = all(group.penalty is not None for group in groups)
        self.uniform = grouped and unlearned is None and pull is None and fits is None

    def _bound(self, group: Group) -> float:
        if self._spread is not None and group.zone in self._spread.barred_zones:
            return -math.inf
        zone = self._pull.zone_points(group.zone) if self._pull is not None else 0.0
        if group.penalty is None:
            return zone  # each node's link and share are reckoned as it is read
        lost = (group.penalty - self._least) * self._bandwidth
        if not group.owned:
            lost += group.penalty * self._others
        return zone - lost

    def bound(self, group: int) -> float:
        return self._bounds[group]

    def of(self, score: NodeScore, group: int) -> float:
        return self.of_node(score, self._groups[group].owned)

    def of_node(self, score: NodeScore, owned: bool) -> float:
        """``of`` for a node in no group (a tainted one): ``owned`` says whose it is."""
        spread = self._spread
        if spread is not None and not spread.zone_allows(score.name):
            return -math.inf  # a tainted node: a grouped one is barred by its group's bound
        fits = self._fits
        if fits is not None:
            node = self._nodes.get(score.name)
            if node is None or not fits(node):
                return -math.inf
        penalty = score.penalty_per_byte
        points = -(penalty - self._least) * self._bandwidth if self._link else 0.0
        if not owned:
            points -= penalty * self._others
        if self._unlearned is not None:
            points -= POINTS_PER_POD * self._unlearned.get(score.name, 0)
        if self._pull is not None:
            points += self._pull.points(score)
        return points

    def raised(self) -> Iterator[tuple[str, float]]:
        return iter(()) if self._pull is None else self._pull.own_nodes()
