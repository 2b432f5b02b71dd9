"""Per-pod network rates from cAdvisor, with each pod's workload from
kube-state-metrics: the learner's input (workload_bandwidth.py), in one
instant query per slice round and three small ones per young round
(learning/learner.py, learning/schedule.py), beside the node query.

- Rates: ``rate()`` of the kubelet's cAdvisor counters
  ``container_network_{receive,transmit}_bytes_total`` over the window,
  summed per pod over its interfaces. Network counters belong to the pod's
  sandbox, which containerd labels ``container=""`` and CRI-O
  ``container="POD"``: the series are selected by ``pod!=""``, never by
  container name. ``rate()`` handles counter resets.
- hostNetwork pods are left out: their "pod" series are the node's own
  interfaces (``kube_pod_info{host_network="true"}``). A pod created within
  the window shows the share of it that it has been sending; its creation
  time (kube-state-metrics' ``kube_pod_created``) comes with it, and the
  learner scales it up (workload_bandwidth.py).
- The workload: ``kube_pod_owner`` gives the pod's controller;
  ``kube_replicaset_owner`` rolls a ReplicaSet up to its Deployment, so a
  rollout keeps its history. A pod without an owner (``<none>``) counts
  toward the cluster-wide figure only.

The five parts come back in one answer, each tagged with a
``nettraffic_part`` label. No cAdvisor series, or no kube-state-metrics
series at all: the report says which is missing, and nothing is learned.
"""

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from kubectl_nettraffic.config import LearningSettings
from kubectl_nettraffic.kube.workloads import NO_OWNER, Workload, owner_workload
from kubectl_nettraffic.learning.pod_sample import PodSample
from kubectl_nettraffic.learning.pod_slices import WHOLE, PodSlice
from kubectl_nettraffic.learning.young_workloads import (
    YOUNG_LOOK_EVERY,
    build_owned_pods_query,
    build_pod_count_query,
    build_young_workloads_query,
    ksm_series,
    names_pattern,
    owned_pods_from,
    young_workloads_from,
)
from kubectl_nettraffic.sources.prometheus import PrometheusSource
from kubectl_nettraffic.units import promql_duration

PART_LABEL = "nettraffic_part"
# kube-state-metrics' creation time of a pod, in Unix seconds (internal/store/pod.go).
POD_CREATED_METRIC = "kube_pod_created"
_ANY_POD = re.compile(r'(?:^|,)\s*pod\s*!=\s*""\s*(?=,|$)')  # the matcher pod!=""


@dataclass(frozen=True)
class PodTrafficReport:
    samples: tuple[PodSample, ...]
    missing: tuple[str, ...]  # "cadvisor", "kube-state-metrics": what to install or fix
    host_network_pods: int
    evaluated_at: float


def build_pod_query(settings: LearningSettings, window: float) -> str:
    ns, pod = settings.namespace_label, settings.pod_label
    selector = settings.pod_selector
    rate_window = promql_duration(window)

    def tagged(expression: str, part: str) -> str:
        return f'label_replace({expression}, "{PART_LABEL}", "{part}", "", "")'

    parts = [
        tagged(
            f"sum by (namespace, pod) (rate({settings.receive_metric}{{{selector}}}[{rate_window}]))",
            "receive",
        ),
        tagged(
            f"sum by (namespace, pod) (rate({settings.transmit_metric}{{{selector}}}[{rate_window}]))",
            "transmit",
        ),
        tagged(
            f'max by ({ns}, {pod}, owner_kind, owner_name) ({settings.pod_owner_metric}{{owner_is_controller="true"}})'
            f' or max by ({ns}, {pod}, owner_kind, owner_name) ({settings.pod_owner_metric}{{owner_kind="{NO_OWNER}"}})',
            "owner",
        ),
        tagged(
            f"max by ({ns}, replicaset, owner_kind, owner_name) ({settings.replicaset_owner_metric})",
            "replicaset",
        ),
        tagged(
            f'max by ({ns}, {pod}) ({settings.pod_info_metric}{{host_network="true"}})',
            "host-network",
        ),
        tagged(f'max by ({ns}, {pod}, node) ({settings.pod_info_metric}{{node!=""}})', "node"),
    ]
    return "\nor ".join(parts)


def build_learner_query(
    settings: LearningSettings,
    window: float,
    direction: str,
    pods: str = "",
    replicasets: str | None = None,
    pod_startup: float = 0.0,
    with_nodes: bool = False,
) -> str:
    """The learner's query: one series per pod, its bandwidth in ``direction``
    with its controller joined on, plus one per ReplicaSet for the roll-up to
    its Deployment, and the creation time of each pod created within
    ``window + pod_startup`` (its rates cover part of the window). The joins
    run in Prometheus, so the answer has a series per pod instead of three
    (bench.learning: 150,000 pods). ``pods``: a regular expression the pods'
    names must match (a slice, or the young pods); empty for every pod.
    ``replicasets``: the same for the ReplicaSets rolled up (None: every one;
    empty: none). ``with_nodes``: each pod's node too, from ``kube_pod_info``
    (for steering by peers), a series per pod in a part of its own; a pod
    without that series keeps its sample, with no node."""
    names = {
        "receive": settings.receive_metric,
        "transmit": settings.transmit_metric,
    }
    wanted = [names[direction]] if direction in names else list(names.values())
    rate_window = promql_duration(window)
    cadvisor = settings.pod_selector
    if pods:
        # The names match only pod-level series already, and Prometheus
        # resolves pod!="" by merging the index entries of every pod name,
        # most of a named query's cost (docs/design/new-workloads.md).
        cadvisor = _ANY_POD.sub("", cadvisor).strip(", ")
        cadvisor = ",".join(filter(None, (cadvisor, f'pod=~"{pods}"')))
    ksm = f',{settings.pod_label}=~"{pods}"' if pods else ""
    # One sum per counter, then added: rate() over both names at once would
    # give two series with one labelset per pod, which Prometheus refuses.
    bandwidth = " + ".join(
        f"sum by (namespace, pod) (rate({name}{{{cadvisor}}}[{rate_window}]))" for name in wanted
    )
    owners = ksm_series(
        settings,
        f'{settings.pod_owner_metric}{{owner_is_controller="true"{ksm}}} '
        f'or {settings.pod_owner_metric}{{owner_kind="{NO_OWNER}"{ksm}}}',
    )
    host_network = ksm_series(settings, f'{settings.pod_info_metric}{{host_network="true"{ksm}}}')
    created = ksm_series(settings, f"{POD_CREATED_METRIC}{{{ksm.lstrip(',')}}}")
    owned = f"max by (namespace, pod, owner_kind, owner_name) ({owners})"
    parts = [
        f"label_replace(({bandwidth})"
        f" * on (namespace, pod) group_left (owner_kind, owner_name) {owned}"
        f" unless on (namespace, pod) ({host_network}),"
        f' "{PART_LABEL}", "pod", "", "")',
        f"label_replace(max by (namespace, pod) ({created}) > time() - {window + pod_startup:g},"
        f' "{PART_LABEL}", "created", "", "")',
    ]
    if with_nodes:
        # Matched to the pods here rather than joined in Prometheus: the join
        # kept the pods without this series only by reading the owners twice,
        # and failed on a pod with two nodes. A pass over 150,000 pods took
        # 1.50x one without nodes that way, 1.35x this way (bench.pod_reads).
        info = ksm_series(settings, f"{settings.pod_info_metric}{{{ksm.lstrip(',')}}}")
        parts.append(
            f'label_replace(max by (namespace, pod, node) ({info}), "{PART_LABEL}", "node", "", "")'
        )
    if replicasets != "":
        rs_selector = f'{{replicaset=~"{replicasets}"}}' if replicasets else ""
        rollup = ksm_series(settings, settings.replicaset_owner_metric + rs_selector)
        parts.append(
            f"label_replace(max by (namespace, replicaset, owner_kind, owner_name) ({rollup}),"
            f' "{PART_LABEL}", "replicaset", "", "")'
        )
    return "\nor ".join(parts)


Rollup = dict[tuple[str, str], tuple[str, str]]  # (namespace, ReplicaSet): its owner


def rollup_from(result: list[dict[str, Any]]) -> Rollup:
    """The ReplicaSets' owners in the learner's answer, by (namespace, name)."""
    replicasets: Rollup = {}
    for series in result:
        metric: Mapping[str, str] = series.get("metric") or {}
        if metric.get(PART_LABEL) == "replicaset":
            key = (metric.get("namespace", ""), metric.get("replicaset", ""))
            replicasets[key] = (metric.get("owner_kind", ""), metric.get("owner_name", ""))
    return replicasets


def learner_samples_from(
    result: list[dict[str, Any]], direction: str, replicasets: Rollup
) -> tuple[PodSample, ...]:
    """The learner's samples from its query's answer (the bandwidth is put
    in the direction it was measured in), each pod's ReplicaSet rolled up
    through ``replicasets``, its creation time when it is recent, and its
    node where the query read the nodes (none: "")."""
    pods: list[tuple[Mapping[str, str], float]] = []
    created: dict[tuple[str, str], float] = {}
    nodes: dict[tuple[str, str], str] = {}
    for series in result:
        metric: Mapping[str, str] = series.get("metric") or {}
        part = metric.get(PART_LABEL)
        key = (metric.get("namespace", ""), metric.get("pod", ""))
        if part == "node":
            nodes[key] = metric.get("node", "")
            continue
        if part not in ("pod", "created"):
            continue
        try:
            value = float(series["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        if part == "pod":
            pods.append((metric, value))
        else:
            created[key] = value
    samples = []
    for metric, value in pods:
        namespace, pod = metric.get("namespace", ""), metric.get("pod", "")
        owner = (metric.get("owner_kind", ""), metric.get("owner_name", ""))
        receive, transmit = (0.0, value) if direction == "transmit" else (value, 0.0)
        samples.append(
            PodSample(
                namespace,
                pod,
                receive,
                transmit,
                _workload(namespace, owner, replicasets),
                created.get((namespace, pod)),
                nodes.get((namespace, pod), ""),
                _template(owner),
            )
        )
    return tuple(samples)


def samples_from(
    result: list[dict[str, Any]], settings: LearningSettings, evaluated_at: float
) -> PodTrafficReport:
    """Split the answer into its parts and join them per pod."""
    ns_label, pod_label = settings.namespace_label, settings.pod_label
    receive: dict[tuple[str, str], float] = {}
    transmit: dict[tuple[str, str], float] = {}
    owners: dict[tuple[str, str], tuple[str, str]] = {}
    replicasets: dict[tuple[str, str], tuple[str, str]] = {}
    host_network: set[tuple[str, str]] = set()
    nodes: dict[tuple[str, str], str] = {}
    for series in result:
        metric: Mapping[str, str] = series.get("metric") or {}
        part = metric.get(PART_LABEL)
        try:
            value = float(series["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        if part in ("receive", "transmit"):
            key = (metric.get("namespace", ""), metric.get("pod", ""))
            (receive if part == "receive" else transmit)[key] = value
        elif part == "owner":
            key = (metric.get(ns_label, ""), metric.get(pod_label, ""))
            owners[key] = (metric.get("owner_kind", ""), metric.get("owner_name", ""))
        elif part == "replicaset":
            key = (metric.get(ns_label, ""), metric.get("replicaset", ""))
            replicasets[key] = (metric.get("owner_kind", ""), metric.get("owner_name", ""))
        elif part == "host-network":
            host_network.add((metric.get(ns_label, ""), metric.get(pod_label, "")))
        elif part == "node":
            nodes[(metric.get(ns_label, ""), metric.get(pod_label, ""))] = metric.get("node", "")
    missing = []
    if not receive and not transmit:
        missing.append("cadvisor")
    if not owners:
        missing.append("kube-state-metrics")
    if missing:
        return PodTrafficReport((), tuple(missing), len(host_network), evaluated_at)
    samples = []
    for key in receive.keys() | transmit.keys():
        if key in host_network:
            continue
        samples.append(
            PodSample(
                key[0],
                key[1],
                receive.get(key, 0.0),
                transmit.get(key, 0.0),
                _workload(key[0], owners.get(key), replicasets),
                node=nodes.get(key, ""),
                template=_template(owners.get(key)),
            )
        )
    return PodTrafficReport(tuple(samples), (), len(host_network), evaluated_at)


def _workload(
    namespace: str,
    owner: tuple[str, str] | None,
    replicasets: Mapping[tuple[str, str], tuple[str, str]],
) -> Workload | None:
    if owner is None:
        return None
    parent = replicasets.get((namespace, owner[1])) if owner[0] == "ReplicaSet" else None
    return owner_workload(namespace, owner[0], owner[1], parent=parent)


def _template(owner: tuple[str, str] | None) -> str:
    """The ReplicaSet that owns the pod, "" for any other owner."""
    return owner[1] if owner is not None and owner[0] == "ReplicaSet" else ""


class PodTrafficSource:
    """Per-pod traffic through the node source's client (auth, TLS).

    ``samples``: the learner's query (joined in Prometheus, one series per
    pod) over every pod or a slice of them; ``young_samples``: the same for
    the pods of the workloads created within learning.youngWorkloadAge;
    ``fetch``: receive and transmit apart, and what is missing (for ``top
    pods`` and ``doctor``).
    """

    def __init__(
        self,
        prometheus: PrometheusSource,
        settings: LearningSettings,
        clock: Callable[[], float] = time.monotonic,
        pod_startup: float = 0.0,
        with_nodes: bool = False,
    ) -> None:
        self.prometheus = prometheus
        self.with_nodes = with_nodes  # each pod's node too (steering by peers)
        self.settings = settings
        # steering.podStartup: how long past the window a new pod's rates still ramp.
        self.pod_startup = pod_startup
        self.clock = clock  # when young controllers were looked for
        self.query = build_pod_query(settings, prometheus.settings.window)
        self.young_workloads_query = build_young_workloads_query(
            settings, settings.young_workload_age
        )
        # Every ReplicaSet's owner, read with a pass's first slice and kept
        # for its other slices (half a slice's cost at 15,000 ReplicaSets,
        # docs/design/new-workloads.md); the young rounds add the new ones.
        self.rollup: Rollup = {}
        # The young controllers last found, and when they were looked for.
        self._young: list[tuple[str, str, str]] = []
        self._young_looked_at: float | None = None

    def fetch(self) -> PodTrafficReport:
        evaluated_at = self.prometheus.clock()
        result = self.prometheus.query_vector(
            self.query, at=evaluated_at, timeout=self.settings.timeout
        )
        return samples_from(result, self.settings, evaluated_at)

    def pod_count(self) -> int:
        result = self.prometheus.query_vector(
            build_pod_count_query(self.settings),
            at=self.prometheus.clock(),
            timeout=self.settings.timeout,
        )
        try:
            return int(float(result[0]["value"][1])) if result else 0
        except (KeyError, IndexError, TypeError, ValueError):
            return 0

    def samples(self, pods: PodSlice = WHOLE) -> PodTrafficReport:
        """The learner's samples of one slice of the pods, their ReplicaSets
        rolled up with what the pass's first slice read. An empty answer for
        the first slice is looked into with the detailed query, once, to say
        what is missing (another slice may simply hold no pod); of its
        samples, the slice's only."""
        report = self._learner_samples(pods.pattern, None if pods.index == 0 else "")
        if report.samples or pods.index != 0:
            return report
        detailed = self.fetch()
        return replace(detailed, samples=tuple(s for s in detailed.samples if pods.holds(s.pod)))

    def young_samples(self) -> PodTrafficReport:
        """The learner's samples of the pods of the controllers created within
        learning.youngWorkloadAge: three small queries (the young controllers,
        their pods by name, those pods' samples), the first the only one that
        reads every controller, and the round ends there when none is young.

        The controllers are looked for every other round (once
        YOUNG_LOOK_EVERY intervals have passed): a new one is found within
        two intervals, and the rounds between read the pods of those found
        only, a fraction of the look's cost, so that young rounds keep to
        their interval within their part of the budget."""
        evaluated_at = self.prometheus.clock()  # the three queries read one moment
        timeout = self.settings.timeout
        now, looked_at = self.clock(), self._young_looked_at
        if looked_at is None or now - looked_at >= YOUNG_LOOK_EVERY * self.settings.interval:
            self._young = young_workloads_from(
                self.prometheus.query_vector(
                    self.young_workloads_query, at=evaluated_at, timeout=timeout
                )
            )
            self._young_looked_at = now
        workloads = self._young
        if not workloads:
            return PodTrafficReport((), (), 0, evaluated_at)
        owners = names_pattern(name for _, _, name in workloads)
        pods = owned_pods_from(
            self.prometheus.query_vector(
                build_owned_pods_query(self.settings, owners), at=evaluated_at, timeout=timeout
            ),
            workloads,
        )
        if not pods:
            return PodTrafficReport((), (), 0, evaluated_at)
        replicasets = names_pattern(name for _, kind, name in workloads if kind == "ReplicaSet")
        report = self._learner_samples(
            names_pattern(name for _, name in pods), replicasets, evaluated_at
        )
        wanted = set(pods)  # the same name in another namespace is not young
        samples = tuple(s for s in report.samples if (s.namespace, s.pod) in wanted)
        return PodTrafficReport(samples, (), 0, report.evaluated_at)

    def _learner_samples(
        self, pods: str, replicasets: str | None = None, at: float | None = None
    ) -> PodTrafficReport:
        evaluated_at = self.prometheus.clock() if at is None else at
        query = build_learner_query(
            self.settings,
            self.prometheus.settings.window,
            self.prometheus.settings.direction,
            pods,
            replicasets,
            self.pod_startup,
            self.with_nodes,
        )
        result = self.prometheus.query_vector(query, at=evaluated_at, timeout=self.settings.timeout)
        if replicasets is None:
            self.rollup = rollup_from(result)
        elif replicasets:
            self.rollup.update(rollup_from(result))
        samples = learner_samples_from(result, self.prometheus.settings.direction, self.rollup)
        return PodTrafficReport(samples, (), 0, evaluated_at)
