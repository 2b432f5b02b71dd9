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

from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.peer_traffic import PeerReport
from kubectl_nettraffic.learning.workload_bandwidth import PodSample


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
