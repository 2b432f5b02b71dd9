"""The traffic-tier terms of one pod: each tier weighs what its nodes cost
the pod, so tiers that cost alike weigh alike.

The tiers rank every node with data by quietness (scoring/tiers.py), but
below ``steering.busyAbove`` a quieter link saves a pod nothing
(scoring/savings.py). Weights graded by rank alone (60 / 40 / 20) ranked a
calm cluster's nodes by noise, and put that noise above kube-scheduler's
own spread and resource plugins on every steered pod. So a tier's cost to
a pod is the mean over its candidates (kube-scheduler picks among any of
them alike, as it does over the whole field: ``FieldCost``); the cheapest
tier weighs TOP and another a tenth of that less per point it costs more
(``weight``: nothing from FULL_SAVING points on), but as much where it
costs under MIN_SAVING more: a few tenths of a point took 2 or 3 off a
tier's weight, and kube-scheduler, which scales the weights to the best
node's, then steered pods off a third of the nodes for nothing. Tiers of
one weight share a term. Where every tier weighs TOP the tiers save the pod nothing and it
gets no tier term at all.

kube-scheduler scales the weights a node matches to the best node's
(NodeAffinity's NormalizeScore), so beside no node term a tier that costs
3 points more loses 30 of the 100 its nodes would score, against 100 in
full for a tier with a hot link in it.

A pod whose size is not its own (booked at the cluster-wide figure or the
default) or whose burst is heavy (scoring/placement.py) prefers the tiers
by rank instead (``BY_RANK``): weighed by cost, the quiet tiers alike,
bench.placement's heavy rows (`--quick --seed 4242`) went from 10
verdicts missed to 29 (new heavy workloads in an empty cluster, +0.4 to
+4.4 points over the oracle's busiest link; by rank where the burst is
heavy or the size unknown, 17; also where the size is the cluster's, 9):
the measured costs do not see what is booked since, and a pod booked at
another's size may send far more.

Nor do the tiers: the labels follow the measurement, so a quiet node that
a heavy pod was booked on a few seconds ago is still in the quietest
tier, and its term drew the next light pod there (the testbed's run 1 of
the kernel's TCP bursts: a frontend pod bound beside a bulk pod booked 7 s
before it, off its node terms, which saved it nothing over tier 1). So
the tier terms leave out (``booked_since``) the nodes of their tiers that
what is booked since the measurement makes cost the pod more, the
costliest LEFT_OUT_MOST of them: kube-scheduler then picks among the rest
of the tier, which cost it what the tier's measured mean says. It picks
each node of the heaviest term's tiers about once in as many as they
hold, so a node is left out where its extra cost over that count is
MIN_SAVING or more, as a node term needs a point. A booking is taken to
cost at most MOST_EXTRA (a full link's worth), so where those tiers hold
more than MOST_EXTRA / MIN_SAVING nodes none can be, and the bookings'
view is not read.
"""

import heapq
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import NamedTuple

from kubectl_nettraffic.kube.nodes import Node
from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.savings import FULL_SAVING, MIN_SAVING, FieldCost, cost, weight
from kubectl_nettraffic.scoring.tiers import TIER_LABEL, TIERS

TIER_NAMES = tuple(str(tier) for tier in range(1, TIERS + 1))

# The cheapest tier's weight: against a node term's 100 for the best node,
# the named node scores 100 + 60 and any other node of the tier 60.
TOP = 60

# The most nodes a pod's tier terms leave out (``booked_since``): each is a
# matchFields requirement in every tier term, and past a few the heaviest
# bookings are what matters.
LEFT_OUT_MOST = 8
# The most a node's bookings since the measurement are taken to cost a pod
# (points): a full link's worth.
MOST_EXTRA = 100.0

# (weight, the tiers that weigh it), heaviest first: a term each.
TierTerms = tuple[tuple[int, tuple[str, ...]], ...]


class TierChoice(NamedTuple):
    """A pod's tier terms, and what kube-scheduler's pick costs it under them."""

    terms: TierTerms  # none: the tiers save the pod nothing
    # The cheapest tier's mean cost, where terms go (the pick is made
    # among the heaviest-weighted tiers); else None.
    cost: float | None


NO_TIERS = TierChoice((), None)
# A pod whose size is not its own or whose burst is heavy (placement.py)
# prefers the quiet tiers by rank, the busiest none.
BY_RANK = TierChoice(((TOP, ("1",)), (40, ("2",)), (20, ("3",))), None)


class TierCosts:
    """Per tier, the cost of its candidates to a pod of any size, as the
    nodes carry their tier labels (one snapshot's: the labels the last node
    list read, up to a refresh behind the writer)."""

    __slots__ = ("_busy", "_fields", "_sizes", "_tier_of")

    def __init__(
        self, candidates: Iterable[NodeScore], nodes: Mapping[str, Node], busy_above: float
    ) -> None:
        members: dict[str, list[NodeScore]] = {}
        self._tier_of: dict[str, tuple[str, NodeScore]] = {}
        for score in candidates:
            node = nodes.get(score.name)
            tier = node.labels.get(TIER_LABEL) if node is not None else None
            if tier in TIER_NAMES:
                members.setdefault(tier, []).append(score)
                self._tier_of[score.name] = (tier, score)
        self._busy = busy_above
        self._sizes = {tier: len(scores) for tier, scores in members.items()}
        self._fields = {
            tier: FieldCost(scores, busy_above) for tier, scores in sorted(members.items())
        }

    def choice(self, bandwidth: float) -> TierChoice:
        """The tier terms of a pod of ``bandwidth`` bytes/s."""
        costs = {tier: field.mean(bandwidth) for tier, field in self._fields.items()}
        if not costs:
            return NO_TIERS
        best = min(costs.values())
        by_weight: dict[int, list[str]] = {}
        for tier, tier_cost in costs.items():
            # Under a point more the tier saves nothing next to the best: alike.
            extra = tier_cost - best if tier_cost - best >= MIN_SAVING else 0.0
            by_weight.setdefault(weight(FULL_SAVING - extra, TOP), []).append(tier)
        by_weight.pop(0, None)  # a tier that saves nothing next to the best: no term
        if len(by_weight) == 1 and len(by_weight[TOP]) == len(costs):
            return NO_TIERS
        terms = tuple((w, tuple(tiers)) for w, tiers in sorted(by_weight.items(), reverse=True))
        return TierChoice(terms, best)

    def booked_since(
        self,
        terms: TierTerms,
        unseen: Mapping[str, tuple[float, int]],
        bandwidth: float,
        named: AbstractSet[str] = frozenset(),
    ) -> tuple[str, ...]:
        """The nodes of the ``terms``' tiers that the bytes booked on them
        since the measurement (``unseen``: node -> (bytes/s, pods)) make
        cost a pod of ``bandwidth`` bytes/s more than measured by
        MIN_SAVING per node of the heaviest term's tiers (kube-scheduler
        picks one of those): the costliest LEFT_OUT_MOST, by name. Not
        the nodes its node terms name (``named``): they were chosen by
        live score, what is booked on them counted, and a tier term left
        off one put the tier's nodes not named above it."""
        if not terms or not unseen:
            return ()
        among = sum(self._sizes.get(tier, 0) for tier in terms[0][1])
        floor = MIN_SAVING * among
        if not among or floor > MOST_EXTRA:
            return ()  # no node carries those tiers, or no booking costs a point over so many
        tiers = {tier for _, names in terms for tier in names}
        busy, extra = self._busy, []
        for name, (booked, _) in unseen.items():
            member = self._tier_of.get(name)
            if member is None or member[0] not in tiers or name in named:
                continue
            score = member[1]
            more = cost(score, bandwidth + booked, busy) - cost(score, bandwidth, busy)
            if more >= floor:
                extra.append((more, name))
        return tuple(sorted(name for _, name in heapq.nlargest(LEFT_OUT_MOST, extra)))
