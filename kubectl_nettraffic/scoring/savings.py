"""What a node saves a pod over the nodes kube-scheduler would pick without
us: the weight of its preferred term.

A link costs a pod nothing until it is busy: below ``steering.busyAbove``
of its speed (default half), packets queue no longer on one node than on
another, and the nodes are alike. Past it, each share more costs the pod:

    cost(f) = 100 * max(0, f - B) / (1 - B)

where f is the node's link fullness with the pod's own bytes: the
measured utilisation plus bandwidth / link speed where the speed is known
(what is booked since moves the choice, not the weights), else
1 - score / 100 (the score is then all
there is; in ``traffic`` mode without link speeds the busiest node counts as
full). Without our terms kube-scheduler picks any candidate alike (it
scores a sample of them, by spread and requests), so the field's cost is
the mean over the candidates for a pod of this size, from the measurement
(``FieldCost``, once per snapshot). So

    saving(n) = field - cost(n) + pull(n)

(``pull``: the points its peers add, for bytes kept on the node or in the
zone). A node that saves less than MIN_SAVING (one point) gets no term, and
where no chosen node does, the pod gets none at all (nor tier terms) and
kube-scheduler's own plugins decide, as without us. A term's weight is its
rank's (the best 100, each other at most a quarter of the one before,
placement.weighed) times its saving over FULL_SAVING (10 points), at most
1. A pod whose burst (its workload's pods in flight, itself included)
would fill HEAVY_BURST of a link is steered in full whatever the measured
saving, where the burst stacked on one node would cost the mean candidate
MIN_SAVING more than the pod alone (``stacked_burst``): kube-scheduler
alone stacks a burst by its own plugins (the nodes with the fewest
requests first), and a measurement shows a burst's bytes only once they
run; a burst that would cost nothing stacked, on links far from busy, is
left to kube-scheduler's plugins like its pod. So is a pod of unknown size (booked at
steering.defaultPodBandwidth, nothing learned), its workload's zones kept
even in a calm cluster (scoring/spread.py's ``balanced``): before anything
is learned a calm cluster's first light burst and a heavy one look alike.
kube-scheduler scales preferred-term weights to the best node's
(NodeAffinity's NormalizeScore), so a pod's node terms alone steer it as
hard at weight 1 as at 100; what a small saving softens is the node terms
against the tier terms (scoring/tier_weights.py), and so against
kube-scheduler's spread and resource plugins among the quiet nodes.
"""

import math
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate
from typing import NamedTuple

from kubectl_nettraffic.scoring.node_scores import NodeScore

# A node that saves less than this gets no preferred term.
MIN_SAVING = 1.0
# A node that saves this much or more is preferred in full: as much as a
# tenth of the pods landing on a full link costs (a cluster with one node
# in ten hot, kube-scheduler picking alike among them).
FULL_SAVING = 10.0
# A burst whose pods in flight, this one included, would fill this share of
# a link together is steered in full, whatever the measured saving:
# kube-scheduler alone stacks a burst by its own plugins (the nodes with the
# fewest requests first), which the bookings spread.
HEAVY_BURST = 0.05


def fullness_per_byte(score: NodeScore) -> float:
    """The share of its link one byte/s more fills."""
    if score.link_speed and score.link_utilization is not None:
        return 1.0 / score.link_speed
    return score.penalty_per_byte / 100.0


def measured_fullness(score: NodeScore) -> float:
    """The share of its link in use, as measured."""
    if score.link_speed and score.link_utilization is not None:
        return score.link_utilization
    return 1.0 - score.score / 100.0


class FieldCost:
    """The mean cost over one snapshot's candidates of a pod of any size:
    per fullness per byte, the measured fullness sorted with its running
    sums, so that a pod's mean is a bisection per link speed."""

    def __init__(self, candidates: Iterable[NodeScore], busy_above: float) -> None:
        self.busy = busy_above
        by_slope: dict[float, list[float]] = {}
        for score in candidates:
            by_slope.setdefault(fullness_per_byte(score), []).append(measured_fullness(score))
        self._groups: list[tuple[float, list[float], list[float]]] = []
        self._count = 0
        for slope, fills in by_slope.items():
            fills.sort()
            self._groups.append((slope, fills, [0.0, *accumulate(fills)]))
            self._count += len(fills)

    def mean(self, bandwidth: float) -> float:
        """The mean cost, in points, of a pod of ``bandwidth`` bytes/s on a candidate."""
        if not self._count:
            return 0.0
        busy, total = self.busy, 0.0
        for slope, fills, sums in self._groups:
            added = slope * bandwidth
            first = bisect_right(fills, busy - added)  # the busy ones from here on
            total += sums[-1] - sums[first] + (len(fills) - first) * (added - busy)
        return 100.0 * total / (1.0 - busy) / self._count

    def most(self, bandwidth: float) -> float:
        """The most a pod of ``bandwidth`` bytes/s costs a candidate, in points."""
        busy, most = self.busy, 0.0
        for slope, fills, _ in self._groups:
            most = max(most, fills[-1] + slope * bandwidth - busy)
        return 100.0 * most / (1.0 - busy)

    def spread_pick(self, bandwidth: float, crowded: "Crowded") -> "SpreadPick":
        """What a pod of ``bandwidth`` bytes/s costs, in points, where
        kube-scheduler's own spread would send it: the mean over the
        candidates other than the ``crowded`` ones (the field's when none
        is left). What it is at most, knowing only how many are crowded,
        is read first; the nodes are read only where that could matter."""
        mean, count = self.mean(bandwidth), self._count
        rest = count - crowded.at_most
        at_most = math.inf if rest <= 0 else mean * count / rest

        def exactly() -> float:
            left_out = crowded.nodes()
            rest = count - len(left_out)
            if rest <= 0:
                return mean
            total = mean * count - sum(cost(score, bandwidth, self.busy) for score in left_out)
            return max(0.0, total / rest)

        return SpreadPick(at_most, exactly)


class Crowded(NamedTuple):
    """The candidates holding more of a workload's pods than the fewest
    (scoring/spread.py's ``Spread.crowded``), which kube-scheduler's own
    spread passes over: how many there are at most, and the nodes, read
    only where they could matter."""

    at_most: int
    nodes: Callable[[], Sequence[NodeScore]]


class SpreadPick(NamedTuple):
    """What the node kube-scheduler's own spread would pick costs a pod:
    at most ``at_most``; ``exactly`` works it out."""

    at_most: float
    exactly: Callable[[], float]


def fullness_at(points: float, busy_above: float) -> float:
    """The link fullness at which a pod's cost reaches ``points`` (``cost`` inverted)."""
    return busy_above + (1.0 - busy_above) * points / 100.0


def fullness_with(score: NodeScore, bandwidth: float) -> float:
    """The share of this node's link in use once a pod of ``bandwidth`` bytes/s is on it."""
    return measured_fullness(score) + fullness_per_byte(score) * bandwidth


def cost(score: NodeScore, bandwidth: float, busy_above: float) -> float:
    """The cost, in points, of a pod of ``bandwidth`` bytes/s on this node as measured."""
    full = fullness_with(score, bandwidth)
    return 0.0 if full <= busy_above else 100.0 * (full - busy_above) / (1.0 - busy_above)


def burst_share(score: NodeScore, bandwidth: float, pods: int) -> float:
    """The share of this node's link ``pods`` pods of ``bandwidth`` bytes/s fill."""
    return fullness_per_byte(score) * bandwidth * pods


def stacked_burst(field: FieldCost, bandwidth: float, pods: int) -> int:
    """``pods``, the burst, where kube-scheduler alone stacking its pods of
    ``bandwidth`` bytes/s on one node would cost the mean candidate
    MIN_SAVING more than one pod; else 1, no heavier than its pod."""
    if pods > 1 and field.mean(bandwidth * pods) - field.mean(bandwidth) >= MIN_SAVING:
        return pods
    return 1


def weight(saving: float, graded: int = 100) -> int:
    """A term's weight: ``graded`` (by rank) scaled by the saving up to
    FULL_SAVING points, at least 1; 0 (no term) under MIN_SAVING."""
    if saving < MIN_SAVING:
        return 0
    return max(1, round(graded * min(1.0, saving / FULL_SAVING)))
