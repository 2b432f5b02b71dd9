"""What the scheduler extender says of each node, from the scores the
webhook steers by (webhook/extender.py speaks the wire format).

- filter: a node the pod cannot run on (not Ready, cordoned, unselected,
  tainted against it) fails unresolvably (preemption cannot fix it); one
  over ``extender.maxTraffic`` or ``extender.maxLinkUtilization`` fails; a
  node the snapshot does not know is kept (no opinion).
- prioritize: 0..10 per node, its live score (unseen load included) scaled,
  less what the pod's expected bytes cost its link beyond what they cost
  the fastest (as the webhook ranks: scoring/placement.py's
  ``link_handicap``); 0 for a node without data.

Missing or stale scores: no node fails and every node scores 0, the same
for all (no opinion).
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from kubectl_nettraffic.config import ExtenderSettings
from kubectl_nettraffic.errors import ClusterError
from kubectl_nettraffic.kube.nodes import Node, ineligibility, node_from_json
from kubectl_nettraffic.labels import LabelSelector
from kubectl_nettraffic.measuring.measurement import Snapshot
from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.placement import link_handicap

MAX_EXTENDER_PRIORITY = 10  # extenderv1.MaxExtenderPriority


class Filtered(NamedTuple):
    failed: dict[str, str]  # node -> why; preemption might make room
    unresolvable: dict[str, str]  # node -> why; preemption cannot help


def _over_limit(score: NodeScore, limits: ExtenderSettings) -> str | None:
    if limits.max_traffic and score.traffic is not None and score.traffic > limits.max_traffic:
        return f"traffic {score.traffic:.0f} B/s is above the extender limit {limits.max_traffic:.0f} B/s"
    if (
        limits.max_link_utilization
        and score.link_utilization is not None
        and score.link_utilization > limits.max_link_utilization
    ):
        return (
            f"link utilisation {score.link_utilization:.0%} is above the extender limit "
            f"{limits.max_link_utilization:.0%}"
        )
    return None


def filter_nodes(
    pod: Mapping[str, Any],
    names: Iterable[str],
    node_objects: Sequence[Mapping[str, Any]],
    snapshot: Snapshot | None,
    selector: LabelSelector,
    limits: ExtenderSettings,
) -> Filtered:
    """The nodes of ``names`` the pod may not use, each with its reason;
    ``node_objects``: the Nodes the scheduler sent (else the snapshot's are read).
    ``snapshot``: None when missing or stale."""
    filtered = Filtered({}, {})
    if snapshot is None:
        return filtered
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    given: dict[str, Node] = {}
    for obj in node_objects:
        try:
            given[obj["metadata"]["name"]] = node_from_json(obj)
        except ClusterError:
            continue
    scores = {s.name: s for s in snapshot.scores}
    for name in names:
        node = given.get(name) or snapshot.nodes.get(name)
        if node is None:
            continue  # a node we know nothing of: no opinion, keep it
        reason = ineligibility(node, selector, tolerations)
        if reason:
            filtered.unresolvable[name] = f"nettraffic: {reason}"
            continue
        over = _over_limit(scores[name], limits) if name in scores else None
        if over:
            filtered.failed[name] = f"nettraffic: {over}"
    return filtered


def host_scores(
    names: Iterable[str],
    snapshot: Snapshot | None,
    unseen: Mapping[str, tuple[float, int]],
    bandwidth: float,
) -> list[tuple[str, int]]:
    """(node, 0..10) for each of ``names``; ``unseen``: the in-flight view;
    ``bandwidth``: what the pod is expected to send. ``snapshot``: None when
    missing or stale."""
    if snapshot is None:
        return [(name, 0) for name in names]
    scores = {s.name: s for s in snapshot.scores}
    least = min((s.penalty_per_byte for s in snapshot.scores if s.has_data), default=0.0)
    lowered = link_handicap(least, bandwidth)
    priorities = []
    for name in names:
        score = scores.get(name)
        if score is None or not score.has_data:
            value = 0
        else:
            live = score.score_with(unseen.get(name, (0.0, 0))[0]) - lowered(score)
            value = round(max(0.0, min(100.0, live)) * MAX_EXTENDER_PRIORITY / 100)
        priorities.append((name, value))
    return priorities
