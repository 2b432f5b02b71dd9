"""How several replicas share the quiet nodes while they steer at once.

A replica sees another's pods only once its binding watch shows them, so
two replicas in one burst would both send a pod to the node each sees as
the quietest. The nodes are split among the replicas steering lately in
blocks of equal size, in the order of a hash of their names (the same on
every replica, with no traffic between them); while this replica admits
pods, every node not its own counts a pod of the size it places that
another replica may be steering there unseen. With one replica nothing
changes. Why blocks, a whole pod, and the figures: docs/design/behaviour.md,
"Replicas share the nodes".
"""

import functools
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from kubectl_nettraffic.scoring.node_scores import NodeScore

# This replica is in a burst while it admitted a pod within this many seconds.
RATE_WINDOW = 1.0


@functools.lru_cache(maxsize=2**16)  # drawing the blocks reads every node once
def _node_hash(node: str) -> int:
    # crc32, not hash(): the same on every replica (hash() of a str is
    # randomised per process).
    return zlib.crc32(node.encode())


class NodeBlocks:
    """The nodes split into ``replicas`` blocks: in the order of a hash of
    their names, the first block's size to the first replica, and so on;
    the sizes differ by one node at most. A node not listed is in no block."""

    def __init__(self, nodes: Iterable[str], replicas: int) -> None:
        ordered = sorted(set(nodes), key=lambda name: (_node_hash(name), name))
        self.replicas = replicas
        self._block = {name: i * replicas // len(ordered) for i, name in enumerate(ordered)}

    @classmethod
    def over(
        cls, nodes: Mapping[str, object], replicas: int, before: "NodeBlocks | None"
    ) -> "NodeBlocks":
        """The blocks over ``nodes``: ``before`` when drawn over the same
        nodes for as many replicas (sorting 5,000 names costs 2.3 ms)."""
        if (
            before is not None
            and before.replicas == replicas
            and before._block.keys() == nodes.keys()
        ):
            return before
        return cls(nodes, replicas)

    def block_of(self, node: str) -> int:
        return self._block.get(node, -1)


class ReplicaShare(NamedTuple):
    place: int  # this replica's place among the ids, in order
    blocks: NodeBlocks  # the nodes' blocks, one per replica steering lately
    concurrent: float = 1.0  # pods each other replica may be steering unseen now (0 or 1)

    def owns(self, node: str) -> bool:
        return self.blocks.block_of(node) == self.place

    def handicap(self, bandwidth: float) -> Callable[[NodeScore], float]:
        """The points a node loses for a pod of ``bandwidth`` bytes/s: the
        part of such a pod another replica may be steering there unseen."""
        unseen = bandwidth * self.concurrent

        def points(score: NodeScore) -> float:
            return 0.0 if self.owns(score.name) else score.penalty_per_byte * unseen

        return points


class Replicas:
    """The replicas steering lately, as the binding watch shows them:
    ``replica`` (this one's id; None: it sees no other) and those whose pods
    it showed within ``horizon`` seconds. Its owner holds its lock."""

    def __init__(self, replica: str | None, horizon: float) -> None:
        self.replica, self._horizon = replica, horizon
        self._last_seen: dict[str, float] = {}  # other replica's id -> its newest pod's creation
        self._ids: tuple[int, int] | None = None  # (this one's place, replicas), or alone
        self._valid_until = float("-inf")  # when the oldest replica counted is forgotten
        self._last_admitted = float("-inf")
        self._now = float("-inf")  # as of the last advance()

    def admitted(self, at: float) -> None:
        """This replica booked a pod it admitted at ``at``."""
        self._last_admitted = max(self._last_admitted, at)

    def saw(self, replica: str, created: float) -> None:
        """A pod steered by ``replica`` and created at ``created`` was booked."""
        if self.replica is None or replica == self.replica:
            return  # this process's own pods, seen again after a restart of its watch
        known = self._last_seen.get(replica)
        if known is None or created > known:
            self._last_seen[replica] = created
            if known is None or known + self._horizon <= self._valid_until:
                self._valid_until = float("-inf")  # recount at the next advance()

    def advance(self, now: float) -> tuple[int, int] | None:
        """As of ``now``: (this replica's place, replicas steering lately),
        or None when it steers alone."""
        if self.replica is None:
            return None
        self._now = now
        if now >= self._valid_until:
            oldest = now - self._horizon
            self._last_seen = {r: at for r, at in self._last_seen.items() if at > oldest}
            if not self._last_seen:
                self._ids, self._valid_until = None, float("inf")
            else:
                ids = sorted([self.replica, *self._last_seen])
                self._ids = (ids.index(self.replica), len(ids))
                self._valid_until = min(self._last_seen.values()) + self._horizon
        return self._ids

    def concurrent(self) -> float:
        """Pods each other replica may be steering unseen: a whole one while
        this replica admits (as of the last ``advance``), else none."""
        return 1.0 if self._last_admitted > self._now - RATE_WINDOW else 0.0
