"""The scoreboard as the JSON document of docs/design/architecture.md, Contracts (``top -o json``, ``/scores``).

Pure: snapshot + the unseen load (inflight/bookings.py's view) in, wire dict out. The in-flight load
is folded into each node's score here, so what ``top`` shows is exactly what
the next admission would use.
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from kubectl_nettraffic.kube.nodes import zones_of
from kubectl_nettraffic.learning.conversations import PeerShare, bytes_by_place, shares_of
from kubectl_nettraffic.learning.progress import LearnerProgress
from kubectl_nettraffic.measuring.measurement import Snapshot
from kubectl_nettraffic.scoring.node_scores import rank_key
from kubectl_nettraffic.scoring.tiers import TIER_LABEL
from kubectl_nettraffic.units import format_duration, rfc3339


class NodeRow(TypedDict):
    name: str
    receiveBytesPerSecond: float | None
    transmitBytesPerSecond: float | None
    trafficBytesPerSecond: float | None
    linkUtilization: float | None
    linkSpeedBytesPerSecond: float | None  # summed over the selected devices that report one
    cpuUsageRatio: float | None
    memoryUsageRatio: float | None
    inflightPods: int
    inflightBytesPerSecond: float  # booked on this node and not yet measured
    score: int
    tier: str | None  # the node's nettraffic.io/traffic-tier label, as written
    eligible: bool
    reason: str | None


class ScoresDocument(TypedDict):
    generatedAt: str
    source: str
    window: str
    stale: bool
    nodes: list[NodeRow]


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _tier(snapshot: Snapshot, name: str) -> str | None:
    node = snapshot.nodes.get(name)
    return node.labels.get(TIER_LABEL) if node is not None else None


def scores_document(
    snapshot: Snapshot, inflight: Mapping[str, tuple[float, int]], stale: bool
) -> ScoresDocument:
    def extra(name: str) -> float:
        return inflight.get(name, (0.0, 0))[0]

    ranked = sorted(snapshot.scores, key=lambda s: rank_key(s, extra(s.name)))
    rows: list[NodeRow] = []
    for node in ranked:
        rows.append(
            NodeRow(
                name=node.name,
                receiveBytesPerSecond=_rounded(node.receive, 3),
                transmitBytesPerSecond=_rounded(node.transmit, 3),
                trafficBytesPerSecond=_rounded(node.traffic, 3),
                linkUtilization=_rounded(node.link_utilization, 6),
                linkSpeedBytesPerSecond=node.link_speed,
                cpuUsageRatio=_rounded(node.cpu_ratio, 6),
                memoryUsageRatio=_rounded(node.memory_ratio, 6),
                inflightPods=inflight.get(node.name, (0.0, 0))[1],
                inflightBytesPerSecond=round(extra(node.name), 3),
                score=round(min(100.0, max(0.0, node.score_with(extra(node.name))))),
                tier=_tier(snapshot, node.name),
                eligible=node.eligible,
                reason=node.reason,
            )
        )
    return ScoresDocument(
        generatedAt=rfc3339(snapshot.generated_at),
        source=snapshot.source,
        window=format_duration(snapshot.window),
        stale=stale,
        nodes=rows,
    )


def diagnostics_document(snapshot: Snapshot) -> dict[str, Any]:
    """Extra detail for ``-o wide`` and doctor: what did not map, and why."""
    d = snapshot.diagnostics
    return {
        "unmappedSeries": list(d.unmapped_series),
        "nodesWithoutSeries": list(d.nodes_without_series),
        "duplicateExporters": {k: list(v) for k, v in d.duplicate_exporters.items()},
        "nonFinite": list(d.non_finite),
        "errors": list(d.errors),
    }


def workloads_document(snapshot: Snapshot, price_per_gb: float = 0.0) -> dict[str, Any]:
    """The learned bandwidth table (``GET /workloads``): per workload, and
    cluster-wide; with a flow source, each workload's peers as its pods run
    now (``peer_documents``) and what the flow query left out."""
    learned = snapshot.learned
    figures = learned.workloads if learned else {}
    conversations = learned.conversations if learned else None
    talking = set(conversations.peers) if conversations else set()
    zone_of = zones_of(snapshot.nodes.values()) if conversations else {}
    rows = []
    for workload in sorted(set(figures) | talking):
        figure = figures.get(workload)
        row: dict[str, Any] = {
            "namespace": workload.namespace,
            "kind": workload.kind,
            "name": workload.name,
            "learnedBytesPerSecond": None if figure is None else round(figure, 3),
        }
        if conversations is not None:
            row["peers"] = peer_documents(shares_of(conversations, workload, zone_of), price_per_gb)
        rows.append(row)
    return {
        "generatedAt": rfc3339(
            learned.learned_at if learned and learned.learned_at else snapshot.generated_at
        ),
        "learning": learned is not None,
        "missing": list(snapshot.diagnostics.learning_missing),
        "clusterBytesPerSecond": None
        if learned is None or learned.cluster is None
        else round(learned.cluster, 3),
        "conversations": None
        if conversations is None
        else {
            "readAt": rfc3339(conversations.read_at),
            # Learner passes since; past peers.maxAgePasses they pull no more.
            "agePasses": learned.pairs_age if learned else 0,
            "pulling": bool(learned and learned.pairs_pull),
            "failedReads": dict(sorted((learned.peer_failures if learned else {}).items())),
            "ignoredSeries": dict(sorted(conversations.ignored.items())),
            "droppedPairs": {str(w): n for w, n in sorted(conversations.dropped.items())},
            "nodesWithoutZone": sorted(set(snapshot.nodes) - set(zone_of)),
        },
        "workloads": rows,
    }


def peer_documents(shares: Sequence[PeerShare], price_per_gb: float) -> list[dict[str, Any]]:
    """One workload's peers: bytes/s, where they go, and what crossing
    zones costs a month at ``price_per_gb`` each way."""
    return [
        {
            "namespace": share.peer.namespace,
            "kind": share.peer.kind,
            "name": share.peer.name,
            "bytesPerSecond": round(share.bytes_per_second, 3),
            # Of them, those each way, where the flow source tells it.
            "sentBytesPerSecond": None if share.sent is None else round(share.sent, 3),
            "receivedBytesPerSecond": (
                None
                if share.sent is None
                else round(max(0.0, share.bytes_per_second - share.sent), 3)
            ),
            "sameNodeShare": round(share.same_node, 4),
            "sameZoneShare": round(share.same_zone, 4),
            "crossZoneShare": round(share.cross_zone, 4),
            "unknownZoneShare": round(share.unknown_zone, 4),
            # Who calls whom, and how the called side's Services route it.
            "direction": share.direction,
            "routing": share.routing,
            "crossZoneCostPerMonth": round(
                cross_zone_cost(share.bytes_per_second * share.cross_zone, price_per_gb), 2
            ),
        }
        for share in shares
    ]


def peer_bytes_by_place(snapshot: Snapshot) -> dict[str, float]:
    """The pairs' bytes/s by where they go now (learning/conversations.py's
    ``bytes_by_place``); empty without a flow source."""
    learned = snapshot.learned
    if learned is None or learned.conversations is None:
        return {}
    return bytes_by_place(learned.conversations, zones_of(snapshot.nodes.values()))


SECONDS_PER_MONTH = 30 * 86400.0


def cross_zone_cost(bytes_per_second: float, price_per_gb: float) -> float:
    """A month of ``bytes_per_second`` across zones, billed each way (GB: 10^9 bytes)."""
    return bytes_per_second * SECONDS_PER_MONTH / 1e9 * price_per_gb * 2


def pairs_age(snapshot: Snapshot | None) -> float | None:
    """Learner passes since the pairs in use were read; None: no pairs,
    and no read failed (no flow source, or none read yet)."""
    learned = snapshot.learned if snapshot else None
    if learned is None or (learned.conversations is None and not learned.peer_failures):
        return None
    return float(learned.pairs_age)


def peer_routing(snapshot: Snapshot | None) -> dict[str, int]:
    """Called workloads whose Services keep their callers near, by routing."""
    learned = snapshot.learned if snapshot else None
    if learned is None or learned.conversations is None:
        return {}
    return dict(Counter(learned.conversations.routing.values()))


def peer_routing_notes(snapshot: Snapshot | None) -> Mapping[str, int]:
    """Services the last pair read counted as spread though they ask otherwise, by reason."""
    learned = snapshot.learned if snapshot else None
    if learned is None or learned.conversations is None:
        return {}
    return learned.conversations.routing_notes


def peer_read_failures(snapshot: Snapshot | None) -> Mapping[str, int]:
    """Failed reads of the flow metrics so far, by reason."""
    learned = snapshot.learned if snapshot else None
    return {} if learned is None else learned.peer_failures


def learner_progress(snapshot: Snapshot | None) -> LearnerProgress | None:
    """The learner's rounds and passes so far; None before it published."""
    learned = snapshot.learned if snapshot else None
    return None if learned is None else learned.progress
