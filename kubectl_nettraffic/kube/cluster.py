"""The Kubernetes API as the engine needs it: a client, and cached node and
namespace inventories kept fresh by list + watch.

Watches go through the real ``kubernetes`` client (its auth, TLS and token
refresh) and read the JSON event stream themselves, so that a ``410 Gone`` (the watch's
resourceVersion fell out of etcd's window) and dropped connections are
handled the way client-go's reflector does: list again, then watch from the
list's resourceVersion. Readers never wait for the API server.
"""

import json
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from kubectl_nettraffic.errors import ClusterError
from kubectl_nettraffic.kube.nodes import Node, node_from_json, nodes_from_list

log = logging.getLogger(__name__)

T = TypeVar("T")

# How long one watch request stays open before we re-open it; the API server
# ends watches after its own --min-request-timeout (default 1800s) anyway.
WATCH_SECONDS = 300
# Back-off after a failed list; short enough to recover quickly, long enough
# not to hammer an API server that is restarting.
RETRY_SECONDS = 2.0


def api_client(kubeconfig: str = "", context: str | None = None) -> k8s.ApiClient:
    """A client for the configured cluster.

    Empty ``kubeconfig``: in-cluster config inside a pod, else KUBECONFIG
    (colon-separated paths are merged) or ~/.kube/config. Refreshed tokens are
    never written back to the user's kubeconfig (persist_config=False).
    """
    configuration = k8s.Configuration()
    try:
        if not kubeconfig and not context and os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            k8s_config.load_kube_config(
                config_file=kubeconfig or None,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
    except k8s_config.ConfigException as error:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise ClusterError(
            f"cannot load Kubernetes config from {where}: {error}; "
            "pass --kubeconfig/--context or set KUBECONFIG"
        ) from None
    return k8s.ApiClient(configuration)


def describe_api_error(error: Exception, what: str) -> ClusterError:
    """Turn a client exception into one line that says what to check."""
    if isinstance(error, ApiException):
        hint = {
            401: "your credentials were refused; refresh them (kubectl get nodes should work)",
            403: "RBAC forbids it; grant get/list/watch on that resource",
            404: "it does not exist",
        }.get(error.status or 0, (error.reason or "").strip())
        return ClusterError(f"{what}: HTTP {error.status}: {hint}")
    return ClusterError(
        f"{what}: the API server did not answer ({error.__class__.__name__}); "
        "check --kubeconfig/--context and that the cluster is reachable"
    )


def request(
    api: k8s.ApiClient,
    method: str,
    path: str,
    query: Mapping[str, Any] | None = None,
    body: Any = None,
    content_type: str = "application/json",
    timeout: float | None = None,
) -> Any:
    """One API request through the client's own auth, TLS and token refresh.

    Returns the urllib3 response (stream it, or read ``.data``). Raises the
    client's ApiException for an HTTP error. We call the generic ApiClient
    rather than the typed CoreV1Api & co: importing those builds hundreds of
    pydantic models (half a second) for objects we read as plain JSON anyway.
    """
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    serialized = api.param_serialize(
        method=method,
        resource_path=path,
        query_params=[(k, v) for k, v in (query or {}).items() if v is not None],
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    answer = api.call_api(*serialized, _request_timeout=timeout)
    if answer.status >= 400:
        answer.read()
        raise ApiException(http_resp=answer)
    return answer.response


def read_json(response: Any) -> Any:
    """Body of a response from ``request``, released afterwards."""
    try:
        return json.loads(response.data)
    finally:
        response.release_conn()


def request_json(api: k8s.ApiClient, method: str, path: str, **kwargs: Any) -> Any:
    return read_json(request(api, method, path, **kwargs))


# What request_unless_missing answers for a 404: the object is not there.
MISSING: Any = object()


def request_unless_missing(
    api: k8s.ApiClient, method: str, path: str, doing: str, **kwargs: Any
) -> Any:
    """``request_json``, with a 404 answered as MISSING and any other failure
    as a ClusterError that says what ``doing`` needs ("reading Secret x/y")."""
    try:
        return request_json(api, method, path, **kwargs)
    except ApiException as error:
        if error.status == 404:
            return MISSING
        raise describe_api_error(error, doing) from None
    except Exception as error:
        raise describe_api_error(error, doing) from None


def list_nodes(api: k8s.ApiClient, label_selector: str = "") -> list[Node]:
    try:
        document = request_json(
            api, "GET", "/api/v1/nodes", query={"labelSelector": label_selector or None}
        )
        return nodes_from_list(document, "the API server's node list")
    except ClusterError:
        raise
    except Exception as error:
        raise describe_api_error(error, "listing nodes") from None


def load_node_file(path: str) -> list[Node]:
    """Nodes from ``kubectl get nodes -o json`` saved to a file."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        raise ClusterError(f"nodes.file {path!r} does not exist; check the path") from None
    except ValueError as error:
        raise ClusterError(
            f"nodes.file {path!r} is not JSON ({error}); save it with kubectl get nodes -o json"
        ) from None
    return nodes_from_list(document, f"nodes.file {path!r}")


class Reflector:
    """List, then watch from the list's resourceVersion, for ever: one
    collection (``path``, e.g. ``/api/v1/nodes``) handed to a subclass
    object by object. A 410 Gone, a watch ERROR or a dropped connection
    means a fresh list, as client-go's reflector does.

    Subclasses say what a list (``_replace``), an added or modified object
    (``_upsert``) and a deleted one (``_remove``) mean to them.
    """

    def __init__(self, api: k8s.ApiClient, path: str, kind: str, label_selector: str = "") -> None:
        self._api = api
        self._path = path
        self._kind = kind
        self._label_selector = label_selector or None
        self._stop = threading.Event()
        self.synced = threading.Event()
        self.relists = 0
        self.last_error: str | None = None
        self._thread: threading.Thread | None = None

    def _replace(self, objects: list[Mapping[str, Any]]) -> None:
        raise NotImplementedError

    def _upsert(self, obj: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def _remove(self, obj: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def start(self) -> "Reflector":
        self._thread = threading.Thread(target=self._run, name=f"watch-{self._kind}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _list(self) -> str:
        document = request_json(
            self._api, "GET", self._path, query={"labelSelector": self._label_selector}
        )
        self._replace(list(document.get("items") or []))
        self.relists += 1
        self.synced.set()
        return str((document.get("metadata") or {}).get("resourceVersion") or "")

    def _events(self, resource_version: str) -> Iterator[dict[str, Any]]:
        response = request(
            self._api,
            "GET",
            self._path,
            query={
                "labelSelector": self._label_selector,
                "watch": "true",
                "resourceVersion": resource_version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": WATCH_SECONDS,
            },
        )
        try:
            buffer = b""
            for chunk in response.stream(amt=65536, decode_content=True):
                if self._stop.is_set():
                    return
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        event = self._decode(line)
                        if event is not None:
                            yield event
        finally:
            response.release_conn()

    def _decode(self, line: bytes) -> dict[str, Any] | None:
        """One watch event from its JSON line; None: an event known to change nothing."""
        event: dict[str, Any] = json.loads(line)
        return event

    def _apply(self, event: Mapping[str, Any]) -> str | None:
        """Apply one event; return its resourceVersion, or None to re-list."""
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            # 410 Gone: our resourceVersion is too old. Any other error: re-list too.
            log.info("watch of %s ended with %s; re-listing", self._kind, obj.get("code"))
            return None
        if kind in ("ADDED", "MODIFIED"):
            self._upsert(obj)
        elif kind == "DELETED":
            self._remove(obj)
        return str((obj.get("metadata") or {}).get("resourceVersion") or "")

    def _run(self) -> None:
        resource_version: str | None = None
        while not self._stop.is_set():
            try:
                if resource_version is None:
                    resource_version = self._list()
                    self.last_error = None
                for event in self._events(resource_version):
                    next_version = self._apply(event)
                    if next_version is None:
                        resource_version = None
                        break
                    resource_version = next_version or resource_version
            except ApiException as error:
                if error.status == 410:
                    resource_version = None
                    continue
                self.last_error = str(describe_api_error(error, f"watching {self._kind}"))
                log.warning("%s", self.last_error)
                resource_version = None
                self._stop.wait(RETRY_SECONDS)
            except Exception as error:  # disconnects, timeouts, bad JSON
                self.last_error = str(describe_api_error(error, f"watching {self._kind}"))
                log.warning("%s; re-listing", self.last_error)
                resource_version = None
                self._stop.wait(RETRY_SECONDS)


class ListWatchCache(Reflector, Generic[T]):
    """A name -> value cache of one cluster-scoped resource, kept by list + watch.

    ``parse`` turns one JSON object into the cached value.
    """

    def __init__(
        self,
        api: k8s.ApiClient,
        path: str,
        parse: Callable[[Mapping[str, Any]], T],
        kind: str,
        label_selector: str = "",
    ) -> None:
        super().__init__(api, path, kind, label_selector)
        self._parse = parse
        self._items: dict[str, T] = {}
        self._lock = threading.Lock()

    def items(self) -> dict[str, T]:
        with self._lock:
            return dict(self._items)

    def get(self, name: str) -> T | None:
        with self._lock:
            return self._items.get(name)

    def start(self) -> "ListWatchCache[T]":
        super().start()
        return self

    def _replace(self, objects: list[Mapping[str, Any]]) -> None:
        fresh = {obj["metadata"]["name"]: self._parse(obj) for obj in objects}
        with self._lock:
            self._items = fresh

    def _upsert(self, obj: Mapping[str, Any]) -> None:
        value = self._parse(obj)
        with self._lock:
            self._items[obj["metadata"]["name"]] = value

    def _remove(self, obj: Mapping[str, Any]) -> None:
        with self._lock:
            self._items.pop((obj.get("metadata") or {}).get("name", ""), None)


def node_cache(api: k8s.ApiClient) -> ListWatchCache[Node]:
    return ListWatchCache(api, "/api/v1/nodes", node_from_json, "nodes")


def namespace_labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def namespace_cache(api: k8s.ApiClient) -> ListWatchCache[Mapping[str, str]]:
    return ListWatchCache(api, "/api/v1/namespaces", namespace_labels, "namespaces")
