"""How several replicas share the quiet nodes while they steer at once.

Each replica books the other replicas' pods only once its binding watch
sees them, some milliseconds after they were admitted. Pods of one burst
admitted by two replicas within that time would otherwise both go to the
node each sees as the best: the stale view herds.

So each replica counts, on every node that is not its own, the part of a
pod of the size it is placing that another replica may be steering there
right now, unseen. The nodes are split among the replicas in blocks of
equal size (within one node) in the order of a hash of their names
(``NodeParts``), so each replica has as many nodes of its own as any other;
the replicas are the ones whose steered pods the watch showed within the
measurement horizon, with this one, in the order of their ids, so every
replica draws the same lines without talking to another. Near-equal nodes
then go to different replicas, and a replica still takes another's node
when that node is better by more than that part of a pod.

Blocks, not the hash modulo the number of replicas: by the modulo, the
benchmark's 50 nodes came out 16, 19 and 15 for 3 replicas, and the one
with the fewest filled its nodes up to a pod ahead of the others' before
it took theirs (docs/design/late-bindings.md). A node added or removed
moves at most one node across each line; the replicas disagree on those
until each has listed the nodes again (one refresh).

The part is a whole pod while this replica admits pods (any in the last
RATE_WINDOW: the Service spreads admissions evenly over the replicas, so
then the others admit too), none between bursts. A scale-up's pods are
created in slow-start batches of 1, 2, 4, 8, ... whose calls run at once
(the ReplicaSet controller's slowStartBatch), so while a burst lasts
another replica is steering pods of it unseen whatever the average pace;
a part scaled by the pace times the watch's delay herded within a batch
(docs/design/late-bindings.md). The delay is still measured on this
replica's own pods, from its admission to its watch showing the pod
(``WatchDelay``), and exported.

With one replica (or none seen lately) nothing changes. A replica that
stopped steering counts until the horizon passes: its nodes are then taken
only when they are that part of a pod better.
"""

import functools
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from kubectl_nettraffic.scoring.node_scores import NodeScore

# Seconds from another replica's admission to this replica's watch showing
# the pod (the API server persists it, then sends the watch event), until
# one is measured: tens of milliseconds on a healthy control plane, and
# 50 ms the upper end of that.
WATCH_DELAY = 0.05
# A pod its watch has not shown this long after its admission counts as
# shown after this long: the watch is down or far behind.
DELAY_MOST = 1.0
# Weight of each new measurement in the delay's moving average: about the
# last ten pods.
DELAY_WEIGHT = 0.1
# This replica is in a burst while it admitted a pod within this many seconds.
RATE_WINDOW = 1.0


@functools.lru_cache(maxsize=2**16)  # grouping the candidates reads every node once
def _node_hash(node: str) -> int:
    # crc32, not hash(): the same on every replica (hash() of a str is
    # randomised per process).
    return zlib.crc32(node.encode())


def _hash_part(node: str, parts: int) -> int:
    return _node_hash(node) % parts


class NodeParts:
    """The nodes split into ``parts`` blocks: in the order of a hash of
    their names, the first block's size to the first replica, and so on;
    the sizes differ by one node at most. A node not listed (one a newer
    node list has, or none was given) is in the part of its hash modulo
    ``parts``."""

    def __init__(self, nodes: Iterable[str], parts: int) -> None:
        ordered = sorted(set(nodes), key=lambda name: (_node_hash(name), name))
        self.parts = parts
        self._part = {name: i * parts // len(ordered) for i, name in enumerate(ordered)}

    @classmethod
    def over(
        cls, nodes: Mapping[str, object], parts: int, before: "NodeParts | None"
    ) -> "NodeParts":
        """The lines over ``nodes``: ``before``'s when it was drawn over the
        same nodes for as many parts (the node list rarely changes between
        refreshes, and sorting 5,000 names costs 2.3 ms), else drawn anew."""
        if before is not None and before.parts == parts and before._part.keys() == nodes.keys():
            return before
        return cls(nodes, parts)

    def part_of(self, node: str) -> int:
        part = self._part.get(node)
        return _hash_part(node, self.parts) if part is None else part


class ReplicaShare(NamedTuple):
    part: int  # this replica's place among the ids, in order
    parts: int  # replicas steering lately, this one included
    unseen: float = 1.0  # pods each other replica may be steering unseen (at most 1)
    lines: NodeParts | None = None  # the nodes' parts (None: each by its hash modulo parts)

    def owns(self, node: str) -> bool:
        lines = self.lines
        part = _hash_part(node, self.parts) if lines is None else lines.part_of(node)
        return part == self.part

    def handicap(self, bandwidth: float) -> Callable[[NodeScore], float]:
        """The points a node loses for a pod of ``bandwidth`` bytes/s: the
        unseen part of such a pod more on another replica's node."""
        unseen = bandwidth * self.unseen

        def points(score: NodeScore) -> float:
            return 0.0 if self.owns(score.name) else score.penalty_per_byte * unseen

        return points


class WatchDelay:
    """How long this replica's watch takes to show a pod it admitted: a
    moving average over its pods, each capped at DELAY_MOST (a pod not shown
    by then counts as that). Not thread-safe: see Replicas."""

    def __init__(self) -> None:
        self.seconds = WATCH_DELAY
        # booking key -> admitted at, oldest first. An OrderedDict, because
        # its first entry is found in constant time: a dict's iterator walks
        # past every entry deleted from its front since the table was last
        # rebuilt, which made each admission pay for the pods before it.
        self._unshown: OrderedDict[int, float] = OrderedDict()

    def admitted(self, key: int, at: float) -> None:
        unshown, oldest = self._unshown, at - DELAY_MOST
        unshown[key] = at
        while True:  # ends at ``key`` at the latest: it was admitted after ``oldest``
            admitted = next(iter(unshown.values()))
            if admitted > oldest:
                break
            unshown.popitem(last=False)
            self._measured(DELAY_MOST)

    def shown(self, key: int, at: float) -> None:
        """The watch showed the pod booked as ``key`` at ``at`` (any event)."""
        admitted = self._unshown.pop(key, None)
        if admitted is not None:
            self._measured(min(max(at - admitted, 0.0), DELAY_MOST))

    def _measured(self, seconds: float) -> None:
        self.seconds += DELAY_WEIGHT * (seconds - self.seconds)


class Replicas:
    """The replicas steering lately, as the binding watch shows them.

    ``replica``: this replica's id (its steered-by label); ``horizon``: seconds
    after which a replica whose pods the watch showed no more is forgotten
    (the measurements show its pods by then). Not thread-safe: its owner
    (InflightState) holds its lock around every call."""

    def __init__(self, replica: str | None, horizon: float) -> None:
        self._own, self._horizon = replica, horizon
        self._last_seen: dict[str, float] = {}  # other replica's id -> its newest pod's creation
        self._share: ReplicaShare | None = None
        self._valid_until = float("-inf")  # when the oldest replica counted is forgotten
        self._last_admitted = float("-inf")
        self._now = float("-inf")  # as of the last advance()
        self.delay = WatchDelay()

    def admitted(self, key: int, at: float) -> None:
        """This replica booked as ``key`` a pod it admitted at ``at``."""
        if self._own is None:
            return  # it never shares (share() is None), and no watch shows its pods
        self._last_admitted = max(self._last_admitted, at)
        self.delay.admitted(key, at)

    def saw(self, replica: str, created: float) -> None:
        """A pod steered by ``replica`` and created at ``created`` was booked."""
        if self._own is None or replica == self._own:
            return  # this process's own pods, seen again after a restart of its watch
        known = self._last_seen.get(replica)
        if known is None or created > known:
            self._last_seen[replica] = created
            if known is None or known + self._horizon <= self._valid_until:
                self._valid_until = float("-inf")  # recount at the next share()

    def advance(self, now: float) -> None:
        """Forget the replicas past the horizon as of ``now``."""
        if self._own is None:
            return  # it never shares
        self._now = now
        if now >= self._valid_until:
            self._recount(now)

    def share(self) -> ReplicaShare | None:
        """This replica's part of the nodes as of the last ``advance``; None
        when it steers alone."""
        if self._share is None:
            return None
        bursting = self._last_admitted > self._now - RATE_WINDOW
        return self._share._replace(unseen=1.0 if bursting else 0.0)

    def _recount(self, now: float) -> None:
        oldest = now - self._horizon
        self._last_seen = {r: at for r, at in self._last_seen.items() if at > oldest}
        if self._own is None or not self._last_seen:
            self._share, self._valid_until = None, float("inf")
            return
        ids = sorted([self._own, *self._last_seen])
        self._share = ReplicaShare(ids.index(self._own), len(ids))
        self._valid_until = min(self._last_seen.values()) + self._horizon
