"""How each Service routes its clients' connections, read from the cluster.

kube-proxy does not read a Service's ``spec.trafficDistribution`` itself:
the EndpointSlice controller turns it into hints on the endpoints, and
kube-proxy keeps a client on the endpoints hinted for its node when every
ready endpoint has a node hint and one names the client's node
(PreferSameNode), else on those hinted for its zone when every ready
endpoint has a zone hint and one names the zone (PreferSameZone, PreferClose
and topology-aware routing), else it spreads over every ready endpoint
(kubernetes/kubernetes pkg/proxy/topology.go, topologyModeFromHints and
availableForTopology). So a Service's routing is read from its slices'
hints, and ``spec.trafficDistribution`` only to say where the two disagree.
``internalTrafficPolicy: Local`` keeps a client on its node's endpoints
(CategorizeEndpoints): node.

A pod behind several Services is routed as the widest of them (spread,
then zone, then node): the pull never counts on a locality that one of its
Services does not give. What is read as spread though it asks otherwise is
counted by reason: ``no-hints`` (the field asks, the slices carry no hint
on every ready endpoint yet), ``no-slices`` (a Service with a selector and
no EndpointSlice).

The same read names Istio ambient's waypoints: a Service, a Namespace or a
Pod labelled ``istio.io/use-waypoint: <name>`` (and
``istio.io/use-waypoint-namespace`` where the waypoint runs in another
namespace) sends its traffic through the waypoint ``<name>``, whose
Deployment Istio names after its Gateway (istio.io, ambient/usage/waypoint:
"the whole namespace, or any service or pod you choose"). Only the pods
carrying the label are listed (a label selector the API server applies),
so the read does not grow with the cluster's pods.
ztunnel then reports the waypoint as the destination of the clients'
connections and as the source of the server's (istio/ztunnel
src/proxy/outbound.rs): the flow read leaves those legs out and takes the
waypoint's own series, which name the real ends.
"""

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubectl_nettraffic.errors import NetTrafficError
from kubectl_nettraffic.kube.client import ApiClient, api_call, request_json

SPREAD, ZONE, NODE = "spread", "zone", "node"
# Widest first: a pod behind Services of several routings takes the first.
WIDTH = (SPREAD, ZONE, NODE)
SERVICE_LABEL = "kubernetes.io/service-name"  # an EndpointSlice's Service
# spec.trafficDistribution values that ask for hints (KEP-4444 PreferClose,
# KEP-3015 PreferSameZone and PreferSameNode).
ASKS_FOR_HINTS = ("PreferClose", "PreferSameZone", "PreferSameNode")

PodKey = tuple[str, str]  # (namespace, pod)
WAYPOINT_LABEL = "istio.io/use-waypoint"
WAYPOINT_NAMESPACE_LABEL = "istio.io/use-waypoint-namespace"


@dataclass
class ServiceRouting:
    """(namespace, pod) -> the routing of the Services it backs (pods behind
    none, or not ready, are left out), and the Services read as spread
    though they ask otherwise, by reason."""

    pods: dict[PodKey, str] = field(default_factory=dict)
    notes: Counter[str] = field(default_factory=Counter)
    waypoints: frozenset[tuple[str, str]] = frozenset()  # (namespace, name)


def waypoints_of(objects: Iterable[Mapping[str, Any]]) -> frozenset[tuple[str, str]]:
    """The waypoints that Services, Pods and Namespaces send their traffic
    through, as (namespace, name)."""
    waypoints = set()
    for item in objects:
        metadata = item.get("metadata") or {}
        labels = metadata.get("labels") or {}
        name = str(labels.get(WAYPOINT_LABEL) or "")
        if not name:
            continue
        own = metadata.get("namespace") if item.get("kind") != "Namespace" else metadata.get("name")
        waypoints.add((str(labels.get(WAYPOINT_NAMESPACE_LABEL) or own or ""), name))
    return frozenset(waypoints)


def _slice_routing(endpoints: Iterable[Mapping[str, Any]]) -> str:
    """The routing kube-proxy takes from one Service's ready endpoints' hints."""
    ready = [e for e in endpoints if (e.get("conditions") or {}).get("ready") is not False]
    if not ready:
        return SPREAD
    hints = [e.get("hints") or {} for e in ready]
    if all(h.get("forNodes") for h in hints):
        return NODE
    if all(h.get("forZones") for h in hints):
        return ZONE
    return SPREAD


def routing_of(
    services: Iterable[Mapping[str, Any]],
    slices: Iterable[Mapping[str, Any]],
    namespaces: Iterable[Mapping[str, Any]] = (),
    enrolled_pods: Iterable[Mapping[str, Any]] = (),
) -> ServiceRouting:
    """Each Service's routing from its EndpointSlices, onto the pods they
    name; and the waypoints the Services, ``namespaces`` and
    ``enrolled_pods`` name."""
    services = list(services)
    endpoints: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for endpoint_slice in slices:
        metadata = endpoint_slice.get("metadata") or {}
        service = (metadata.get("labels") or {}).get(SERVICE_LABEL)
        if service:
            key = (str(metadata.get("namespace") or ""), str(service))
            endpoints.setdefault(key, []).extend(endpoint_slice.get("endpoints") or [])
    notes: Counter[str] = Counter()
    widest: dict[PodKey, str] = {}
    for service in services:
        metadata, spec = service.get("metadata") or {}, service.get("spec") or {}
        key = (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
        ready = endpoints.get(key)
        if ready is None:
            if spec.get("selector"):
                notes["no-slices"] += 1
            continue
        routed = _slice_routing(ready)
        if spec.get("internalTrafficPolicy") == "Local":
            routed = NODE  # node-local endpoints only (CategorizeEndpoints)
        elif routed == SPREAD and spec.get("trafficDistribution") in ASKS_FOR_HINTS:
            notes["no-hints"] += 1
        for endpoint in ready:
            target = endpoint.get("targetRef") or {}
            if target.get("kind") != "Pod" or not target.get("name"):
                continue
            pod = (str(target.get("namespace") or key[0]), str(target["name"]))
            known = widest.get(pod)
            widest[pod] = routed if known is None else min(known, routed, key=WIDTH.index)
    named = [*services, *({"kind": "Namespace", **n} for n in namespaces), *enrolled_pods]
    return ServiceRouting(widest, notes, waypoints_of(named))


def read_service_routing(api: ApiClient) -> ServiceRouting:
    """Every Service, EndpointSlice and Namespace in the cluster and the pods
    enrolled in a waypoint, read once (the learner calls it once a pass)."""
    with api_call("listing Services"):
        services = request_json(api, "GET", "/api/v1/services").get("items") or []
    with api_call("listing EndpointSlices"):
        slices = (
            request_json(api, "GET", "/apis/discovery.k8s.io/v1/endpointslices").get("items") or []
        )
    with api_call("listing Namespaces"):
        namespaces = request_json(api, "GET", "/api/v1/namespaces").get("items") or []
    with api_call("listing the Pods enrolled in a waypoint"):
        enrolled = (
            request_json(api, "GET", "/api/v1/pods", query={"labelSelector": WAYPOINT_LABEL}).get(
                "items"
            )
            or []
        )
    return routing_of(services, slices, namespaces, enrolled)


def routing_as_set(api: ApiClient | None, routing: str) -> ServiceRouting:
    """How the Services route under ``peers.routing`` ``routing``, for a
    one-off read (the plugin): for ``services`` read from the cluster;
    none (every pair spread evenly, no waypoint known) for another setting,
    without an API server, or where the read fails."""
    if routing != "services" or api is None:
        return ServiceRouting()
    try:
        return read_service_routing(api)
    except NetTrafficError:
        return ServiceRouting()
