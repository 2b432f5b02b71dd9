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

# A node's live score spans 0..100 before in-flight load: a decline puts
# it below every node that is not itself that far down.
DECLINE_POINTS = 100.0
POINTS_PER_POD = 5.0
