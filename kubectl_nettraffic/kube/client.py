"""The Kubernetes API client as the engine uses it: kubeconfig or
in-cluster configuration through the real ``kubernetes`` client (its auth,
TLS and token refresh), raw JSON requests, and errors that say what to do."""

import json
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException as ApiException  # re-exported

from kubectl_nettraffic.errors import ClusterError

log = logging.getLogger(__name__)

# The client's type and its HTTP error, for the modules outside kube/ that
# pass a client along or read a status: only kube/ imports the kubernetes package.
ApiClient = k8s.ApiClient


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


# What a request to the API server raises when the server, or the network to
# it, fails: the client's HTTP errors, urllib3's (refused, reset, timed out,
# TLS), the OS's, and an answer that is not JSON. Anything else raised
# beside a request is a bug of ours, and keeps its own type and traceback.
API_ERRORS: tuple[type[Exception], ...] = (
    ApiException,
    urllib3.exceptions.HTTPError,
    OSError,
    json.JSONDecodeError,
)


@contextmanager
def api_call(what: str) -> Iterator[None]:
    """API and network errors inside become one ClusterError that says what
    ``what`` ("listing nodes") needs; the original stays its cause, so ``-v``
    shows it. Any other exception passes through unchanged."""
    try:
        yield
    except API_ERRORS as error:
        raise describe_api_error(error, what) from error


def context_namespace(kubeconfig: str, context: str | None) -> str:
    """The namespace of ``context`` (or the current one) in the kubeconfig, as
    kubectl reads it; "default" when none is set or the kubeconfig cannot be read."""
    try:
        contexts, active = k8s_config.list_kube_config_contexts(config_file=kubeconfig or None)
    except (k8s_config.ConfigException, OSError, ValueError):
        return "default"
    chosen = next((c for c in contexts if c["name"] == context), active) if context else active
    return str(((chosen or {}).get("context") or {}).get("namespace") or "default")


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
        with api_call(doing):
            return request_json(api, method, path, **kwargs)
    except ClusterError as error:
        if isinstance(error.__cause__, ApiException) and error.__cause__.status == 404:
            return MISSING
        raise
