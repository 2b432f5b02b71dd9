"""The queries of the young rounds: the controllers created lately, their
pods, and the cluster's pod count (learning/pod_traffic.py runs them;
learning/schedule.py says when). Also the kube-state-metrics selector both
the young rounds and the slice rounds use."""

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from kubectl_nettraffic.config import LearningSettings

K = TypeVar("K")
T = TypeVar("T")


def ksm_series(settings: LearningSettings, selector: str) -> str:
    """A kube-state-metrics series with its pod labels renamed to namespace/pod if need be."""
    expression = selector
    if settings.namespace_label != "namespace":
        expression = (
            f'label_replace({expression}, "namespace", "$1", "{settings.namespace_label}", "(.*)")'
        )
    if settings.pod_label != "pod":
        expression = f'label_replace({expression}, "pod", "$1", "{settings.pod_label}", "(.*)")'
    return expression


# kube-state-metrics' creation time of each controller kind a steered pod
# has, and the label that holds the controller's name: a new workload is a
# new controller. A rollout's new ReplicaSet is one too (its Deployment's
# figure is known already; reading it again costs one small round).
YOUNG_CONTROLLERS = (
    ("ReplicaSet", "kube_replicaset_created", "replicaset"),
    ("StatefulSet", "kube_statefulset_created", "statefulset"),
    ("Job", "kube_job_created", "job_name"),
)
# The most young controllers, and young pods, one round reads: Prometheus
# looks a list of names up in its index directly up to 256 of them
# (FastRegexMatcher's maxSetMatches, model/labels/regexp.go), beyond which
# it matches every value in turn. More wait for their slice.
MOST_YOUNG = 256
# Young rounds look for new controllers when this many intervals have
# passed since the last look (every other round: rounds start an interval
# apart at least, and the half spares a late one).
YOUNG_LOOK_EVERY = 1.5
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


def build_young_workloads_query(settings: LearningSettings, age: float) -> str:
    """The controllers created within ``age``, each with its creation time.
    One instant read per controller: there are far fewer controllers than
    pods, and reading every pod's creation time cost a Prometheus core for
    about a second each round (docs/design/new-workloads.md)."""
    # Filtered first: the comparison is the only step that reads every
    # controller; the relabelling and the max (for two kube-state-metrics
    # replicas exporting the same series) see only the young ones.
    parts = []
    for kind, metric, label in YOUNG_CONTROLLERS:
        young = ksm_series(settings, f"{metric} > time() - {age:g}")
        parts.append(
            f'label_replace(label_replace({young}, "owner_name", "$1", "{label}", "(.+)"),'
            f' "owner_kind", "{kind}", "", "")'
        )
    return f"max by (namespace, owner_kind, owner_name) ({' or '.join(parts)})"


def young_workloads_from(result: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The young controllers' (namespace, kind, name), the newest first."""
    found = []
    for series in result:
        metric: Mapping[str, str] = series.get("metric") or {}
        name = metric.get("owner_name", "")
        try:
            created = float(series["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        if _NAME.fullmatch(name):
            found.append((created, metric.get("namespace", ""), metric.get("owner_kind", ""), name))
    found.sort(reverse=True)
    return [(namespace, kind, name) for _, namespace, kind, name in found[:MOST_YOUNG]]


def build_owned_pods_query(settings: LearningSettings, owners: str) -> str:
    """The pods of the controllers named by the regular expression ``owners``."""
    return ksm_series(settings, f'{settings.pod_owner_metric}{{owner_name=~"{owners}"}}')


def owned_pods_from(
    result: list[dict[str, Any]], workloads: list[tuple[str, str, str]]
) -> list[tuple[str, str]]:
    """The (namespace, pod) of ``workloads``' pods, at most MOST_YOUNG in all
    and an equal share each: a few samples are all a workload's figure needs
    (learning.minSamples), so a large new workload leaves room for the rest."""
    wanted = set(workloads)
    pods: dict[tuple[str, str, str], list[str]] = {}
    for series in result:
        metric: Mapping[str, str] = series.get("metric") or {}
        owner = (
            metric.get("namespace", ""),
            metric.get("owner_kind", ""),
            metric.get("owner_name", ""),
        )
        name = metric.get("pod", "")
        if owner in wanted and _NAME.fullmatch(name):
            pods.setdefault(owner, []).append(name)
    chosen = equal_shares({owner: sorted(names) for owner, names in pods.items()}, len(wanted))
    return [(owner[0], name) for owner, name in chosen]


def equal_shares(groups: Mapping[K, Sequence[T]], among: int) -> list[tuple[K, T]]:
    """At most MOST_YOUNG items in all, each of ``among`` groups taking the
    same share (its first items) whether or not the others fill theirs."""
    each = max(1, MOST_YOUNG // max(1, among))
    return [(key, item) for key, items in groups.items() for item in items[:each]][:MOST_YOUNG]


def build_pod_count_query(settings: LearningSettings) -> str:
    return f"count({settings.pod_info_metric})"


def names_pattern(names: Iterable[str]) -> str:
    """A PromQL regular expression (in a double-quoted string) for exactly these names."""
    return "|".join(sorted({name.replace(".", "\\\\.") for name in names}))
