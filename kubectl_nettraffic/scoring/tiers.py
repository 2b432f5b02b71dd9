"""Traffic tiers: a coarse, slowly changing label per node, so that a pod's
preference holds over whichever nodes kube-scheduler happens to score.

kube-scheduler scores only a sample of the feasible nodes in a large
cluster (numFeasibleNodesToFind: 500 of 5,000), and a pod's per-node
preferred terms name 3 nodes that are usually not in it. A preferred term
on a node *label* matches in every sample. So each eligible node with data
is put in one of ``TIERS`` tiers, written as the label
``nettraffic.io/traffic-tier``, and a steered pod also prefers the tiers
that cost it least (scoring/tier_weights.py):

- the busiest tier (4) holds the nodes of the busiest quarter that are
  busy: where the cluster's typical pod would cost FULL_SAVING points
  (scoring/savings.py: a tenth of the way from ``steering.busyAbove`` to
  full), so that each is worth avoiding in full (``Busy``). None in a
  calm cluster;
- the others split into tiers 1-3 by their rank (tier 1 the quietest
  third), by the score the webhook ranks with, for the typical pod
  (``tier_ranking``).

A tier weighs what its nodes cost a pod on average, so a quarter of the
nodes cut by rank alone put two hot nodes beside ten that cost nothing, and
the pod was steered off all twelve: off kube-scheduler's own pick, most of
the time, since the nodes with the fewest requests run the most pods and so
carry the most traffic. A node that costs a pod a little beside the hot
ones was steered off as hard, and kept off it the node stays the one with
the fewest requests. Where a quarter or more of the nodes are busy, the
tiers are rank quarters.

Ranks, not score thresholds, within the quiet tiers: scores are relative
(traffic mode divides by the busiest node), and thirds give every sample a
spread of tiers whatever the cluster's load. Hysteresis keeps label writes
rare: a node leaves its tier only once its rank is ``margin`` past the
tier's bounds (and a busy one once the typical pod's cost there is under
half of FULL_SAVING), so nodes near a boundary do not flap between refreshes.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from kubectl_nettraffic.scoring.node_scores import NodeScore

TIER_LABEL = "nettraffic.io/traffic-tier"
TIERS = 4
# 0.05: a node must move 5% of the ranking past its tier's edge to change
# tier; at 5,000 nodes that is 250 places.
DEFAULT_MARGIN = 0.05


class Busy(NamedTuple):
    """Which nodes are busy for the tiers: each node's link fullness with
    the typical pod on it (scoring/savings.py's ``fullness_with``); a node
    enters the busiest tier past ``enter`` and leaves it at ``leave`` or
    below (snapshot_tiers: where the pod's cost there reaches FULL_SAVING
    and half of it)."""

    fullness: Mapping[str, float]
    enter: float
    leave: float


def assign_tiers(
    ranked: Sequence[NodeScore],
    previous: Mapping[str, str],
    margin: float = DEFAULT_MARGIN,
    tiers: int = TIERS,
    busy: Busy | None = None,
) -> dict[str, str]:
    """node -> tier ("1" quietest .. str(tiers)) for ``ranked`` (best first).

    ``previous`` is each node's current tier label; a node keeps it while
    its rank's fraction stays within that tier's bounds widened by ``margin``.
    With ``busy``, the busiest tier holds only the busy nodes of the
    busiest quarter (none in a calm cluster), and the rest share the other
    tiers by their rank among themselves.
    """
    if busy is None or tiers < 2:
        return _by_rank(ranked, previous, margin, tiers)
    busiest: set[str] = set()
    count, last = len(ranked), str(tiers)
    for rank, score in enumerate(ranked):
        kept = previous.get(score.name) == last
        position = (rank + 0.5) / count
        in_last_quarter = position >= (tiers - 1) / tiers - (margin if kept else 0.0)
        fullness = busy.fullness.get(score.name, 0.0)
        if in_last_quarter and fullness > (busy.leave if kept else busy.enter):
            busiest.add(score.name)
    rest = [score for score in ranked if score.name not in busiest]
    # The others split into the quieter tiers whether or not any node is
    # busy, so that a node turning busy relabels itself, not a third of the cluster.
    assigned = _by_rank(rest, previous, margin, tiers - 1)
    assigned.update((name, last) for name in busiest)
    return assigned


def _by_rank(
    ranked: Sequence[NodeScore], previous: Mapping[str, str], margin: float, tiers: int
) -> dict[str, str]:
    """``ranked`` in ``tiers`` rank slices, each node kept in its ``previous``
    tier while its rank stays within the tier's bounds widened by ``margin``."""
    count = len(ranked)
    assigned: dict[str, str] = {}
    for rank, score in enumerate(ranked):
        # The middle of the node's place in the ranking, 0..1.
        position = (rank + 0.5) / count
        natural = min(tiers, int(position * tiers) + 1)
        kept = previous.get(score.name)
        if kept is not None and kept.isdigit() and 1 <= int(kept) <= tiers:
            low, high = (int(kept) - 1) / tiers - margin, int(kept) / tiers + margin
            if low <= position <= high:
                assigned[score.name] = kept
                continue
        assigned[score.name] = str(natural)
    return assigned


def tier_changes(
    assigned: Mapping[str, str], current: Mapping[str, str | None]
) -> dict[str, str | None]:
    """The label writes that take nodes from ``current`` to ``assigned``:
    node -> new tier, or None to remove the label (nodes no longer ranked)."""
    changes: dict[str, str | None] = {
        name: tier for name, tier in assigned.items() if current.get(name) != tier
    }
    for name, tier in current.items():
        if tier is not None and name not in assigned:
            changes[name] = None
    return changes


@dataclass(frozen=True)
class TierLabelStatus:
    """What the label writer has done so far (tier_labels.py), as the refresher
    process reports it to the serving process for /metrics."""

    leader: bool = False
    writes: Mapping[str, int] = field(default_factory=dict)  # outcome -> PATCHes
    last_error: str | None = None


def tier_ranking(candidates: Sequence[NodeScore], pod_bandwidth: float) -> Sequence[NodeScore]:
    """``candidates`` (best first) as they rank with one pod of
    ``pod_bandwidth`` bytes/s more on each, as the webhook ranks them for a
    pod (inflight/state.py): a slower link drops by what the pod fills of
    it. The tiers are for every pod, so they rank for the cluster's typical
    one (measuring/tier_labels.py's ``snapshot_tiers``). Where every link
    is alike, the order given."""
    if len({score.penalty_per_byte for score in candidates}) < 2:
        return candidates
    return sorted(candidates, key=lambda score: -score.score_with(pod_bandwidth))
