"""How several replicas share the quiet nodes while they steer at once.

Each replica books the other replicas' pods only once its binding watch
sees them, some milliseconds after they were admitted. Pods of one burst
admitted by two replicas within that time would otherwise both go to the
node each sees as the best: the stale view herds.

So each replica counts, on every node that is not its own, the part of a
pod of the size it is placing that another replica may be steering there
right now, unseen. The nodes are split among the replicas in blocks of
equal size (within one node) in the order of a hash of their names
(``NodeBlocks``); the replicas are the ones whose steered pods the watch
showed within the measurement horizon, with this one, in the order of their
ids, so every replica draws the same blocks without talking to another.
Near-equal nodes then go to different replicas, and a replica still takes
another's node when that node is better by more than that part of a pod.
Blocks, not the hash modulo the number of replicas: by the modulo, 50 nodes
came out 16, 19 and 15 for 3 replicas, and the one with the fewest filled
its nodes up a pod ahead of the others (docs/design/late-bindings.md). A
node added or removed moves at most one node across each block's edge.

The part is a whole pod while this replica admits pods (any in the last
RATE_WINDOW: the Service spreads admissions over the replicas, so then the
others admit too), none between bursts: a scale-up's slow-start batches
(1, 2, 4, 8, ... creates at once) keep another replica steering pods of the
burst unseen whatever the average pace. With one replica (or none seen
lately) nothing changes.
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
        nodes for as many replicas (sorting 5,000 names costs 2.3 ms, and the
        node list rarely changes between refreshes), else drawn anew."""
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
    """The replicas steering lately, as the binding watch shows them.

    ``replica``: this replica's id (its steered-by label; None: it follows
    no bindings and so sees no other replica); ``horizon``: seconds after
    which a replica whose pods the watch showed no more is forgotten (the
    measurements show its pods by then). Its owner holds its lock around
    every call."""

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
