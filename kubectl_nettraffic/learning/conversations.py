"""Who talks to whom, and where each side runs: what steering by peers reads.

The learner (learner.py) fills it: the pairs from one flow query a pass
(peer_traffic.py), and the node of every pod from its own per-pod query
(pod_traffic.py joins kube-state-metrics' ``kube_pod_info`` ``node`` label
when a flow source is set). A pod's node is as fresh as the pass that read
it: a pod is forgotten at the end of a pass that did not see it. Only the
workloads that are in a pair are kept, so the table that every snapshot
carries stays as small as the conversations are.
"""

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.peer_traffic import PeerReport
from kubectl_nettraffic.learning.pod_sample import PodSample


@dataclass(frozen=True)
class Conversations:
    """The pairs of workloads and the bytes/s between them (both directions),
    and the nodes their pods run on."""

    peers: Mapping[Workload, tuple[tuple[Workload, float], ...]]  # busiest first
    places: Mapping[Workload, Mapping[str, int]]  # workload -> node -> pods there
    read_at: float  # when the pairs were read (epoch seconds)
    ignored: Mapping[str, int] = field(default_factory=dict)  # series left out, by reason
    dropped: Mapping[Workload, int] = field(default_factory=dict)  # pairs past the cap

    def pods(self, workload: Workload) -> int:
        return sum(self.places.get(workload, {}).values())


class PodPlaces:
    """Each pod's workload and node, as the learner's passes read them."""

    def __init__(self) -> None:
        self._pods: dict[tuple[str, str], tuple[Workload, str]] = {}
        self._seen: set[tuple[str, str]] = set()  # in the pass under way

    def record(self, samples: Iterable[PodSample]) -> None:
        for sample in samples:
            if sample.workload is None or not sample.node:
                continue  # a bare pod, or one not scheduled yet
            key = (sample.namespace, sample.pod)
            self._pods[key] = (sample.workload, sample.node)
            self._seen.add(key)

    def end_pass(self) -> None:
        """A pass has read every pod: forget those it did not see (gone)."""
        self._pods = {key: place for key, place in self._pods.items() if key in self._seen}
        self._seen = set()

    def of(self, workloads: set[Workload]) -> dict[Workload, dict[str, int]]:
        """Node -> pods, for each of ``workloads`` that has a pod."""
        places: dict[Workload, Counter[str]] = {}
        for workload, node in self._pods.values():
            if workload in workloads:
                places.setdefault(workload, Counter())[node] += 1
        return {workload: dict(nodes) for workload, nodes in places.items()}

    def workloads(self) -> set[Workload]:
        return {workload for workload, _ in self._pods.values()}


def conversations_of(report: PeerReport, places: PodPlaces, read_at: float) -> Conversations:
    """What the steering reads, from a pass's pairs and the pods' nodes."""
    peers = {workload: tuple(pairs) for workload, pairs in report.peers.items()}
    return Conversations(
        peers=peers,
        places=places.of(set(peers)),
        read_at=read_at,
        ignored=dict(report.ignored),
        dropped=dict(report.dropped),
    )


class PeerShare(NamedTuple):
    """One pair as its pods run now: where its bytes go."""

    peer: Workload
    bytes_per_second: float  # both directions
    same_node: float  # share of the bytes between pods on one node
    same_zone: float  # ... in one zone (the same node included)
    cross_zone: float  # ... across zones
    unknown_zone: float  # ... to or from a node without a zone label


def endpoint_shares(conversations: Conversations, peer: Workload) -> dict[str, float]:
    """node -> the share of a client pod's bytes to ``peer`` that go to the
    peer's pods there. A Service spreads connections evenly over its
    endpoints, so a client's bytes split evenly over the peer's pods."""
    places = conversations.places.get(peer, {})
    pods = sum(places.values())
    return {node: count / pods for node, count in places.items()} if pods else {}


def shares_of(
    conversations: Conversations, workload: Workload, zone_of: Mapping[str, str]
) -> list[PeerShare]:
    """``workload``'s peers, busiest first, with the shares of their bytes
    that stay on a node, in a zone and cross zones (``endpoint_shares``)."""
    own = conversations.places.get(workload, {})
    own_pods = conversations.pods(workload)
    shares = []
    for peer, rate in conversations.peers.get(workload, ()):
        split = endpoint_shares(conversations, peer)
        if not own_pods or not split:
            shares.append(PeerShare(peer, rate, 0.0, 0.0, 0.0, 1.0))
            continue
        same_node = sum(count * split.get(node, 0.0) for node, count in own.items()) / own_pods
        by_zone: dict[str, float] = {}
        for node, share in split.items():
            if node in zone_of:
                by_zone[zone_of[node]] = by_zone.get(zone_of[node], 0.0) + share
        zoned_theirs = sum(by_zone.values())
        # Client pods' bytes whose nodes both have a zone, and those in one zone.
        zoned = same_zone = 0.0
        for node, count in own.items():
            if node in zone_of:
                zoned += count * zoned_theirs
                same_zone += count * by_zone.get(zone_of[node], 0.0)
        shares.append(
            PeerShare(
                peer,
                rate,
                same_node,
                same_zone / own_pods,
                (zoned - same_zone) / own_pods,
                1.0 - zoned / own_pods,
            )
        )
    return shares


def bytes_by_place(conversations: Conversations, zone_of: Mapping[str, str]) -> dict[str, float]:
    """Every pair's bytes/s, counted once, split by where they go now:
    ``same-node``, ``same-zone`` (between nodes of one zone), ``cross-zone``
    and ``unknown-zone`` (a node without a zone label, or a side with no pod)."""
    totals = dict.fromkeys(("same-node", "same-zone", "cross-zone", "unknown-zone"), 0.0)
    for workload in conversations.peers:
        for share in shares_of(conversations, workload, zone_of):
            if share.peer < workload:
                continue  # the pair's other side counts it
            rate = share.bytes_per_second
            totals["same-node"] += rate * share.same_node
            totals["same-zone"] += rate * (share.same_zone - share.same_node)
            totals["cross-zone"] += rate * share.cross_zone
            totals["unknown-zone"] += rate * share.unknown_zone
    return totals
