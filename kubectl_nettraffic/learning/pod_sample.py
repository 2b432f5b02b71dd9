"""One pod's traffic as the learner's queries read it."""

from typing import NamedTuple

from kubectl_nettraffic.kube.workloads import Workload


class PodSample(NamedTuple):
    """One pod's rates over the rate window, and its workload."""

    namespace: str
    pod: str
    receive: float
    transmit: float
    workload: Workload | None  # None: no owner known (a bare pod)
    # When the pod was created (epoch seconds), for a pod created so recently
    # that its rates cover part of the window; None: they cover all of it.
    created: float | None = None
    # The node it runs on, read only when a flow source is set (steering by
    # peers needs it); "" otherwise, and for a pod not scheduled yet.
    node: str = ""
    # The ReplicaSet that owns it (a Deployment's or Rollout's template),
    # "" for a pod of any other owner: a rollout's new pods replace the
    # others, so steering by peers counts a pod's template apart.
    template: str = ""
