"""Which workload the end of a flow series names, as each source names it.

The learner knows workloads as ``owner_workload`` names them (kube/workloads.py).
The flow sources mostly agree; where they do not, the end is matched by the
source's own rule, checked in its code, or left out by reason:

- an end whose owner type the source gives (Beyla's and OBI's
  ``k8s_src_owner_type`` / ``k8s_dst_owner_type``) must be a workload of that
  kind: both cut a ReplicaSet's name at its last '-' and call it a
  Deployment, which is the Deployment's or the Argo Rollout's name; and cut
  a Job's name the same way and call it a CronJob (open-telemetry/
  opentelemetry-ebpf-instrumentation, pkg/kube/kubecache/meta, ``ownersFrom``),
  so a Job of no CronJob (``db-migrate`` named ``db``) names nothing the
  learner knows: ``job-name-cut``, never the Deployment ``db``;
- a Service end (Beyla and OBI name the Service where they saw its cluster
  IP): ``service-end``; which pods took the bytes is not in the series;
- Istio names an OpenShift DeploymentConfig's pods by the DeploymentConfig
  (istio/istio pkg/kube/util.go ``GetDeployMetaFromPod``, the
  ``deploymentconfig`` label); the learner names them by the
  ReplicationController the DeploymentConfig rolled out, ``<name>-<version>``
  (openshift/origin pkg/apps/util ``DeploymentNameForConfigVersion``): a
  name the learner does not know is matched to its newest such
  ReplicationController, the one new pods come from;
- Linkerd labels an Argo Rollout's pods by their ReplicaSet,
  ``<rollout>-<hash>`` (the injector's ``linkerd.io/proxy-replicaset``, as
  the ReplicaSet's owner is not a Deployment): a name the learner does not
  know whose head before the last '-' is a Rollout's is that Rollout.
"""

import re
from collections.abc import Iterable

from kubectl_nettraffic.kube.workloads import Workload

SERVICE = "Service"
# The kinds a Beyla / OBI owner type may stand for (see above).
OWNER_KINDS = {"Deployment": ("Deployment", "Rollout")}
_ROLLED_OUT = re.compile(r"(.+)-([0-9]+)")  # a DeploymentConfig's ReplicationController


class WorkloadNames:
    """The known workloads, by the names flow sources give them."""

    def __init__(self, known: Iterable[Workload]) -> None:
        # (namespace, name) -> the workload; None where two kinds share it.
        self._named: dict[tuple[str, str], Workload | None] = {}
        self._kinds: dict[tuple[str, str, str], Workload] = {}
        self._configs: dict[tuple[str, str], tuple[int, Workload]] = {}
        for workload in known:
            key = (workload.namespace, workload.name)
            self._named[key] = workload if key not in self._named else None
            self._kinds[(workload.namespace, workload.kind, workload.name)] = workload
            rolled_out = _ROLLED_OUT.fullmatch(workload.name)
            if workload.kind == "ReplicationController" and rolled_out:
                config = (workload.namespace, rolled_out[1])
                version = int(rolled_out[2])
                if version > self._configs.get(config, (-1, workload))[0]:
                    self._configs[config] = (version, workload)

    def find(self, namespace: str, name: str, owner_type: str = "") -> Workload | str:
        """The workload an end names, or why none: ``service-end``,
        ``job-name-cut``, ``ambiguous-workload`` or ``unknown-workload``."""
        if owner_type == SERVICE:
            return "service-end"
        if owner_type:
            for kind in OWNER_KINDS.get(owner_type, (owner_type,)):
                workload = self._kinds.get((namespace, kind, name))
                if workload is not None:
                    return workload
            return "job-name-cut" if owner_type == "CronJob" else "unknown-workload"
        key = (namespace, name)
        if key in self._named:
            named = self._named[key]
            return "ambiguous-workload" if named is None else named
        config = self._configs.get((namespace, name))
        if config is not None:
            return config[1]
        head = name.rpartition("-")[0]
        rollout = self._kinds.get((namespace, "Rollout", head)) if head else None
        return rollout if rollout is not None else "unknown-workload"
