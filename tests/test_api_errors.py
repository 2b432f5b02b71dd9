"""Errors keep their cause: only an API or network failure is reported as
"the API server did not answer"; a bug of ours propagates as itself.

Each wrapper is fed both through the real kubernetes client: an API server
that is not there (a closed port on 127.0.0.1), and a client whose request
raises a KeyError, as a bug anywhere beneath the wrapper would."""

import socket
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from harness.fakeapi import webhook_configuration
from kubectl_nettraffic.cli.top import WebhookLocation, from_webhook
from kubectl_nettraffic.errors import ClusterError, NetTrafficError, SourceError
from kubectl_nettraffic.kube.client import (
    MISSING,
    api_call,
    api_client,
    request_json,
    request_unless_missing,
)
from kubectl_nettraffic.kube.cluster import list_nodes, node_list
from kubectl_nettraffic.sources.metrics_server import MetricsServerSource
from kubectl_nettraffic.tls.cert_bundle import issue
from kubectl_nettraffic.tls.cert_secret import write_secret
from kubectl_nettraffic.tls.webhook_configuration import patch_ca_bundle


class BuggyClient(k8s.ApiClient):  # type: ignore[misc]
    """The real client, but every request fails as our own bug would."""

    def call_api(self, *args: Any, **kwargs: Any) -> Any:
        raise KeyError("a bug beneath the wrapper")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _unreachable() -> k8s.ApiClient:
    configuration = k8s.Configuration()
    configuration.host = f"http://127.0.0.1:{_closed_port()}"
    configuration.retries = False
    return k8s.ApiClient(configuration)


def _buggy() -> k8s.ApiClient:
    configuration = k8s.Configuration()
    configuration.host = "http://127.0.0.1:1"
    return BuggyClient(configuration)


WRAPPERS: dict[str, Callable[[k8s.ApiClient], object]] = {
    "kube.client.request_unless_missing": lambda api: request_unless_missing(
        api, "GET", "/api/v1/namespaces/default/secrets/x", "reading Secret default/x"
    ),
    "kube.cluster.node_list": node_list,
    "kube.cluster.list_nodes": list_nodes,
    "sources.metrics_server": lambda api: MetricsServerSource(api).fetch(),
    "cli.top.from_webhook": lambda api: from_webhook(api, WebhookLocation()),
    "tls.cert_secret.write_secret": lambda api: write_secret(
        api, "nettraffic", "tls", issue("nettraffic", "nettraffic"), None
    ),
    "tls.webhook_configuration.patch_ca_bundle": lambda api: patch_ca_bundle(
        api, "nettraffic", b"CA", webhook_configuration("nettraffic")
    ),
}


@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_an_api_server_that_does_not_answer_is_said_so(wrapper):
    with pytest.raises(NetTrafficError, match="the API server did not answer") as raised:
        WRAPPERS[wrapper](_unreachable())
    # The cause is kept for -v's traceback.
    assert raised.value.__cause__ is not None
    assert not isinstance(raised.value.__cause__, NetTrafficError)


@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_a_bug_propagates_as_itself(wrapper):
    with pytest.raises(KeyError, match="a bug beneath the wrapper"):
        WRAPPERS[wrapper](_buggy())


def test_an_api_error_names_the_status_and_a_missing_object_is_missing(fake_api, kubeconfig):
    api = api_client(kubeconfig)
    secret = "/api/v1/namespaces/default/secrets/x"
    assert request_unless_missing(api, "GET", secret, "reading Secret default/x") is MISSING
    expected = r"^reading Secret default/x: HTTP 404: it does not exist$"
    with pytest.raises(ClusterError, match=expected), api_call("reading Secret default/x"):
        request_json(api, "GET", secret)


def test_metrics_server_failures_name_metrics_server():
    with pytest.raises(SourceError, match="is metrics-server installed"):
        MetricsServerSource(_unreachable()).fetch()
