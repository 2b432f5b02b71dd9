"""A workload's spread: the nodes a preference may name without breaking it.

kube-scheduler spreads a pod's workload by the pod's own
``topologySpreadConstraints``, else by the cluster's default constraints
(zone maxSkew 5, hostname maxSkew 3, ScheduleAnyway: PodTopologySpread's
``systemDefaultConstraints``). A preference of ours never names a node
that would break the spread the pod will be scheduled with (the zones
are kept by the choice itself, a full node is given no term: so that a
workload that fills many of the best nodes costs no walk past them; under
the defaults a full node keeps its term where it saves the pod a point
over the nodes kube-scheduler's own spread would pick instead, those with
the fewest of the workload's pods: ``crowded``, scoring/placement.py's
``weighed``):

- zone (``topology.kubernetes.io/zone``): a node whose zone, with this
  pod, would hold more than maxSkew pods of the workload over the zone
  with fewest; and while a zone with a candidate holds none, every zone
  that already holds one (kube-scheduler alone fills the empty zones
  first: a workload of three pods gets one in each of three zones). Not
  for the second pod of a workload its peers pull into one zone
  (``keeps_zones`` False: steering/peer_pull.py's ``PodPull.keeps_zones``):
  a workload of one or two pods has no zone to keep, and its default zone
  constraint (maxSkew 5) holds two pods in one zone; its third pod is
  barred as ever, so a workload that grows keeps every zone. The pod, and
  those of the workload not shown bound yet, may each run in another zone
  than its first preference, so the skew kept is maxSkew less the room
  for those (``skew_room``: inflight/placed.py, one pod's at least), and
  at least 1;
- hostname (``kubernetes.io/hostname``): a node that, with this pod,
  would hold more than maxSkew pods of the workload over the candidate
  with fewest.

The empty zones come first also for a pod whose own constraints name no
zone (per hostname only, say): a workload of three pods or more keeps a
pod in every zone, where kube-scheduler alone gives it one only by
chance; its other pods go where the steering takes them, no zone skew
kept. Only the default zone spread turned off (``steering.zoneMaxSkew``
0) keeps no zone at all.

The constraint's pods are taken to be the workload's (the usual
labelSelector: the workload's own labels), but for the defaults and a
constraint whose ``matchLabelKeys`` name ``pod-template-hash``: those
count the pod's ReplicaSet alone (``per_template``), as kube-scheduler
does (the defaults' selector is the ReplicaSet's, which carries the hash:
helper/spread.go, DefaultSelector), so a rollout's new pods keep every
zone by themselves. A constraint on any other key is left to
kube-scheduler and counted as ``unknown-key``. Its counts: the steered pods
that run or will (inflight/placed.py: each booked pod on the node it was
bound to, until the binding watch sees it terminating, on every replica), as
kube-scheduler's own constraints count them. Counted over the pods in
flight alone, a Deployment scaled up again and again drifted past its
zone skew (bench.placement's returning workloads). Pods never steered
(created before the webhook, or skipped) are not counted.
"""

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

ZONE_KEY = "topology.kubernetes.io/zone"
# A workload of this many pods or more keeps a pod in every zone.
ZONE_KEEPING_PODS = 3
HOSTNAME_KEY = "kubernetes.io/hostname"
TEMPLATE_KEY = "pod-template-hash"


@dataclass(frozen=True)
class SpreadRules:
    """The most skew the pod's workload may take per zone and per node; None: not kept."""

    zone: int | None
    hostname: int | None
    unknown: int = 0  # constraints on another key, left to kube-scheduler
    defaults: bool = False  # the cluster's defaults: the pod has none of its own
    per_template: bool = False  # counts the pod's ReplicaSet's pods, not the workload's
    # Its empty zones first (a workload of ZONE_KEEPING_PODS pods keeps
    # every zone), also under constraints of its own that name no zone;
    # False only with the default zone spread turned off.
    fills_zones: bool = True

    @classmethod
    def of(cls, pod: Mapping[str, Any], zone: int, hostname: int) -> "SpreadRules":
        """The pod's own constraints, else the defaults (``zone``,
        ``hostname``; 0: none). A malformed constraint counts as unknown."""
        own = (pod.get("spec") or {}).get("topologySpreadConstraints")
        if not isinstance(own, list) or not own:
            return cls(
                zone or None,
                hostname or None,
                defaults=True,
                per_template=True,
                fills_zones=zone > 0,
            )
        skews: dict[str, int] = {}
        unknown, per_template = 0, True
        for constraint in own:
            key = constraint.get("topologyKey") if isinstance(constraint, dict) else None
            skew = constraint.get("maxSkew") if isinstance(constraint, dict) else None
            if key not in (ZONE_KEY, HOSTNAME_KEY) or type(skew) is not int or skew < 1:
                unknown += 1
                continue
            skews[key] = min(skew, skews.get(key, skew))
            keys = constraint.get("matchLabelKeys")
            per_template &= isinstance(keys, list) and TEMPLATE_KEY in keys
        return cls(
            skews.get(ZONE_KEY),
            skews.get(HOSTNAME_KEY),
            unknown,
            False,
            per_template and bool(skews),
        )

    def balanced(self) -> "SpreadRules":
        """For a pod steered in full under the defaults: its workload's zones
        kept as even as kube-scheduler alone keeps them (its default zone
        constraint scores a fuller zone lower whatever the skew), one pod
        more than the fewest at most; a pod's own constraints as they are."""
        if not self.defaults or self.zone is None:
            return self
        return dataclasses.replace(self, zone=1)


# A workload's pods per node and per zone.
Places = tuple[Mapping[str, int], Mapping[str, int]]


class Spread:
    """One pod's spread over the candidates: the zones the choice may not
    name (``barred_zones``), and the nodes a term may not (``full``)."""

    __slots__ = ("_booked", "_fewest_on_node", "_most_on_node", "_zone_of", "barred_zones")

    def __init__(
        self,
        rules: SpreadRules,
        booked: Places,
        zone_of: Mapping[str, str],
        zones: Iterable[str],
        fewest_on_node: int = 0,
        keeps_zones: bool = True,
        skew_room: int = 0,
    ) -> None:
        """The workload's pods ``booked``, per node and per zone; ``zones``:
        the zones with a candidate; ``fewest_on_node``: its pods on the
        candidate with fewest; ``keeps_zones`` False: its second pod may
        join its first in a zone (the module's docstring); ``skew_room``:
        the zone skew kept free for its pods booked but not bound yet
        (inflight/placed.py)."""
        self._zone_of = zone_of
        self._booked = booked[0]
        self.barred_zones: frozenset[str] = frozenset()
        per_zone = (
            {z: booked[1].get(z, 0) for z in zones}
            if rules.zone is not None or rules.fills_zones
            else {}
        )
        if len(per_zone) > 1:
            fewest = min(per_zone.values())
            # Its empty zones first, but for a pair its peers pull together.
            fill_empty = rules.fills_zones and (
                keeps_zones or sum(booked[1].values()) >= ZONE_KEEPING_PODS - 1
            )
            # The pods a zone may hold before this one: none while a zone
            # is empty, else maxSkew (less the room kept for this pod and
            # its pods not shown bound) over the fewest; no limit without a
            # zone skew.
            most = math.inf
            if fewest == 0 and fill_empty:
                most = 0
            elif rules.zone is not None:
                most = fewest + max(1, rules.zone - skew_room) - 1
            self.barred_zones = frozenset(z for z, n in per_zone.items() if n > most)
        # The pods a node may hold before this one: maxSkew over the fewest.
        self._fewest_on_node = fewest_on_node
        self._most_on_node = None if rules.hostname is None else rules.hostname + fewest_on_node

    def zone_allows(self, node: str) -> bool:
        return self._zone_of.get(node, "") not in self.barred_zones

    def full(self, node: str) -> bool:
        """Whether ``node`` holds as many of the workload's pods as its spread lets them."""
        most = self._most_on_node
        return most is not None and self._booked.get(node, 0) >= most

    def crowded(self) -> list[str]:
        """The nodes holding more of the workload's pods than the candidate
        with fewest: kube-scheduler's own hostname spread scores them below
        the others (podtopologyspread/scoring.go, Score and NormalizeScore:
        the fewest pods best), so without our terms the pod goes to those."""
        fewest = self._fewest_on_node
        return [node for node, pods in self._booked.items() if pods > fewest]
