"""Nodes kube-scheduler declined: named first, bound elsewhere.

The webhook ranks nodes by their traffic; kube-scheduler also filters them
by what the webhook does not see (requests against allocatable, the pod
count, host ports, volumes) and scores them by its other plugins. A node
quiet on the wire but full of requests stays the webhook's best node
however many pods name it: each is bound elsewhere, its booking follows it
there (bindings.py), and the node looks as free as before. Every pod of a
burst then names it first, the first preference's weight is spent on a
node that cannot take the pod, and the pods land where the lesser
preferences and kube-scheduler's other plugins put them
(docs/design/late-bindings.md, "Declined nodes").

So a booking the binding watch moves off the node it was booked on counts
against that node: ``DECLINE_POINTS`` score points, until the next
measurement is adopted (bookings.py's ``declined`` view). A node that cannot take pods is then named first
once a refresh, not for every pod; a node that only lost to the other
plugins once is passed over for the rest of that refresh interval, at the
cost of the next-best node's small difference.

A node loses the points once, however many pods it declines: one decline
puts it below the nodes that were not, and the declined ones keep their
order by traffic among themselves. In a cluster of 100 nodes or more a
pod whose preferred nodes were not in kube-scheduler's sample is bound
elsewhere as well, and its first preference counts as declined though it
was never considered; a burst that declines many nodes so shifts them all
alike, instead of ranking them by how often a sample missed them.
"""

from collections.abc import Mapping

from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.placement import Handicap

# A node's live score spans 0..100 before in-flight load: a decline puts
# it below every node that is not itself that far down.
DECLINE_POINTS = 100.0


def declined_handicap(points: Mapping[str, float]) -> Handicap | None:
    """Points each node loses (bookings.py's ``declined`` view); None when none was declined."""
    if not points:
        return None

    def lost(score: NodeScore) -> float:
        return points.get(score.name, 0.0)

    return lost
