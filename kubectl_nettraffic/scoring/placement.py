"""Pure placement: the chosen nodes in, the preferred nodes and their weights out.

Rules (docs/design/architecture.md, Contracts):
- Candidates are nodes the pod could actually run on: eligible in the
  snapshot (or blocked only by taints the pod tolerates), matching its
  nodeSelector and required node affinity, and with data. The choice of
  the best N among them, by live score plus the points each node gains or
  loses for this pod, is inflight/candidates.py's ``CandidateHeap.best``
  over inflight/node_points.py's ``NodePoints``.
- The chosen nodes become one preferred term each, ``matchFields
  metadata.name In [node]``, with weights graded by score and rank: the
  best gets 100, each other 100 minus its score gap to the best but at
  most a quarter of the weight before it, never below 1 (100, 25, 6).
- On links of different speeds a node loses what the pod's own bytes cost
  its link beyond what they cost the fastest (``link_points``), so the
  nodes rank as they would score with the pod on them; the extender's
  prioritize reckons it the same way (``link_handicap``).

The patch that carries the choice is steering/affinity_patch.py; it is
checked by steering/patch_check.py before it is sent.
"""

from collections.abc import Callable, Sequence
from typing import NamedTuple

from kubectl_nettraffic.scoring.node_scores import NodeScore

# Score points a node loses for one pod's choice alone (never negative).
Handicap = Callable[[NodeScore], float]


# (score for this pod, position in the base ranking, the node's score)
Ranked = tuple[float, int, NodeScore]


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
