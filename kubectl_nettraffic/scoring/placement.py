"""Pure placement: the chosen nodes in, the preferred nodes and their weights out.

Rules (docs/design/architecture.md, Contracts):
- Candidates are nodes the pod could actually run on: eligible in the
  snapshot (or blocked only by taints the pod tolerates), matching its
  nodeSelector and required node affinity, and with data. The choice of
  the best N among them, by live score plus the points each node gains or
  loses for this pod, is ranking/candidates.py's ``CandidateHeap.best``
  over ranking/node_points.py's ``NodePoints``.
- The chosen nodes become one preferred term each, ``matchFields
  metadata.name In [node]``, weighed by rank (the best 100, each other at
  most a quarter of the one before; a node its workload's spread keeps
  the term off takes no rank) times what each saves the pod over
  the nodes kube-scheduler would pick without us, in full from 10 points
  (scoring/savings.py): a node that saves less than a point gets no term,
  so where nothing is to gain the pod is placed as it would be without
  us. Why: docs/design/behaviour.md, "How hard a pod is steered".
- On links of different speeds a node loses what the pod's own bytes cost
  its link beyond what they cost the fastest (``link_points``), so the
  nodes rank as they would score with the pod on them; the extender's
  prioritize reckons it the same way (``link_handicap``).

The patch that carries the choice is steering/affinity_patch.py; it is
checked by steering/patch_check.py before it is sent.
"""

import math
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import NamedTuple

from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.savings import (
    FULL_SAVING,
    HEAVY_BURST,
    MIN_SAVING,
    FieldCost,
    SpreadPick,
    burst_share,
    cost,
    stacked_burst,
    weight,
)
from kubectl_nettraffic.scoring.tier_weights import BY_RANK, NO_TIERS, TierCosts, TierTerms

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


class Weighed(NamedTuple):
    """A pod's terms: its chosen nodes, weighed, its tier terms and the
    nodes they leave out (scoring/tier_weights.py's ``booked_since``)."""

    preferences: list[Preference]
    tier_terms: TierTerms
    left_out: tuple[str, ...] = ()


def weighed(
    ranked: Sequence[tuple[float, int, NodeScore]],
    field: FieldCost,
    tiers: TierCosts | None,
    bandwidth: float,
    busy_above: float,
    pulled: Mapping[str, float] | None = None,
    burst: int = 1,
    size_unknown: bool = False,
    full: frozenset[str] = frozenset(),
    spread_pick: SpreadPick | None = None,
    own_size: bool = True,
    beside_peers: AbstractSet[str] = frozenset(),
    unseen: Mapping[str, tuple[float, int]] | None = None,
) -> Weighed:
    """The pod's tier terms, where the ``tiers`` (None: steering.trafficTiers
    off) differ in what they cost it (scoring/tier_weights.py; by rank
    where its burst is heavy or its size is not its own, ``own_size``
    False: booked at the cluster-wide figure or the default), and the
    chosen nodes, best first, each weighed by its rank and by what it saves
    the pod (scoring/savings.py): what kube-scheduler's pick without the
    node terms costs it (the cheapest tier's mean under tier terms by cost,
    else the ``field``'s) less the node's cost, both as measured (what is
    booked since moves the choice, not the weights), plus the points its
    peers pull it by (``pulled``, node -> points); 0: no term. In full,
    whatever the saving, where the pod's size is unknown (``size_unknown``:
    booked at the default; its zones are then kept even in a calm cluster,
    scoring/spread.py's ``balanced``) or its burst (``burst``: its
    workload's pods in flight, this one included) fills HEAVY_BURST of the
    node's link and would cost points stacked (``stacked_burst``):
    kube-scheduler alone stacks a burst by its own plugins, which the
    bookings spread. A node its workload's
    spread has filled (``full``) gets no term; under the cluster's default
    spread it does where its link alone saves the pod MIN_SAVING over
    where the spread would send it, weighed by that saving: ``spread_pick``
    (None: not the defaults), the mean cost of the candidates with the
    fewest of the workload's pods (kube-scheduler's own spread picks among
    those), or a chosen node not full if that costs less. The defaults are
    kube-scheduler's soft score, which a hot link avoided outweighs and a
    peer or an unknown size does not; where the nodes that keep the spread
    are as quiet, it holds.
    Where kube-scheduler scores a sample of the nodes, a node whose peers
    keep the pod's bytes on it (``beside_peers``) is graded by its score
    gap alone, not at most a quarter of the one before: the sample misses
    the first preference about half the time (scoring/scheduler_sample.py),
    and the next node beside the peers must then outweigh the tier terms.
    The tier terms leave out the nodes of their tiers that what is booked
    since the measurement (``unseen``: node -> (bytes/s, pods)) makes cost
    the pod a point more per node of their heaviest term, but those the
    node terms name (``TierCosts.booked_since``)."""
    burst = stacked_burst(field, bandwidth, burst)
    if tiers is None:
        tiered = NO_TIERS
    elif ranked and (not own_size or burst_share(ranked[0][2], bandwidth, burst) >= HEAVY_BURST):
        tiered = BY_RANK  # its own size unknown, or its burst heavy: the quiet tiers by rank
    else:
        tiered = tiers.choice(bandwidth)
    # Under tier terms by cost kube-scheduler picks among the cheapest tiers.
    field_cost = field.mean(bandwidth) if tiered.cost is None else tiered.cost
    costs = [cost(score, bandwidth, busy_above) for _, _, score in ranked]
    # The least a way to keep the spread costs the pod; a pod's own spread is never outweighed.
    keeps_spread = -math.inf
    if spread_pick is not None and full:
        keeps_spread = _keeping_spread(ranked, costs, full, field, bandwidth, spread_pick)
    preferences = []
    most = 400  # four times the first's weight
    top: float | None = None  # the first weighed
    for (effective, _, score), node_cost in zip(ranked, costs, strict=True):
        saving = field_cost - node_cost
        if score.name in full:
            if keeps_spread - node_cost < MIN_SAVING:
                # No term: the nodes after it are graded as if it were not chosen.
                preferences.append(Preference(score.name, 0, effective))
                continue
            saving = keeps_spread - node_cost  # over where the spread would send the pod
        if pulled:
            saving += pulled.get(score.name, 0.0)
        if size_unknown or burst_share(score, bandwidth, burst) >= HEAVY_BURST:
            # By rank alone, as the choice ranks by live score: the measured
            # cost does not see what is booked since.
            saving = max(saving, FULL_SAVING)
        most //= 4
        top = effective if top is None else top
        # Graded by rank: the best 100, each other 100 minus its score gap
        # but at most a quarter of the one before (the pod goes where it is
        # booked unless kube-scheduler's plugins object), then by what it saves.
        graded = round(100 - (top - effective))
        if score.name not in beside_peers:
            graded = min(most, graded)
        preferences.append(Preference(score.name, weight(saving, graded), effective))
    if tiered is BY_RANK and not any(p.weight for p in preferences):
        tiered = NO_TIERS  # by rank they go with node terms alone, as the pod is steered
    left_out: tuple[str, ...] = ()
    if tiers is not None and tiered.terms and unseen:
        named = {p.node for p in preferences if p.weight}
        left_out = tiers.booked_since(tiered.terms, unseen, bandwidth, named)
    return Weighed(preferences, tiered.terms, left_out)


def _keeping_spread(
    ranked: Sequence[Ranked],
    costs: Sequence[float],
    full: frozenset[str],
    field: FieldCost,
    bandwidth: float,
    spread_pick: SpreadPick,
) -> float:
    """What keeping the spread costs the pod: a chosen node not full, or
    where kube-scheduler's own spread would send it (``spread_pick``).
    The pick is worked out only where a full node could save a point over
    the chosen ones and over what the pick costs at most."""
    names = [score.name for _, _, score in ranked]
    chosen = min((c for c, n in zip(costs, names, strict=True) if n not in full), default=math.inf)
    cheapest_full = min(c for c, n in zip(costs, names, strict=True) if n in full)
    bound = min(chosen, field.most(bandwidth), spread_pick.at_most)
    if bound - cheapest_full < MIN_SAVING:
        return bound  # no full node saves a point over it
    return min(chosen, spread_pick.exactly())
