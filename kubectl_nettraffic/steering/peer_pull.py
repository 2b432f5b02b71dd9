"""Peers' pull: the score points a node gains for a pod because the pod's
peers run there or in its zone (learning/conversations.py).

For a pod of workload W, each peer P at r bytes/s between the two
workloads (both directions) takes r / pods(W) from each of W's pods; the
share of it that goes to P's pods on node n is P's pods on n over all of
P's pods (a Service spreads a client's connections over its endpoints).
The pull is in score points, the unit of link headroom, by the share of
the pod's expected bytes (its booking) that stays put, for a candidate node
n in zone z:

- *on the node*: the bytes to peers on n never touch a NIC (and are booked
  off n's link): ``peers.pullPoints`` x their share;
- *in the zone*: the bytes to peers in z are not billed; at
  ``peers.crossZonePricePerGB`` p they are worth ``peers.pullPoints`` x
  ZONE_OVER_NODE (8) x p / 0.01 x their share (at the default $0.01, eight
  times the same bytes kept on the node; at 0, zones are not counted).
  A byte across zones is billed and slower whatever the links' load,
  where the NIC bytes a node keeps cost nothing until the link is busy
  (steering.busyAbove); weighed alike, a pod took a node beside some
  peers in a zone without another, and under PreferSameZone three draws
  in 36 of bench.peers sent more bytes across zones than kube-scheduler
  alone; at four times, one in 37 still did (docs/design/peers.md, "A
  zone over a node" and "Eight times").

So a pod all of whose bytes go to peers in one zone may be placed on any
node there that the guard below admits (320 points, more than a score's
whole range) rather than on the quietest node of another zone; one that
talks to its peers for a tenth of its bytes, up to 32 points busier.
Between the nodes of a zone, a node holding the peers pulls up to 40
points; for a pod of a server its callers reach by node (PreferSameNode),
as many times more as its callers there send it past its even part.

A node's own part under MIN_OWN_POINTS is left out (the zone's part
stays): the choice then looks up only the nodes that pull for real.

The peers' pods are where they run now: once the watches of the steered
and the unsteered pods have listed them (inflight/placed.py), each peer's
pods are counted there, not where the learner's last pass saw them, a
pass (``learning.interval``) old: a client rolled out within a pass of
its server's rollout followed the server's old zones, and under
PreferSameZone sent its bytes across zones. A plan is worked out again
when a peer's pods move (``PullPlans.plan``). W's own pods stay as the
pass saw them plus those booked since, but for the zones a routed
server's pods serve (``peer_split``'s ``served``).

A pull only raises scores, so every node without one ranks as before, and
a pod of a workload with no known peers has no pull at all: it is steered
exactly as without a flow source. Two guards, and a term:

- *Fan-in spreads.* A node draws W's pods in proportion to the share of
  W's conversations it hosts (its local bytes over all of W's bytes to
  peers), and never more than half of W's pods: fifty clients of a server
  with five pods go five ways, not onto the first server's node. W's pods
  there are those the learner's last pass saw plus those booked there
  since (the bookings store's ``in_flight``, which follows each pod to the
  node it is bound to, on every replica); of the pods the pass saw, those
  of the pod's own ReplicaSet where a Deployment or a Rollout owns it
  through one (a rollout replaces the others: counted, they turned a
  server pod away from its own clients' zone, where the pod it replaces
  ran, and under PreferSameZone sent its clients across zones).
- *Never past hot.* A node whose link, with what is booked on it and this
  pod's whole expected bytes (as if none stayed: the bytes kept are an
  estimate, and the pod may run elsewhere), would be fuller than ``peers.maxLinkUtilization`` gains
  nothing (nodes whose link speed is unknown are not guarded).
- *A zone term.* Where the nodes carry their zone's copy
  (``nettraffic.io/zone``, written by the tier label writer with a flow
  source), a pod also prefers the zone it is booked in (on its heaviest
  term, steerer.likely_node) and every zone that keeps as much of its
  bytes to peers or more (``zone_term``), weighted by the share of its
  bytes to peers the booked zone keeps: the node terms name three nodes
  kube-scheduler may not sample; the zone term matches in any sample.
  Zones that keep as much share the term, and where every zone does there
  is none: the zone saves nothing over the others.

And a pair kept together: a workload the learner saw run one or two pods,
all of whose peers' Services spread its bytes evenly, may put its second
pod in its first one's zone (``keeps_zones``: scoring/spread.py), where the
pull leads it (else kube-scheduler fills the empty zones first, which split
a pair of pods from the peers they share: half of the pair's bytes crossed
zones). It has no zone to keep (ZONE_KEEPING_PODS), and a third pod goes
to an empty zone as ever. Under PreferSameZone or PreferSameNode a server
pod in each zone its clients run in is what keeps their bytes there, and
its own places are a pass old: the empty zones stay first.
"""

import dataclasses
import math
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from kubectl_nettraffic.config import PeerSettings
from kubectl_nettraffic.inflight.placed import LivePlaces
from kubectl_nettraffic.kube.nodes import ZONE_COPY_LABEL, Node, zones_of
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.conversations import Conversations, peer_split
from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.spread import ZONE_KEEPING_PODS

# At this price per GB each way a byte kept in its zone pulls ZONE_OVER_NODE
# times what a byte kept on its node does (the module's docstring says why).
PRICE_UNIT = 0.01
ZONE_OVER_NODE = 8.0
# A node's own pull (its peers' pods there) under this many points is not
# counted: a sliver of the pod's bytes, less than a refresh moves a score,
# and leaving it out spares an admission a look-up per node holding a peer.
MIN_OWN_POINTS = 1.0
# Zones that keep at least this share of what the best zone keeps keep as
# much (a sum of floats in another order may differ in its last digits).
TIED_ZONES = 0.99


@dataclass(frozen=True)
class PullPlan:
    """One workload's pull, the same for each of its pods while the
    conversations and the nodes stay as they are."""

    to_peers: float  # bytes/s each pod sends to and receives from its peers
    local: Mapping[str, float]  # node -> of those, to peers on the node
    in_zone: Mapping[str, float]  # zone -> of those, to peers in the zone
    zone_saved: Mapping[str, float]  # zone -> ``in_zone`` weighed by the price
    room: Mapping[str, int]  # node -> the workload's pods it may draw
    pods_on: Mapping[str, int]  # node -> the workload's pods there (the last pass)
    peers_on: Mapping[str, str]  # node -> its peers there, joined by "+", for explain
    by_local: tuple[str, ...]  # the nodes of ``local``, the most bytes first
    # Whether its empty zones come first: it runs ZONE_KEEPING_PODS pods or
    # more (or none seen), or a peer's Service routes by node or zone.
    keeps_zones: bool = True


def as_placed(conversations: Conversations, live: LivePlaces, workload: Workload) -> Conversations:
    """``conversations`` with the pods of ``workload``'s peers where ``live``
    shows them: the learner's pass is as old as its interval, and a peer
    rolled out since runs elsewhere now. A peer ``live`` shows no pod of
    keeps the pass's places."""
    # Its plan reads these workloads' places alone: its own (the pass's) and its peers'.
    places = {workload: conversations.places.get(workload, {})}
    for peer, _ in conversations.peers.get(workload, ()):
        places[peer] = live.per_node.get(peer) or conversations.places.get(peer, {})
    own_templates = conversations.templates.get(workload)
    templates = {} if own_templates is None else {workload: own_templates}
    return dataclasses.replace(conversations, places=places, templates=templates)


def plan_for(
    workload: Workload,
    conversations: Conversations,
    zone_of: Mapping[str, str],
    template: str | None = None,
    zone_weight: float = 1.0,
    served: AbstractSet[str] | None = None,
) -> PullPlan | None:
    """The pull of ``workload``'s pods of ``template`` (their ReplicaSet;
    None: they have none), its bytes kept in a zone weighed by
    ``zone_weight`` (the price over PRICE_UNIT); None when it has no peer
    with a pod placed.
    Its pods already placed, for the fan-in and for sharing the clients
    near a server pod, are those that stay (``Conversations.staying``);
    the zones they serve, ``served`` where given (``peer_split``)."""
    pairs = conversations.peers.get(workload)
    if not pairs:
        return None
    own = conversations.staying(workload, template)
    seen = conversations.pods(workload)
    pods = max(1, seen)
    local: dict[str, float] = {}
    in_zone: dict[str, float] = {}
    peers_on: dict[str, list[Workload]] = {}
    to_peers = 0.0
    for peer, rate in pairs:
        split = peer_split(conversations, workload, peer, zone_of, template, served)
        if not split.local:
            continue  # no pod of it seen: nowhere to pull toward
        per_pod = rate / pods
        to_peers += per_pod
        for node, fraction in split.local.items():
            local[node] = local.get(node, 0.0) + per_pod * fraction
            peers_on.setdefault(node, []).append(peer)
        for zone, fraction in split.in_zone.items():
            in_zone[zone] = in_zone.get(zone, 0.0) + per_pod * fraction
    if to_peers <= 0:
        return None
    most = math.ceil((pods + 1) / 2)
    room = {node: min(most, math.ceil((pods + 1) * b / to_peers)) for node, b in local.items()}
    routed = any(conversations.route(workload, peer) is not None for peer, _ in pairs)
    return PullPlan(
        to_peers,
        local,
        in_zone,
        {zone: zone_weight * b for zone, b in in_zone.items()},
        room,
        dict(own),
        {node: "+".join(str(peer) for peer in peers) for node, peers in peers_on.items()},
        tuple(sorted(local, key=lambda node: (-local[node], node))),
        routed or not 0 < seen < ZONE_KEEPING_PODS,
    )


@dataclass
class PullPlans:
    """The pull of one snapshot's conversations, one plan per workload,
    worked out on its first pod. Used under the in-flight lock (an
    admission)."""

    conversations: Conversations
    nodes: Mapping[str, Node]
    settings: PeerSettings
    zone_of: dict[str, str] = field(init=False)
    # (workload, template) -> (what of ``live`` it was worked out by, the plan)
    plans: dict[tuple[Workload, str | None], tuple[tuple[object, ...], PullPlan | None]] = field(
        default_factory=dict
    )
    serves: dict[Workload, bool] = field(default_factory=dict)  # _serves_routed's answers

    def __post_init__(self) -> None:
        self.zone_of = zones_of(self.nodes.values())
        # A byte kept in its zone, against one kept on its node.
        price = self.settings.cross_zone_price_per_gb
        self.zone_weight = ZONE_OVER_NODE * price / PRICE_UNIT
        # The zones the tier label writer has copied to nettraffic.io/zone.
        self.copied_zones = {
            node.labels[ZONE_COPY_LABEL]
            for node in self.nodes.values()
            if node.labels.get(ZONE_COPY_LABEL)
        }

    def plan(
        self,
        workload: Workload | None,
        template: str | None = None,
        live: LivePlaces | None = None,
    ) -> PullPlan | None:
        """``workload``'s plan, its peers' pods where ``live`` shows them
        (``as_placed``), worked out again when they moved since (a binding,
        a pod's end). A workload whose clients a Service routes to it by
        zone or node also counts the zones its staying pods serve where
        ``live`` shows them: its rollout's new pods serve theirs already."""
        if workload is None:
            return None
        key, conversations = (workload, template), self.conversations
        stamps: tuple[object, ...] = ()
        served = None
        if live is not None:
            peers = conversations.peers.get(workload, ())
            stamps = tuple(live.stamps.get(peer, 0) for peer, _ in peers)
            if self._serves_routed(workload):
                served = live.zones(workload, template)
                stamps = (*stamps, served)
        known = self.plans.get(key)
        if known is None or known[0] != stamps:
            if live is not None:
                conversations = as_placed(conversations, live, workload)
            plan = plan_for(
                workload, conversations, self.zone_of, template, self.zone_weight, served
            )
            known = self.plans[key] = (stamps, plan)
        return known[1]

    def _serves_routed(self, workload: Workload) -> bool:
        """Whether a Service routes a peer's calls to ``workload`` by zone or node."""
        serves = self.serves.get(workload)
        if serves is None:
            conversations = self.conversations
            pairs = conversations.peers.get(workload, ())
            routes = (conversations.route(workload, peer) for peer, _ in pairs)
            serves = self.serves[workload] = any(
                r is not None and r.server == workload for r in routes
            )
        return serves

    def for_pod(
        self,
        plan: PullPlan,
        bandwidth: float,
        unseen: Mapping[str, tuple[float, int]],
        in_flight: Mapping[str, int],
    ) -> "PodPull":
        return PodPull(self, plan, bandwidth, unseen, in_flight)

    def pod_pull(
        self,
        workload: Workload,
        bandwidth: float,
        unseen: Mapping[str, tuple[float, int]],
        in_flight: Mapping[str, int],
        template: str | None = None,
        live: LivePlaces | None = None,
    ) -> "PodPull | None":
        """The pull of a pod of ``workload`` (of ``template``, its
        ReplicaSet), its peers where ``live`` shows them; None when it has
        no peer placed."""
        plan = self.plan(workload, template, live)
        return None if plan is None else self.for_pod(plan, bandwidth, unseen, in_flight)


class PodPull:
    """One pod's pull: ``points(score)`` for each candidate node, its zone's
    part (``zone_points``) and the nodes that gain more (``own_nodes``), so
    that the choice knows when no later node can catch up."""

    def __init__(
        self,
        pull: PullPlans,
        plan: PullPlan,
        bandwidth: float,
        unseen: Mapping[str, tuple[float, int]],
        in_flight: Mapping[str, int],
    ) -> None:
        self._pull, self._plan = pull, plan
        self.keeps_zones = plan.keeps_zones
        self._bandwidth, self._unseen, self._in_flight = bandwidth, unseen, in_flight
        settings = pull.settings
        self._most_utilization = settings.max_link_utilization
        # Points per byte/s kept: the share of the pod's expected bytes.
        self._per_byte = settings.pull_points / max(bandwidth, plan.to_peers)
        self.zone_of = pull.zone_of
        self._zone_saved = plan.zone_saved
        self.pulled: dict[str, float] = {}  # node -> points, for the nodes read
        self._own: set[str] = set()  # of those, the nodes its peers there pull beyond their zone

    def _has_room(self, node: str) -> bool:
        """Whether ``node`` holds less than its share of the workload's pods."""
        plan = self._plan
        return plan.pods_on.get(node, 0) + self._in_flight.get(node, 0) < plan.room[node]

    def own_nodes(self) -> Iterator[tuple[str, float]]:
        """The nodes whose peers there pull this pod beyond their zone, as
        (node, those points), the most first."""
        per_byte, plan = self._per_byte, self._plan
        for node in plan.by_local:
            points = per_byte * plan.local[node]
            if points < MIN_OWN_POINTS:
                return  # nor does any after it
            if self._has_room(node):
                yield node, points

    def beside_peers(self) -> AbstractSet[str]:
        """The nodes read so far whose peers there keep the pod's bytes on
        them (a view: read it once the choice is made)."""
        return self._own

    def zone_points(self, zone: str) -> float:
        return self._per_byte * self._zone_saved.get(zone, 0.0)

    def points(self, score: NodeScore) -> float:
        name = score.name
        saved = self._zone_saved.get(self.zone_of.get(name, ""), 0.0)
        # This pod's bytes that stay on the node: none once the node has its
        # share of the workload's pods, or when they pull under MIN_OWN_POINTS.
        own = self._plan.local.get(name, 0.0)
        if own and (self._per_byte * own < MIN_OWN_POINTS or not self._has_room(name)):
            own = 0.0
        saved += own
        if saved <= 0:
            return 0.0
        speed, utilization = score.link_speed, score.link_utilization
        if speed and utilization is not None:
            leaving = self._unseen.get(name, (0.0, 0))[0] + self._bandwidth
            if utilization + leaving / speed > self._most_utilization:
                return 0.0
        points = self._per_byte * saved
        self.pulled[name] = points
        if own:
            self._own.add(name)
        return points

    def zone_term(self, booked_on: str) -> tuple[tuple[str, ...], int] | None:
        """(zones, weight) of a preferred term on the zone of ``booked_on``
        (the node the pod is booked on: its heaviest term's) and every zone
        that keeps at least as much of the pod's bytes to peers, when they
        are not every zone, zones are priced, and the nodes carry their
        zone's copy (nettraffic.io/zone): a pod the node terms send out of
        the zone that keeps the most (its nodes full or busy) is never
        pulled back against them, nor into a zone that keeps less. Zones
        within TIED_ZONES keep as much: under topology routing every zone
        that holds a server pod keeps all of a client's bytes. The weight
        is the share of the pod's bytes to peers that the booked zone keeps
        (100: all of them), at least 1. Such a term holds over whichever
        nodes kube-scheduler samples, as the tier terms do."""
        zone, plan, pull = self.zone_of.get(booked_on), self._plan, self._pull
        if not zone or pull.zone_weight <= 0 or zone not in pull.copied_zones:
            return None
        booked = plan.in_zone.get(zone, 0.0)
        as_much = booked * TIED_ZONES
        if not booked or not self.pulled.get(booked_on):
            return None
        kept = (z for z, b in plan.in_zone.items() if b >= as_much and z in pull.copied_zones)
        zones = tuple(sorted(kept))
        if pull.copied_zones.issubset(zones):
            return None  # every zone keeps as much: nothing to prefer
        return zones, max(1, min(100, round(100 * booked / plan.to_peers)))

    def annotation(self, nodes: list[str]) -> str:
        """``node=points:why`` for each of ``nodes`` its peers pulled it
        toward, comma-separated; why is the peers on the node joined by
        ``+``, or ``zone`` when only the zone pulled."""
        pulled, own, peers_on = self.pulled, self._own, self._plan.peers_on
        return ",".join(
            f"{node}={pulled[node]:.1f}:{peers_on[node] if node in own else 'zone'}"
            for node in nodes
            if pulled.get(node)
        )
