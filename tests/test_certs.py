"""Cert tooling: real keys and chains checked with cryptography; every
Kubernetes call against the fake API server over HTTP."""

import base64
import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from harness.fakeapi import webhook_configuration
from kubectl_nettraffic.errors import CertError, ClusterError
from kubectl_nettraffic.kube.client import api_client
from kubectl_nettraffic.tls.cert_bundle import (
    Bundle,
    dns_names,
    issue,
    merge_ca_bundle,
    problems,
    signed_by,
)
from kubectl_nettraffic.tls.cert_secret import read_secret
from kubectl_nettraffic.tls.certs import (
    Issuance,
    create_in_cluster,
    create_in_directory,
    patch_in_cluster,
    rotate_in_cluster,
)

SECRETS = ("api/v1", "nettraffic", "secrets")
WEBHOOKS = ("apis/admissionregistration.k8s.io/v1", None, "mutatingwebhookconfigurations")
SPEC = Issuance("nettraffic", "nettraffic")


def _load(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def _webhook_configuration(fake_api, ca_bundle: str = "", hooks: int = 2) -> None:
    fake_api.put(webhook_configuration(hooks=hooks, ca_bundle=ca_bundle))


def _bundle_in_configuration(fake_api) -> list[x509.Certificate]:
    configuration = fake_api.get(WEBHOOKS, "nettraffic")
    encoded = {w["clientConfig"].get("caBundle") for w in configuration["webhooks"]}
    assert len(encoded) == 1, "every webhook gets the same caBundle"
    return x509.load_pem_x509_certificates(base64.b64decode(encoded.pop()))


def test_issue_defaults_ecdsa_sans_validity_backdating():
    now = dt.datetime.now(dt.UTC)
    bundle = issue("svc", "ns", now=now)
    cert, ca = _load(bundle.cert), _load(bundle.ca_cert)
    assert (
        isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
        and cert.public_key().curve.name == "secp256r1"
    )
    sans = cert.extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    ).value.get_values_for_type(x509.DNSName)
    assert (
        sans
        == ["svc", "svc.ns", "svc.ns.svc", "svc.ns.svc.cluster.local"]
        == dns_names("svc", "ns")
    )
    assert (ca.not_valid_after_utc - now).days in (1824, 1825)
    assert (cert.not_valid_after_utc - now).days in (364, 365)
    assert now - cert.not_valid_before_utc >= dt.timedelta(minutes=4)
    assert signed_by(cert, ca) and not signed_by(ca, cert)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert problems(bundle, "svc", "ns") == []


def test_rsa_by_flag():
    bundle = issue("svc", "ns", key_type="rsa")
    key = _load(bundle.cert).public_key()
    assert isinstance(key, rsa.RSAPublicKey) and key.key_size == 2048
    assert problems(bundle, "svc", "ns") == []


def test_problems_found():
    good = issue("svc", "ns")
    other = issue("svc", "ns")
    assert "tls.key does not match tls.crt" in problems(
        Bundle(good.ca_cert, good.ca_key, good.cert, other.key), "svc", "ns"
    )
    assert "tls.crt is not signed by ca.crt" in problems(
        Bundle(other.ca_cert, other.ca_key, good.cert, good.key), "svc", "ns"
    )
    assert any("SANs lack" in p for p in problems(good, "other", "ns"))
    assert any("within 30 days" in p for p in problems(issue("svc", "ns", days=20), "svc", "ns"))
    assert problems(Bundle(b"junk", b"junk", b"junk", b"junk"), "svc", "ns")[0].startswith(
        "unreadable PEM"
    )


def test_out_dir_is_idempotent(tmp_path):
    directory = str(tmp_path / "tls")
    assert create_in_directory(directory, SPEC).startswith("created")
    first = (tmp_path / "tls" / "tls.crt").read_bytes()
    assert create_in_directory(directory, SPEC).startswith("kept")
    assert (tmp_path / "tls" / "tls.crt").read_bytes() == first
    (tmp_path / "tls" / "tls.key").write_bytes(issue("x", "y").key)
    assert "tls.key does not match" in create_in_directory(directory, SPEC)
    assert oct((tmp_path / "tls" / "tls.key").stat().st_mode & 0o777) == "0o600"


def test_create_keeps_a_valid_secret_and_replaces_a_broken_one(fake_api, kubeconfig):
    api = api_client(kubeconfig)
    assert (
        create_in_cluster(api, "nettraffic-tls", SPEC) == "created Secret nettraffic/nettraffic-tls"
    )
    secret = fake_api.get(SECRETS, "nettraffic-tls")
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt", "ca.key"}
    version = secret["metadata"]["resourceVersion"]
    assert create_in_cluster(api, "nettraffic-tls", SPEC).startswith(
        "kept Secret nettraffic/nettraffic-tls"
    )
    assert fake_api.get(SECRETS, "nettraffic-tls")["metadata"]["resourceVersion"] == version

    secret["data"]["tls.key"] = base64.b64encode(issue("x", "y").key).decode()
    fake_api.put(secret, plural="secrets")
    message = create_in_cluster(api, "nettraffic-tls", SPEC)
    assert message.startswith("replaced Secret") and "tls.key does not match tls.crt" in message
    assert (
        problems(
            read_secret(api, "nettraffic", "nettraffic-tls").bundle, "nettraffic", "nettraffic"
        )
        == []
    )

    del secret["data"]["ca.key"]
    fake_api.put(secret, plural="secrets")
    assert "it has no ca.key" in create_in_cluster(api, "nettraffic-tls", SPEC)


def test_create_without_rbac_writes_nothing(fake_api, kubeconfig):
    fake_api.forbidden.add(("POST", "/api/v1/namespaces/nettraffic/secrets"))
    with pytest.raises(
        ClusterError, match="writing Secret nettraffic/nettraffic-tls: HTTP 403: RBAC forbids it"
    ):
        create_in_cluster(api_client(kubeconfig), "nettraffic-tls", SPEC)
    assert fake_api.get(SECRETS, "nettraffic-tls") is None


def test_patch_sets_every_ca_bundle_with_a_guarded_json_patch(fake_api, kubeconfig):
    api = api_client(kubeconfig)
    create_in_cluster(api, "nettraffic-tls", SPEC)
    _webhook_configuration(fake_api)
    message = patch_in_cluster(api, "nettraffic-tls", "nettraffic", "nettraffic", None)
    assert message == "patched caBundle of 2 webhook(s) in MutatingWebhookConfiguration nettraffic"
    patch = next(r for r in fake_api.requests if r.method == "PATCH")
    assert patch.content_type == "application/json-patch+json"
    assert patch.body[0]["op"] == "test" and patch.body[0]["path"] == "/metadata/resourceVersion"
    ca = _load(read_secret(api, "nettraffic", "nettraffic-tls").bundle.ca_cert)
    assert _bundle_in_configuration(fake_api) == [ca]
    configuration = fake_api.get(WEBHOOKS, "nettraffic")
    assert {w["failurePolicy"] for w in configuration["webhooks"]} == {"Ignore"}  # left alone
    patch_in_cluster(api, "nettraffic-tls", "nettraffic", "nettraffic", "Fail")
    assert {w["failurePolicy"] for w in fake_api.get(WEBHOOKS, "nettraffic")["webhooks"]} == {
        "Fail"
    }


def test_patch_failures_are_clear_and_change_nothing(fake_api, kubeconfig):
    api = api_client(kubeconfig)
    with pytest.raises(
        CertError, match="does not exist; run kubectl nettraffic certs create first"
    ):
        patch_in_cluster(api, "nettraffic-tls", "nettraffic", "nettraffic", None)
    create_in_cluster(api, "nettraffic-tls", SPEC)
    with pytest.raises(
        ClusterError, match="MutatingWebhookConfiguration 'nettraffic' does not exist"
    ):
        patch_in_cluster(api, "nettraffic-tls", "nettraffic", "nettraffic", None)
    _webhook_configuration(fake_api)
    before = fake_api.get(WEBHOOKS, "nettraffic")
    fake_api.forbidden.add(("PATCH", "/apis/admissionregistration.k8s.io"))
    with pytest.raises(ClusterError, match="HTTP 403"):
        patch_in_cluster(api, "nettraffic-tls", "nettraffic", "nettraffic", None)
    assert fake_api.get(WEBHOOKS, "nettraffic") == before


def test_rotate_serving_cert_keeps_the_ca(fake_api, kubeconfig):
    api = api_client(kubeconfig)
    create_in_cluster(api, "nettraffic-tls", SPEC)
    _webhook_configuration(fake_api)
    patch_in_cluster(api, "nettraffic-tls", "nettraffic", "nettraffic", None)
    before = read_secret(api, "nettraffic", "nettraffic-tls").bundle
    assert rotate_in_cluster(api, "nettraffic-tls", "nettraffic", SPEC).startswith(
        "nothing to rotate"
    )
    message = rotate_in_cluster(api, "nettraffic-tls", "nettraffic", SPEC, force=True)
    assert message.startswith("rotated") and "new CA" not in message
    after = read_secret(api, "nettraffic", "nettraffic-tls").bundle
    assert after.cert != before.cert and after.ca_cert == before.ca_cert
    assert _bundle_in_configuration(fake_api) == [_load(before.ca_cert)]


def test_rotate_a_due_ca_overlaps_old_and_new(fake_api, kubeconfig):
    api = api_client(kubeconfig)
    short = Issuance(
        "nettraffic", "nettraffic", ca_days=300, days=200
    )  # CA already within a year of expiry
    create_in_cluster(api, "nettraffic-tls", short)
    _webhook_configuration(fake_api)
    patch_in_cluster(api, "nettraffic-tls", "nettraffic", "nettraffic", None)
    old_ca = _load(read_secret(api, "nettraffic", "nettraffic-tls").bundle.ca_cert)
    message = rotate_in_cluster(api, "nettraffic-tls", "nettraffic", SPEC, force=True)
    assert "new CA" in message and "caBundle holds 2 CA(s)" in message
    new = read_secret(api, "nettraffic", "nettraffic-tls").bundle
    bundle = _bundle_in_configuration(fake_api)
    assert _load(new.ca_cert) in bundle and old_ca in bundle
    assert signed_by(_load(new.cert), _load(new.ca_cert))
    # The caBundle was patched before the Secret changed.
    writes = [r for r in fake_api.requests if r.method in ("PATCH", "PUT")]
    assert [r.method for r in writes][-2:] == ["PATCH", "PUT"]


def test_rotate_restores_the_ca_bundle_when_the_secret_write_fails(fake_api, kubeconfig):
    api = api_client(kubeconfig)
    create_in_cluster(
        api, "nettraffic-tls", Issuance("nettraffic", "nettraffic", ca_days=300, days=200)
    )
    _webhook_configuration(fake_api)
    patch_in_cluster(api, "nettraffic-tls", "nettraffic", "nettraffic", None)
    bundle_before = _bundle_in_configuration(fake_api)
    secret_before = fake_api.get(SECRETS, "nettraffic-tls")
    fake_api.forbidden.add(("PUT", "/api/v1/namespaces/nettraffic/secrets"))
    with pytest.raises(ClusterError, match="writing Secret"):
        rotate_in_cluster(api, "nettraffic-tls", "nettraffic", SPEC, force=True)
    assert _bundle_in_configuration(fake_api) == bundle_before
    assert fake_api.get(SECRETS, "nettraffic-tls")["data"] == secret_before["data"]


def test_rotate_refuses_a_malformed_secret(fake_api, kubeconfig):
    fake_api.put(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"name": "nettraffic-tls", "namespace": "nettraffic"},
            "data": {"tls.crt": "!!"},
        },
        plural="secrets",
    )
    _webhook_configuration(fake_api, ca_bundle="")
    with pytest.raises(
        CertError, match="is malformed: it has no ca.crt; run kubectl nettraffic certs create"
    ):
        rotate_in_cluster(api_client(kubeconfig), "nettraffic-tls", "nettraffic", SPEC)
    assert not [r for r in fake_api.requests if r.method in ("PATCH", "PUT", "POST")]


def test_expired_cas_are_dropped_from_the_bundle():
    now = dt.datetime.now(dt.UTC)
    expired = issue("svc", "ns", ca_days=10, days=5, now=now - dt.timedelta(days=20)).ca_cert
    current = issue("svc", "ns").ca_cert
    new = issue("svc", "ns").ca_cert
    merged = merge_ca_bundle(expired + current, new)
    assert x509.load_pem_x509_certificates(merged) == [_load(new), _load(current)]
