"""Score points a node loses for one pod's choice, beside its unseen load.

- Declined nodes: kube-scheduler also filters nodes by what the webhook
  does not see (requests, pod count, ports, volumes), so a node quiet on the
  wire but full would stay the best and every pod of a burst name it first
  in vain. A booking the binding watch moves off its node costs that node
  ``DECLINE_POINTS``, once, until the next measurement (the bookings
  store's ``declined`` view).
- An unlearned burst: booked at ``steering.defaultPodBandwidth`` (nothing
  learned yet), a whole burst fits on the few quietest nodes. Each pod of
  its workload in flight costs its node ``POINTS_PER_POD`` for the next
  one (the store's ``unlearned`` view). Pods booked at a learned figure
  are booked by it alone.

Why these points: docs/design/behaviour.md, "Declined nodes" and
"Unlearned bursts".
"""

from collections.abc import Mapping

from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.placement import Handicap

# A node's live score spans 0..100 before in-flight load: a decline puts
# it below every node that is not itself that far down.
DECLINE_POINTS = 100.0
POINTS_PER_POD = 5.0


def declined_handicap(points: Mapping[str, float]) -> Handicap | None:
    """Points each declined node loses; None when none was declined."""
    if not points:
        return None

    def lost(score: NodeScore) -> float:
        return points.get(score.name, 0.0)

    return lost


def unlearned_handicap(pods: Mapping[str, int] | None) -> Handicap | None:
    """Points each node loses for the next pod of a workload with ``pods``
    in flight per node; None when none is."""
    if not pods:
        return None

    def points(score: NodeScore) -> float:
        return POINTS_PER_POD * pods.get(score.name, 0)

    return points
