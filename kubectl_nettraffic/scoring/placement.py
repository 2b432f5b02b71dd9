"""Pure placement: a pod and a snapshot's candidates in, the preferred nodes out.

Rules (docs/design/architecture.md, Contracts):
- Candidates are nodes the pod could actually run on: eligible in the
  snapshot (or blocked only by taints the pod tolerates), matching its
  nodeSelector and required node affinity, and with data.
- The top N candidates by score (in-flight load included) become one
  preferred term each, ``matchFields metadata.name In [node]``, with weights
  graded by score and rank: the best gets 100, each other 100 minus its
  score gap to the best but at most a quarter of the weight before it,
  never below 1 (100, 25, 6). Sharp weights keep the pod on its first
  preference unless the scheduler's other plugins object strongly: the
  webhook books the pod there until the binding watch shows where it went,
  and every pod that goes elsewhere meanwhile is counted on the wrong node
  (docs/design/late-bindings.md).
- A handicap may lower some nodes' scores for this pod alone: on links of
  different speeds, what the pod's own bytes cost a node's link beyond what
  they cost the fastest (``link_points``), so the nodes rank as they
  would score with the pod on them; with several
  replicas steering, the nodes that are not this replica's own count the
  part of a pod of this pod's size another replica may be steering there
  unseen (replica_share.py). The pull of a pod's peers raises some instead
  (steering/peer_pull.py): a handicap below zero, by at most ``lift``
  points, so that a walk best first knows when to stop.

The live scores are read from a LiveRanking (inflight/candidates.py's
CandidateHeap, which holds the mutable state); nothing here changes it. The
patch that carries the choice is steering/affinity_patch.py; it is checked
by steering/patch_check.py before it is sent.
"""

import heapq
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import NamedTuple, Protocol

from kubectl_nettraffic.kube.node_affinity import has_node_constraints, pod_fits
from kubectl_nettraffic.kube.nodes import Node, ineligibility
from kubectl_nettraffic.kube.pods import Pod
from kubectl_nettraffic.labels import LabelSelector
from kubectl_nettraffic.scoring.node_scores import NodeScore

# Score points a node loses for one pod's choice alone (never negative).
Handicap = Callable[[NodeScore], float]


# (score for this pod, position in the base ranking, the node's score)
Ranked = tuple[float, int, NodeScore]


class LiveRanking(Protocol):
    """Candidates by live score, best first (inflight/candidates.py's CandidateHeap)."""

    def walk(self) -> Iterator[Ranked]: ...


class Pull(Protocol):
    """Points some nodes gain for one pod (steering/peer_pull.py's PodPull)."""

    @property
    def most(self) -> float:
        """The most points any node gains."""
        ...

    def points(self, score: NodeScore) -> float: ...


def lowered_by(pull: Pull) -> Handicap:
    """A pull as the handicap it is: points below zero."""
    return lambda score: -pull.points(score)


def link_points(penalty_per_byte: float, least_penalty: float, bandwidth: float) -> float:
    """The points a pod of ``bandwidth`` bytes/s costs a link of
    ``penalty_per_byte`` beyond what it costs the fastest (whose penalty per
    byte is ``least_penalty``)."""
    return (penalty_per_byte - least_penalty) * bandwidth


def link_handicap(least_penalty: float, bandwidth: float) -> Handicap:
    """``link_points`` per node: with it, nodes rank as they would score
    with the pod on them."""

    def points(score: NodeScore) -> float:
        return link_points(score.penalty_per_byte, least_penalty, bandwidth)

    return points


class Preference(NamedTuple):  # a tuple: several are made on every admission
    node: str
    weight: int
    score: float


def choose_nodes(
    candidates: Sequence[NodeScore],
    tainted: Sequence[NodeScore],
    nodes: Mapping[str, Node],
    pod: Pod,
    selector: LabelSelector,
    unseen: Mapping[str, tuple[float, int]],
    count: int,
    top: Callable[[int], list[Ranked]] | None = None,
    handicap: Handicap | None = None,
    lift: float = 0.0,
) -> list[Preference]:
    """The best ``count`` nodes for ``pod``, their unseen load included
    (``unseen``: node -> (bytes/s booked that no measurement shows yet, pods)).

    ``candidates`` are eligible nodes with data, best base score first.
    With ``top`` (the best N candidates by live score less the handicap,
    read off the in-flight state's heaps) a pod with no node constraints
    takes its nodes from there. Otherwise the
    list is scanned: in-flight load only lowers a score, so the scan stops as
    soon as a node's base score cannot beat the current N-th best.
    ``tainted`` (usually few) are nodes blocked only by taints; they count if
    the pod tolerates them. ``handicap``: points each node loses for this pod
    alone; ``lift``: the most it may gain instead (below zero).
    """
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    # Min-heap of (effective score, -position, score): the worst kept choice on
    # top. Position in the base ranking breaks ties (less traffic, then name).
    best: list[tuple[float, int, NodeScore]]
    if top is not None and not has_node_constraints(pod):
        ranked = top(count)  # best first
        if not (tolerations and tainted):
            return graded(ranked)  # the usual pod: no scan, and no closure built for one
        best = [(effective, -position, score) for effective, position, score in ranked]
        heapq.heapify(best)
        scanned: Sequence[NodeScore] = ()  # the heap has ranked the candidates
    else:
        best, scanned = [], candidates
    fits = pod_fits(pod)

    def consider(position: int, score: NodeScore) -> None:
        node = nodes.get(score.name)
        if node is None or not fits(node):
            return
        effective = score.score_with(unseen.get(score.name, (0.0, 0))[0])
        if handicap is not None:
            effective -= handicap(score)
        key = (effective, -position, score)
        if len(best) < count:
            heapq.heappush(best, key)
        elif key[:2] > best[0][:2]:
            heapq.heapreplace(best, key)

    for position, score in enumerate(scanned):
        if len(best) == count and score.score + lift <= best[0][0]:
            break
        consider(position, score)
    if tolerations:
        for position, score in enumerate(tainted, start=len(candidates)):
            node = nodes.get(score.name)
            if node is not None and ineligibility(node, selector, tolerations) is None:
                consider(position, score)

    return graded(sorted(best, key=lambda entry: entry[:2], reverse=True))


def combined(*handicaps: Handicap | None) -> Handicap | None:
    """The points of every handicap given, added; None when none is."""
    present = [h for h in handicaps if h is not None]
    if len(present) < 2:
        return present[0] if present else None
    return lambda score: sum(h(score) for h in present)


# handicapped_top reads at most this many of the best nodes by live score:
# a handicap that reaches past them would otherwise be read node by node on
# every admission. The in-flight state reads the handicaps it keeps off
# heaps that hold them (inflight/state.py); this walk is its fallback.
MOST_READ = 128


def handicapped_top(
    live: LiveRanking, count: int, handicap: Handicap, lift: float = 0.0
) -> list[Ranked]:
    """The best ``count`` by live score less ``handicap``: as
    ``CandidateHeap.top``, best first.

    The heap is read best first, each node's handicap reckoned once as it
    is read. A handicap lowers a score, or raises it by ``lift`` points at
    most, so once the count-th best kept beats the live score of the node
    just read plus ``lift`` (ties go to the lower position, as the heap
    orders them), no node after it can take its place. The read stops there, or at MOST_READ nodes (or the
    count, if more): then the best among those."""
    limit = max(MOST_READ, count)
    # Min-heap of (effective score, -position, score): the worst kept on top.
    kept: list[tuple[float, int, NodeScore]] = []
    for read, (score_live, position, score) in enumerate(live.walk(), start=1):
        entry = (score_live - handicap(score), -position, score)
        if len(kept) < count:
            heapq.heappush(kept, entry)
        elif entry[:2] > kept[0][:2]:
            heapq.heapreplace(kept, entry)
        if read >= limit or (len(kept) == count and kept[0][:2] > (score_live + lift, -position)):
            break
    kept.sort(key=lambda entry: entry[:2], reverse=True)
    return [(effective, -negative, score) for effective, negative, score in kept]


def graded(ranked: Sequence[tuple[float, int, NodeScore]]) -> list[Preference]:
    """Weights: the best 100, each other 100 minus its score gap but at most
    a quarter of the one before it, never below 1."""
    if not ranked:
        return []
    top = ranked[0][0]
    preferences = []
    most = 400  # four times the first's weight
    for effective, _, score in ranked:
        weight = round(100 - (top - effective))
        most //= 4
        # Comparisons, not max() and min(): two builtins fewer on every admission.
        weight = most if weight > most else weight
        weight = 1 if weight < 1 else weight
        preferences.append(Preference(score.name, weight, effective))
    return preferences
