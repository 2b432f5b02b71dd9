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
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import NamedTuple

from kubectl_nettraffic.kube.service_routing import NODE, SPREAD, WIDTH, ZONE
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.peer_traffic import PeerReport
from kubectl_nettraffic.learning.pod_sample import PodSample


class Route(NamedTuple):
    """A pair as its server's Services route it."""

    client: Workload
    server: Workload
    routing: str  # ZONE or NODE


@dataclass(frozen=True)
class Conversations:
    """The pairs of workloads and the bytes/s between them (both directions),
    the nodes their pods run on, who calls whom, and how the called
    workloads' Services route their clients."""

    peers: Mapping[Workload, tuple[tuple[Workload, float], ...]]  # busiest first
    places: Mapping[Workload, Mapping[str, int]]  # workload -> node -> pods there
    read_at: float  # when the pairs were read (epoch seconds)
    ignored: Mapping[str, int] = field(default_factory=dict)  # series left out, by reason
    dropped: Mapping[Workload, int] = field(default_factory=dict)  # pairs past the cap
    calls: frozenset[tuple[Workload, Workload]] = frozenset()  # (client, server)
    routing: Mapping[Workload, str] = field(default_factory=dict)  # server -> ZONE or NODE
    # Pairs and Services read as spread though they might not be, by reason:
    # both-directions (kube/service_routing.py has the Services').
    routing_notes: Mapping[str, int] = field(default_factory=dict)
    # workload -> its ReplicaSets -> node -> pods, for the workloads whose
    # pods a ReplicaSet owns (a Deployment's, a Rollout's).
    templates: Mapping[Workload, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)
    # (from, to) -> bytes/s the first sends the second, for the pairs whose
    # source tells the way (PeerReport.sent).
    sent: Mapping[tuple[Workload, Workload], float] = field(default_factory=dict)

    def pods(self, workload: Workload) -> int:
        return sum(self.places.get(workload, {}).values())

    def staying(self, workload: Workload, template: str | None) -> Mapping[str, int]:
        """Node -> the pods of ``workload`` that stay beside a new pod of
        ``template`` (its ReplicaSet; None: it has none): those of that
        ReplicaSet alone, since a rollout's new pods replace the others
        (none while the learner has seen none of them: the rollout has just
        begun); every pod where the pods are not known per ReplicaSet."""
        by_template = self.templates.get(workload)
        if template is None or by_template is None:
            return self.places.get(workload, {})
        return by_template.get(template, {})

    def sent_to(self, workload: Workload, peer: Workload) -> float | None:
        """The bytes/s ``workload`` sends ``peer``; None where the source
        does not tell the pair's ways."""
        if (workload, peer) not in self.sent and (peer, workload) not in self.sent:
            return None
        return self.sent.get((workload, peer), 0.0)

    def route(self, workload: Workload, peer: Workload) -> Route | None:
        """The pair as its server's Services route it; None where they
        spread it evenly, or where the source gives no one direction (each
        end calls the other, or neither is said to)."""
        forward, backward = (workload, peer) in self.calls, (peer, workload) in self.calls
        if forward == backward:
            return None
        client, server = (workload, peer) if forward else (peer, workload)
        routing = self.routing.get(server)
        return None if routing is None else Route(client, server, routing)


class PodPlaces:
    """Each pod's workload and node, as the learner's passes read them."""

    def __init__(self) -> None:
        # (namespace, pod) -> its workload, node and ReplicaSet ("" for none).
        self._pods: dict[tuple[str, str], tuple[Workload, str, str]] = {}
        self._seen: set[tuple[str, str]] = set()  # in the pass under way

    def record(self, samples: Iterable[PodSample]) -> None:
        for sample in samples:
            if sample.workload is None or not sample.node:
                continue  # a bare pod, or one not scheduled yet
            key = (sample.namespace, sample.pod)
            self._pods[key] = (sample.workload, sample.node, sample.template)
            self._seen.add(key)

    def end_pass(self) -> None:
        """A pass has read every pod: forget those it did not see (gone)."""
        self._pods = {key: place for key, place in self._pods.items() if key in self._seen}
        self._seen = set()

    def of(self, workloads: set[Workload]) -> dict[Workload, dict[str, int]]:
        """Node -> pods, for each of ``workloads`` that has a pod."""
        places: dict[Workload, Counter[str]] = {}
        for workload, node, _ in self._pods.values():
            if workload in workloads:
                places.setdefault(workload, Counter())[node] += 1
        return {workload: dict(nodes) for workload, nodes in places.items()}

    def by_template(
        self, places: Mapping[Workload, Mapping[str, int]]
    ) -> dict[Workload, dict[str, Mapping[str, int]]]:
        """Node -> pods per ReplicaSet, for each workload of ``places``
        (``of``) whose pods one owns. A workload all of whose pods are of
        one ReplicaSet (no rollout under way) shares its ``places`` mapping,
        which the snapshot then pickles once."""
        counts: dict[Workload, dict[str, Counter[str]]] = {}
        for workload, node, template in self._pods.values():
            if template and workload in places:
                counts.setdefault(workload, {}).setdefault(template, Counter())[node] += 1
        by_template: dict[Workload, dict[str, Mapping[str, int]]] = {}
        for workload, templates in counts.items():
            whole = places[workload]
            (only, nodes), *others = templates.items()
            if not others and nodes.total() == sum(whole.values()):
                by_template[workload] = {only: whole}
            else:
                by_template[workload] = {t: dict(nodes) for t, nodes in templates.items()}
        return by_template

    def workloads(self) -> set[Workload]:
        return {workload for workload, _, _ in self._pods.values()}

    def routing(
        self, pod_routing: Mapping[tuple[str, str], str], workloads: set[Workload]
    ) -> dict[Workload, str]:
        """Each of ``workloads`` routed as the widest of its pods that back a
        Service (``pod_routing``), where that is a zone or a node."""
        widest: dict[Workload, str] = {}
        for key, (workload, _, _) in self._pods.items():
            routed = pod_routing.get(key)
            if routed is None or workload not in workloads:
                continue
            known = widest.get(workload)
            widest[workload] = routed if known is None else min(known, routed, key=WIDTH.index)
        return {workload: routed for workload, routed in widest.items() if routed != SPREAD}


def conversations_of(
    report: PeerReport,
    places: PodPlaces,
    read_at: float,
    pod_routing: Mapping[tuple[str, str], str] | None = None,
    routing_notes: Mapping[str, int] | None = None,
    every_zone: bool = False,
) -> Conversations:
    """What the steering reads, from a pass's pairs, the pods' nodes and
    ``pod_routing``: (namespace, pod) -> how the Services it backs route
    their clients (kube/service_routing.py), a workload routed as the widest
    of its pods; ``every_zone``: every called workload routed to the
    caller's zone first (a mesh's locality load balancing)."""
    peers = {workload: tuple(pairs) for workload, pairs in report.peers.items()}
    servers = {server for _, server in report.calls}
    notes = dict(routing_notes or {})
    # A pair each end is said to call: no one direction, spread evenly.
    both = sum(
        1 for client, server in report.calls if client < server and (server, client) in report.calls
    )
    if both:
        notes["both-directions"] = notes.get("both-directions", 0) + both
    if every_zone:
        routing = dict.fromkeys(servers, ZONE)
    else:
        routing = places.routing(pod_routing or {}, servers)
    placed = places.of(set(peers))
    return Conversations(
        peers=peers,
        places=placed,
        read_at=read_at,
        ignored=dict(report.ignored),
        dropped=dict(report.dropped),
        calls=frozenset(report.calls),
        routing=routing,
        routing_notes=notes,
        templates=places.by_template(placed),
        sent=dict(report.sent),
    )


class PeerShare(NamedTuple):
    """One pair as its pods run now: where its bytes go."""

    peer: Workload
    bytes_per_second: float  # both directions
    same_node: float  # share of the bytes between pods on one node
    same_zone: float  # ... in one zone (the same node included)
    cross_zone: float  # ... across zones
    unknown_zone: float  # ... to or from a node without a zone label
    direction: str = "unknown"  # calls, called, both (each end calls the other), unknown
    routing: str = SPREAD  # how the called side's Services route the pair
    sent: float | None = None  # of the bytes, those sent to the peer (None: way not told)


def _per_zone(places: Mapping[str, int], zone_of: Mapping[str, str]) -> dict[str, int]:
    zones: dict[str, int] = {}
    for node, pods in places.items():
        zone = zone_of.get(node)
        if zone:
            zones[zone] = zones.get(zone, 0) + pods
    return zones


class PeerSplit(NamedTuple):
    """For a pod of one workload and one of its peers: the share of the
    pod's even part of the pair's bytes (the pair's bytes/s over its
    workload's pods) that stays on a node, and in a zone, if the pod runs
    there; at most 1."""

    local: dict[str, float]
    in_zone: dict[str, float]


def peer_split(
    conversations: Conversations,
    workload: Workload,
    peer: Workload,
    zone_of: Mapping[str, str],
    template: str | None = None,
    served: AbstractSet[str] | None = None,
) -> PeerSplit:
    """Where a new pod of ``workload`` (of ``template``, its ReplicaSet)
    would keep its bytes with ``peer``, as the pair's routing sends them
    (``Conversations.route``): spread evenly over the peer's pods; a client
    kept on its node's or zone's server pods; or a server pod that the
    clients near it call, shared on a node with the workload's pods
    already near them that stay (``Conversations.staying``: not those its
    rollout replaces). A server pod keeps a zone's bytes there only where
    none of those runs in the zone yet (the zones ``served``, where given:
    as the watches show them now): else the clients' bytes stay in it
    wherever the new pod goes, and a zone without one sends them all
    across zones. Routed by node, likewise a node's bytes: on a node
    where none of those runs, all its clients' bytes, on any other none."""
    theirs = conversations.places.get(peer, {})
    their_pods = sum(theirs.values())
    if not their_pods:
        return PeerSplit({}, {})
    their_zones = _per_zone(theirs, zone_of)
    route = conversations.route(workload, peer)
    if route is None:
        return PeerSplit(
            {node: pods / their_pods for node, pods in theirs.items()},
            {zone: pods / their_pods for zone, pods in their_zones.items()},
        )
    if route.client == workload:
        # Its connections stay on the server's pods on its node or in its zone.
        in_zone = dict.fromkeys(their_zones, 1.0)
        if route.routing == NODE:
            return PeerSplit(dict.fromkeys(theirs, 1.0), in_zone)
        local = {}
        for node, pods in theirs.items():
            zone = zone_of.get(node)
            local[node] = pods / (their_zones[zone] if zone else their_pods)
        return PeerSplit(local, in_zone)
    # It serves: the clients near it send it their bytes, shared with the
    # workload's pods already as near them. A client pod's bytes, in units
    # of this pod's even part: the workload's pods over the peer's.
    own = conversations.staying(workload, template)
    own_zones = _per_zone(own, zone_of)
    scale = max(1, conversations.pods(workload)) / their_pods
    if served is None:
        served = own_zones.keys()
    in_zone = {
        zone: min(1.0, scale * pods) for zone, pods in their_zones.items() if zone not in served
    }
    local = {}
    for node, pods in theirs.items():
        if route.routing == NODE:
            # The clients on a node call the server pod there: a new pod
            # beside one that stays keeps no more on the node, and one
            # beside none keeps every client pod's bytes, more than its
            # even part where several run (a node with three pulls more
            # than a node with one).
            if not own.get(node):
                local[node] = scale * pods
            continue
        zone = zone_of.get(node)
        sharing = own_zones.get(zone, 0) if zone else sum(own.values())
        local[node] = min(1.0, scale * pods / (sharing + 1))
    return PeerSplit(local, in_zone)


class _Servers(NamedTuple):
    """The called workload's pods: per node, per zone, in all, and on nodes without a zone."""

    on: Mapping[str, int]
    zones: Mapping[str, int]
    pods: int
    unzoned: int


def _client_shares(
    node: str, servers: _Servers, zone_of: Mapping[str, str], routing: str
) -> tuple[float, float, float]:
    """(same node, same zone, unknown zone): the shares of one client pod's
    bytes on ``node`` to the ``servers``, as ``routing`` sends them."""
    their_pods = servers.pods
    on_node = servers.on.get(node, 0)
    if routing == NODE and on_node:
        return 1.0, 1.0, 0.0
    zone = zone_of.get(node)
    if not zone:  # kube-proxy reads no zone hint for it
        return on_node / their_pods, on_node / their_pods, 1.0 - on_node / their_pods
    in_zone = servers.zones.get(zone, 0)
    if routing != SPREAD and in_zone:
        return (on_node / in_zone if routing == ZONE else 0.0), 1.0, 0.0
    return on_node / their_pods, in_zone / their_pods, servers.unzoned / their_pods


def shares_of(
    conversations: Conversations, workload: Workload, zone_of: Mapping[str, str]
) -> list[PeerShare]:
    """``workload``'s peers, busiest first, with the shares of their bytes
    that stay on a node, in a zone and cross zones, as the pair's routing
    sends them (``Conversations.route``; none: spread evenly)."""
    shares = []
    for peer, rate in conversations.peers.get(workload, ()):
        route = conversations.route(workload, peer)
        client, server = (workload, peer) if route is None else (route.client, route.server)
        routing = SPREAD if route is None else route.routing
        direction = _direction(conversations, workload, peer)
        sent = conversations.sent_to(workload, peer)
        clients, theirs = conversations.places.get(client, {}), conversations.places.get(server, {})
        client_pods, their_pods = sum(clients.values()), sum(theirs.values())
        if not client_pods or not their_pods:
            shares.append(PeerShare(peer, rate, 0.0, 0.0, 0.0, 1.0, direction, routing, sent))
            continue
        their_zones = _per_zone(theirs, zone_of)
        servers = _Servers(theirs, their_zones, their_pods, their_pods - sum(their_zones.values()))
        same_node = same_zone = unknown = 0.0
        for node, pods in clients.items():
            on_node, in_zone, unzoned = _client_shares(node, servers, zone_of, routing)
            weight = pods / client_pods
            same_node += weight * on_node
            same_zone += weight * in_zone
            unknown += weight * unzoned
        cross_zone = max(0.0, 1.0 - same_zone - unknown)
        shares.append(
            PeerShare(
                peer, rate, same_node, same_zone, cross_zone, unknown, direction, routing, sent
            )
        )
    return shares


def _direction(conversations: Conversations, workload: Workload, peer: Workload) -> str:
    """Who calls whom in the pair, as the flow source says."""
    calls, called = (workload, peer) in conversations.calls, (peer, workload) in conversations.calls
    return {(True, False): "calls", (False, True): "called", (True, True): "both"}.get(
        (calls, called), "unknown"
    )


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
