"""Spreading the burst of an unlearned workload (booked at the default).

A pod is booked at ``steering.defaultPodBandwidth`` only while nothing at
all has been learned, not even a cluster-wide figure: the webhook was just
installed, or learning is off. That figure says nothing of what the pod
will send, and booked that light a whole burst fits on the few quietest
nodes. Its pods likely send alike, so each of its pods in flight counts
against its node for the next one of the same workload: ``POINTS_PER_POD``
score points a pod, until the measurements show it. A pod counts where its
booking is (bookings.py's ``unlearned`` view): on the node it was bound
to once the binding watch moves it there, and no more once it is dropped.

Pods booked at a learned figure (their workload's or the cluster-wide one)
are booked by it alone: with a figure that carries information, spreading
on top placed worse (docs/design/new-workloads.md). A few points make a
burst's pods prefer other quiet nodes before a second pod on one; many
more push them onto busy nodes.
"""

from collections.abc import Mapping

from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.placement import Handicap

POINTS_PER_POD = 5.0


def unlearned_handicap(pods: Mapping[str, int] | None) -> Handicap | None:
    """Points each node loses for the next pod of a workload with ``pods``
    in flight per node; None when none is."""
    if not pods:
        return None

    def points(score: NodeScore) -> float:
        return POINTS_PER_POD * pods.get(score.name, 0)

    return points
