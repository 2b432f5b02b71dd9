"""A fake Kubernetes API server over real HTTP(S) on 127.0.0.1.

It stores objects in memory and speaks enough of the API for the real
``kubernetes`` Python client and the real kubectl to run against it: get,
list, watch (with resourceVersions, bookmarks and 410 Gone after
compaction), create, update, JSON/merge patch, delete, the service proxy, and
bearer-token auth. Every request is recorded for assertions.
"""

import bisect
import copy
import json
import re
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jsonpatch
import requests
import yaml

from harness import QuietHandler

Key = tuple[str, str | None, str]  # (group/version path, namespace, plural)

_PATH = re.compile(
    r"^/(?P<gv>api/v1|apis/[^/]+/[^/]+)"
    r"(?:/namespaces/(?P<ns>[^/]+)(?=/[^/]+))?"
    r"/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>.+))?$"
)


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    content_type: str
    body: Any
    headers: dict[str, str]


class FakeKubeAPI:
    TOKEN = "fake-token"

    def __init__(self, tls: tuple[str, str] | None = None) -> None:
        self.objects: dict[Key, dict[str, dict[str, Any]]] = {}
        self.events: list[tuple[int, Key, str, dict[str, Any]]] = []
        self.resource_version = 100
        self.compacted_before = 0  # watches from an older RV get 410 Gone
        self.gone_sent = 0
        self.requests: list[Recorded] = []
        self.forbidden: set[tuple[str, str]] = set()  # (method, path prefix) -> 403
        # (method, path prefix) -> (status, reason, message): refusals as an
        # admission plugin (a ValidatingAdmissionPolicy) words them.
        self.refused: dict[tuple[str, str], tuple[int, str, str]] = {}
        self.proxy_targets: dict[tuple[str, str], str] = {}  # (ns, svc) -> base URL
        self.proxy_verify: str | bool = False
        # Called as (method, path, body) before a request is served: a test's
        # way to make something happen in between another client's requests.
        self.before_request: Any = None
        self.lock = threading.Condition()
        self._closing_watches = 0
        handler = self._handler_class()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        scheme = "http"
        if tls:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    # ------------------------------------------------------------ store API

    def put(
        self,
        obj: dict[str, Any],
        gv: str | None = None,
        plural: str | None = None,
        owned: bool = False,
    ) -> dict[str, Any]:
        """Create or replace an object, emitting a watch event. ``owned``:
        the caller hands ``obj`` over and never changes it again, so it is
        stored and sent as it is, uncopied (a benchmark's thousands a second)."""
        if not owned:
            obj = copy.deepcopy(obj)
        gv = gv or _gv_path(obj["apiVersion"])
        plural = plural or obj["kind"].lower() + "s"
        key = (gv, obj["metadata"].get("namespace"), plural)
        with self.lock:
            stored = self.objects.get(key, {}).get(obj["metadata"]["name"])
            if stored is not None:
                # An update never changes an object's uid or creation time.
                for field in ("uid", "creationTimestamp"):
                    obj["metadata"].setdefault(field, stored["metadata"].get(field))
            self._store(key, obj, "ADDED" if stored is None else "MODIFIED", owned)
        return obj

    def delete(self, key: Key, name: str) -> None:
        with self.lock:
            obj = self.objects.get(key, {}).pop(name, None)
            if obj is not None:
                self.resource_version += 1
                obj["metadata"]["resourceVersion"] = str(self.resource_version)
                self.events.append((self.resource_version, key, "DELETED", obj))
                self.lock.notify_all()

    def get(self, key: Key, name: str) -> dict[str, Any] | None:
        with self.lock:
            found = self.objects.get(key, {}).get(name)
            return copy.deepcopy(found) if found else None

    def compact(self) -> None:
        """Forget the event history, as etcd compaction does."""
        with self.lock:
            self.compacted_before = self.resource_version + 1
            self.events.clear()

    def close_watches(self) -> None:
        """End every open watch stream (a dropped connection)."""
        with self.lock:
            self._closing_watches += 1
            self.lock.notify_all()

    def count(self, method: str, path: str) -> int:
        return sum(1 for r in self.requests if r.method == method and r.path == path)

    def stop(self) -> None:
        self.close_watches()
        self.server.shutdown()
        self.server.server_close()

    def kubeconfig(self, path: str, ca_file: str | None = None, context: str = "fake") -> str:
        cluster: dict[str, Any] = {"server": self.url}
        if ca_file:
            cluster["certificate-authority"] = ca_file
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": cluster}],
            "users": [{"name": context, "user": {"token": self.TOKEN}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
            "current-context": context,
        }
        with open(path, "w") as handle:
            yaml.safe_dump(document, handle)
        return path

    def _store(self, key: Key, obj: dict[str, Any], kind: str, owned: bool = False) -> None:
        self.resource_version += 1
        metadata = obj.setdefault("metadata", {})
        metadata["resourceVersion"] = str(self.resource_version)
        metadata.setdefault("uid", f"uid-{self.resource_version}")
        metadata.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        # Written in ObjectMeta's field order, as the API server's encoder does
        # (a watch reading raw lines finds the object's uid before its owners').
        fields = sorted(
            metadata.items(), key=lambda item: _META_ORDER.get(item[0], len(_META_ORDER))
        )
        metadata.clear()
        metadata.update(fields)
        self.objects.setdefault(key, {})[metadata["name"]] = obj
        self.events.append((self.resource_version, key, kind, obj if owned else copy.deepcopy(obj)))
        self.lock.notify_all()

    # ------------------------------------------------------------ HTTP side

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(QuietHandler):
            def _send(self, status: int, body: Any, content_type: str = "application/json") -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _status(self, code: int, reason: str, message: str) -> None:
                self._send(
                    code,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "message": message,
                        "reason": reason,
                        "code": code,
                    },
                )

            def _handle(self) -> None:
                parsed = urllib.parse.urlsplit(self.path)
                parsed = parsed._replace(path=urllib.parse.unquote(parsed.path))
                query = urllib.parse.parse_qs(parsed.query)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                content_type = self.headers.get("Content-Type", "")
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                api.requests.append(
                    Recorded(
                        self.command, parsed.path, query, content_type, body, dict(self.headers)
                    )
                )
                if self.headers.get("Authorization") != f"Bearer {api.TOKEN}":
                    return self._status(401, "Unauthorized", "Unauthorized")
                if api.before_request is not None:
                    api.before_request(self.command, parsed.path, body)
                for method, prefix in api.forbidden:
                    if method in (self.command, "*") and parsed.path.startswith(prefix):
                        return self._status(403, "Forbidden", f"forbidden: {parsed.path}")
                for (method, prefix), (code, reason, message) in api.refused.items():
                    if method in (self.command, "*") and parsed.path.startswith(prefix):
                        return self._status(code, reason, message)
                route(self, api, parsed.path, query, body, raw, content_type)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        return Handler


def _gv_path(api_version: str) -> str:
    return "api/v1" if api_version == "v1" else f"apis/{api_version}"


def _list_kind(plural: str) -> str:
    return {"nodes": "NodeList", "namespaces": "NamespaceList", "pods": "PodList"}.get(
        plural, "List"
    )


def route(
    h: Any,
    api: FakeKubeAPI,
    path: str,
    query: dict[str, list[str]],
    body: Any,
    raw: bytes,
    content_type: str,
) -> None:
    if path in ("/version", "/version/"):
        return h._send(200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0-fake"})
    match = _PATH.match(path)
    if not match:
        return h._status(404, "NotFound", f"no route for {path}")
    gv, ns, plural, name, sub = match.group("gv", "ns", "plural", "name", "sub")
    # /api/v1/namespaces/<name> is a namespace object, not a namespaced collection.
    if gv == "api/v1" and plural == "namespaces" and ns is None and sub is None:
        key: Key = (gv, None, "namespaces")
    else:
        key = (gv, ns, plural)
    if plural == "services" and sub and sub.startswith("proxy"):
        return _proxy(h, api, ns or "", name or "", sub[len("proxy") :], query, raw, content_type)
    method = h.command
    if method == "GET" and name is None:
        if query.get("watch", ["false"])[0] in ("true", "1"):
            return _watch(h, api, key, query)
        with api.lock:
            if ns is None:  # cluster-scoped, or all namespaces
                items = [
                    o
                    for k, objs in api.objects.items()
                    if k[0] == gv and k[2] == plural
                    for o in objs.values()
                ]
            else:
                items = list(api.objects.get(key, {}).values())
            try:
                items = _select(items, query)
            except ValueError as error:
                return h._status(400, "BadRequest", str(error))
            rv = str(api.resource_version)
        return h._send(
            200,
            {
                "kind": _list_kind(plural),
                "apiVersion": "v1",
                "metadata": {"resourceVersion": rv},
                "items": items,
            },
        )
    if method == "POST" and name is None:
        if not isinstance(body, dict) or "metadata" not in body:
            return h._status(400, "BadRequest", "body must be an object with metadata")
        with api.lock:
            if body["metadata"]["name"] in api.objects.get(key, {}):
                return h._status(
                    409, "AlreadyExists", f'{plural} "{body["metadata"]["name"]}" already exists'
                )
            body["metadata"].setdefault("namespace", ns) if ns else None
            api._store(key, body, "ADDED")
        return h._send(201, body)
    if name is None:
        return h._status(405, "MethodNotAllowed", method)
    with api.lock:
        current = api.objects.get(key, {}).get(name)
    if current is None:
        return h._status(404, "NotFound", f'{plural} "{name}" not found')
    if method == "GET":
        return h._send(200, current)
    if method == "DELETE":
        api.delete(key, name)
        return h._send(200, {"kind": "Status", "status": "Success"})
    if method == "PUT":
        if body.get("metadata", {}).get("resourceVersion") not in (
            None,
            current["metadata"]["resourceVersion"],
        ):
            return h._status(409, "Conflict", "the object has been modified")
        with api.lock:
            api._store(key, body, "MODIFIED")
        return h._send(200, body)
    if method == "PATCH":
        try:
            if "json-patch" in content_type:
                patched = jsonpatch.apply_patch(current, body)
            else:
                patched = _merge(copy.deepcopy(current), body)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError) as error:
            return h._status(422, "Invalid", f"patch failed: {error}")
        with api.lock:
            api._store(key, patched, "MODIFIED")
        return h._send(200, patched)
    return h._status(405, "MethodNotAllowed", method)


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = _merge(target.get(key), value)
    return target


# ObjectMeta's fields in their order (apimachinery pkg/apis/meta/v1/types.go).
_META_ORDER = {
    field: order
    for order, field in enumerate(
        (
            "name",
            "generateName",
            "namespace",
            "selfLink",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "labels",
            "annotations",
            "ownerReferences",
            "finalizers",
            "managedFields",
        )
    )
}

# The fields a pod list can be selected by, as the API server's
# PodToSelectableFields (pkg/registry/core/pod/strategy.go) offers them.
_POD_FIELDS = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "spec.nodeName": ("spec", "nodeName"),
    "spec.schedulerName": ("spec", "schedulerName"),
    "status.phase": ("status", "phase"),
}


def _field_matches(item: dict[str, Any], requirement: str) -> bool:
    """One ``field=value``, ``field==value`` or ``field!=value`` term
    (k8s.io/apimachinery/pkg/fields/selector.go, ParseSelector)."""
    negate = "!=" in requirement
    field, value = requirement.replace("!=", "=").replace("==", "=").split("=", 1)
    if field not in _POD_FIELDS:
        raise ValueError(f"field label not supported: {field}")
    part, name = _POD_FIELDS[field]
    actual = str((item.get(part) or {}).get(name) or "")
    return (actual == value) != negate


def _select(items: list[dict[str, Any]], query: dict[str, list[str]]) -> list[dict[str, Any]]:
    selector = query.get("labelSelector", [""])[0]
    fields = [term for term in query.get("fieldSelector", [""])[0].split(",") if term]
    if fields:
        items = [i for i in items if all(_field_matches(i, term) for term in fields)]
    if not selector:
        return items
    from kubectl_nettraffic.labels import parse_selector

    parsed = parse_selector(selector)
    return [i for i in items if parsed.matches(i.get("metadata", {}).get("labels") or {})]


def _watch(h: Any, api: FakeKubeAPI, key: Key, query: dict[str, list[str]]) -> None:
    since = int(query.get("resourceVersion", ["0"])[0] or 0)
    timeout = float(query.get("timeoutSeconds", ["30"])[0])
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()

    def emit(event: dict[str, Any]) -> None:
        # Compact, as the API server (Go's encoding/json) writes a watch event.
        data = (json.dumps(event, separators=(",", ":")) + "\n").encode()
        h.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        h.wfile.flush()

    deadline = time.monotonic() + timeout
    try:
        with api.lock:
            closing = api._closing_watches
            if since and since < api.compacted_before:
                api.gone_sent += 1
                emit(
                    {
                        "type": "ERROR",
                        "object": {
                            "kind": "Status",
                            "apiVersion": "v1",
                            "status": "Failure",
                            "message": "too old resource version",
                            "reason": "Expired",
                            "code": 410,
                        },
                    }
                )
            else:
                # Events are appended in resourceVersion order, so each wake-up
                # reads on from where the last one stopped (compact() empties the list).
                sent = since
                position = bisect.bisect_right(api.events, sent, key=lambda event: event[0])
                while time.monotonic() < deadline and api._closing_watches == closing:
                    if position > len(api.events) or (
                        position and api.events[position - 1][0] > sent
                    ):
                        position = bisect.bisect_right(api.events, sent, key=lambda event: event[0])
                    for rv, event_key, kind, obj in api.events[position:]:
                        # The selector as the API server applies it to a watch;
                        # (objects that stop matching are not sent as DELETED here).
                        same = event_key[0] == key[0] and event_key[2] == key[2]
                        if same and _select([obj], query):
                            emit({"type": kind, "object": obj})
                        sent = rv
                    position = len(api.events)
                    api.lock.wait(0.2)
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()
    except OSError:
        pass  # the watcher went away (a stopped webhook): the watch just ends
    h.close_connection = True


def _proxy(
    h: Any,
    api: FakeKubeAPI,
    ns: str,
    service: str,
    rest: str,
    query: dict[str, list[str]],
    raw: bytes,
    content_type: str,
) -> None:
    # service may be "https:name:port" as the API server allows.
    parts = service.split(":")
    svc_name = parts[1] if len(parts) == 3 else parts[0]
    base = api.proxy_targets.get((ns, svc_name))
    if base is None:
        return h._status(
            503, "ServiceUnavailable", f'no endpoints available for service "{service}"'
        )
    url = base + (rest or "/")
    if query:
        url += "?" + urllib.parse.urlencode(query, doseq=True)
    try:
        response = requests.request(
            h.command,
            url,
            data=raw or None,
            timeout=10,
            headers={"Content-Type": content_type} if content_type else {},
            verify=api.proxy_verify,
        )
    except requests.RequestException as error:
        return h._status(503, "ServiceUnavailable", f"error trying to reach service: {error}")
    h._send(
        response.status_code,
        response.content,
        response.headers.get("Content-Type", "application/json"),
    )


def node(
    name: str,
    labels: dict[str, str] | None = None,
    ready: bool = True,
    unschedulable: bool = False,
    taints: list[dict[str, str]] | None = None,
    ip: str | None = None,
    cpu: str = "4",
    memory: str = "16Gi",
) -> dict[str, Any]:
    """A v1.Node as the API server returns it."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"unschedulable": unschedulable, **({"taints": taints} if taints else {})},
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "addresses": [
                {"type": "InternalIP", "address": ip or "10.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
        },
    }


def service(
    name: str,
    traffic_distribution: str | None = None,
    local: bool = False,
    namespace: str = "default",
    port: int | None = None,
) -> dict[str, Any]:
    """A v1.Service selecting ``app: <name>``, as its user writes it."""
    spec: dict[str, Any] = {"selector": {"app": name}}
    if port is not None:
        spec["ports"] = [{"port": port}]
    if traffic_distribution:
        spec["trafficDistribution"] = traffic_distribution
    if local:
        spec["internalTrafficPolicy"] = "Local"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def endpoint_slice(
    service_name: str,
    pods: Iterable[tuple[str, str, str]],
    zones: bool = False,
    nodes: bool = False,
    ready: bool = True,
    namespace: str = "default",
    addresses: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The EndpointSlice of ``service_name``: (pod, node, zone) each, at its
    address in ``addresses`` (else 10.0.0.1), with the hints the
    EndpointSlice controller writes for PreferSameZone (``zones``: each
    endpoint hinted for its own zone, staging/src/k8s.io/endpointslice/
    trafficdist) and PreferSameNode (``nodes``: both hints)."""
    endpoints = []
    for pod, node_name, zone in pods:
        endpoint: dict[str, Any] = {
            "addresses": [(addresses or {}).get(pod, "10.0.0.1")],
            "conditions": {"ready": ready},
            "nodeName": node_name,
            "zone": zone,
            "targetRef": {"kind": "Pod", "name": pod, "namespace": namespace},
        }
        hints: dict[str, Any] = {}
        if zones or nodes:
            hints["forZones"] = [{"name": zone}]
        if nodes:
            hints["forNodes"] = [{"name": node_name}]
        if hints:
            endpoint["hints"] = hints
        endpoints.append(endpoint)
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service_name}-x1",
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": service_name},
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
    }


def node_metrics(name: str, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "metrics.k8s.io/v1beta1",
        "kind": "NodeMetrics",
        "metadata": {"name": name},
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "window": "20s",
        "usage": {"cpu": cpu, "memory": memory},
    }


def webhook_configuration(
    name: str = "nettraffic", hooks: int = 1, ca_bundle: str = ""
) -> dict[str, Any]:
    """A MutatingWebhookConfiguration as the chart installs it (before its caBundle is set)."""
    client_config: dict[str, Any] = {
        "service": {"name": "nettraffic", "namespace": "nettraffic", "path": "/mutate", "port": 443}
    }
    if ca_bundle:
        client_config["caBundle"] = ca_bundle
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": f"hook{i}.nettraffic.io",
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "clientConfig": dict(client_config),
            }
            for i in range(hooks)
        ],
    }
