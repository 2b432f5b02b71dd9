"""The DeschedulerPolicy the chart renders, decoded as the descheduler
decodes it: strictly (an unknown or duplicated field is an error, as with
sigs.k8s.io/yaml's strict unmarshalling of the policy file), against a
schema written from the json tags of kubernetes-sigs/descheduler v0.36's Go
types, the release descheduler-values.yaml pins. LowNodeUtilization's
Prometheus mode gets what validatePrometheusMetricsUtilization demands.
helm comes from .tools/bin (tests/conftest.py) when it is not on PATH."""

import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.test_chart import CHART, IMAGE, by_kind, render


@pytest.fixture(autouse=True)
def _helm() -> None:
    if shutil.which("helm") is None:
        pytest.fail(
            "helm is neither on PATH nor in .tools/bin: run `. .ci/setup`, which installs it"
        )


# Each struct: JSON name -> type, as the json tags in kubernetes-sigs/descheduler
# v0.36 declare them. "duration" is metav1.Duration (a Go duration string).
NAMESPACES = {"include": ["string"], "exclude": ["string"]}  # pkg/api/types.go, Namespaces
EVICTION_LIMITS = {"node": "uint"}  # pkg/api/types.go, EvictionLimits
THRESHOLDS = ("map", "number")  # pkg/api/types.go, ResourceThresholds (ResourceName -> Percentage)
LABEL_SELECTOR = {  # metav1.LabelSelector
    "matchLabels": ("map", "string"),
    "matchExpressions": [{"key": "string", "operator": "string", "values": ["string"]}],
}
DEFAULT_EVICTOR_ARGS = {  # pkg/framework/plugins/defaultevictor/types.go, DefaultEvictorArgs
    "nodeSelector": "string",
    "labelSelector": LABEL_SELECTOR,
    "namespaceLabelSelector": LABEL_SELECTOR,
    "priorityThreshold": {"value": "int", "name": "string"},  # pkg/api/types.go
    "nodeFit": "bool",
    "minReplicas": "uint",
    "minPodAge": "duration",
    "noEvictionPolicy": "string",  # Preferred | Mandatory
    "podProtections": {  # PodProtections
        "extraEnabled": ["string"],
        "defaultDisabled": ["string"],
        "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "string"}]}},
    },
    # Deprecated by podProtections, still decoded:
    "evictLocalStoragePods": "bool",
    "evictDaemonSetPods": "bool",
    "evictSystemCriticalPods": "bool",
    "ignorePvcPods": "bool",
    "ignorePodsWithoutPDB": "bool",
    "evictFailedBarePods": "bool",
}
LOW_NODE_UTILIZATION_ARGS = {  # pkg/framework/plugins/nodeutilization/types.go
    "useDeviationThresholds": "bool",
    "thresholds": THRESHOLDS,
    "targetThresholds": THRESHOLDS,
    "numberOfNodes": "int",
    "metricsUtilization": {  # MetricsUtilization
        "metricsServer": "bool",
        "source": "string",
        "prometheus": {"query": "string"},  # nodeutilization.Prometheus
    },
    # evictionModes is HighNodeUtilizationArgs' (not here).
    "evictableNamespaces": NAMESPACES,
    "evictionLimits": EVICTION_LIMITS,
}
PLUGIN_ARGS = {
    "DefaultEvictor": DEFAULT_EVICTOR_ARGS,
    "LowNodeUtilization": LOW_NODE_UTILIZATION_ARGS,
}
PLUGIN_SET = {"enabled": ["string"], "disabled": ["string"]}  # pkg/api/v1alpha2/types.go, PluginSet
POLICY = {  # pkg/api/v1alpha2/types.go, DeschedulerPolicy
    "apiVersion": "string",
    "kind": "string",
    "profiles": [
        {  # DeschedulerProfile
            "name": "string",
            "pluginConfig": [{"name": "string", "args": "plugin-args"}],  # PluginConfig
            "plugins": {  # Plugins
                "presort": PLUGIN_SET,
                "sort": PLUGIN_SET,
                "deschedule": PLUGIN_SET,
                "balance": PLUGIN_SET,
                "filter": PLUGIN_SET,
                "preevictionfilter": PLUGIN_SET,
            },
        }
    ],
    "nodeSelector": "string",
    "maxNoOfPodsToEvictPerNode": "uint",
    "maxNoOfPodsToEvictPerNamespace": "uint",
    "maxNoOfPodsToEvictTotal": "uint",
    "evictionFailureEventNotification": "bool",
    "metricsProviders": [
        {  # MetricsProvider
            "source": "string",
            "prometheus": {  # v1alpha2.Prometheus
                "url": "string",
                "authToken": {"secretReference": {"namespace": "string", "name": "string"}},
            },
        }
    ],
    "gracePeriodSeconds": "int",
}


def problems(value: Any, schema: Any, path: str = "policy", plugin: str = "") -> list[str]:
    """Where ``value`` does not fit ``schema``, one line a place."""
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return [f"{path}: an object expected, got {value!r}"]
        found = []
        for key, item in value.items():
            if key not in schema:
                found.append(f"{path}.{key}: no such field in the descheduler's types")
                continue
            found += problems(item, schema[key], f"{path}.{key}", value.get("name", plugin))
        return found
    if isinstance(schema, list):
        if not isinstance(value, list):
            return [f"{path}: a list expected, got {value!r}"]
        return [
            p
            for i, item in enumerate(value)
            for p in problems(item, schema[0], f"{path}[{i}]", plugin)
        ]
    if isinstance(schema, tuple):  # ("map", value type)
        if not isinstance(value, dict):
            return [f"{path}: a map expected, got {value!r}"]
        return [
            p for k, item in value.items() for p in problems(item, schema[1], f"{path}.{k}", plugin)
        ]
    if schema == "plugin-args":
        if plugin not in PLUGIN_ARGS:
            return [f"{path}: no args type known for plugin {plugin!r}"]
        return problems(value, PLUGIN_ARGS[plugin], path, plugin)
    fits = {
        "string": isinstance(value, str),
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "uint": isinstance(value, int) and not isinstance(value, bool) and value >= 0,
        "number": isinstance(value, (int, float)) and not isinstance(value, bool),
        "duration": isinstance(value, str) and value[-1:] in "smh" and value[:1].isdigit(),
        "any": True,
    }[schema]
    return [] if fits else [f"{path}: {schema} expected, got {value!r}"]


class _StrictLoader(yaml.SafeLoader):
    """YAML as a strict decoder reads it: a key given twice is an error."""


def _no_duplicates(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    keys = [loader.construct_object(k) for k, _ in node.value]
    repeated = sorted({k for k in keys if keys.count(k) > 1}, key=str)
    if repeated:
        raise ValueError(f"field {repeated[0]!r} given twice (strict decoding refuses it)")
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def decoded(text: str) -> Any:
    return yaml.load(text, Loader=_StrictLoader)


def rendered(*values: str) -> dict[str, Any]:
    sets = [arg for value in values for arg in ("--set", value)]
    objects = render(
        "helm", "--set", "rebalancing.deschedulerPolicy.enabled=true",
        "--set", "prometheus.url=http://prometheus.monitoring:9090", *sets,
    )  # fmt: skip
    configmap = next(
        o for o in by_kind(objects, "ConfigMap") if o["metadata"]["name"].endswith("-descheduler")
    )
    return dict(configmap["data"])


def test_the_policy_fits_the_descheduler_types():
    policy = decoded(rendered()["policy.yaml"])
    assert problems(policy, POLICY) == []
    assert (policy["apiVersion"], policy["kind"]) == ("descheduler/v1alpha2", "DeschedulerPolicy")


def test_the_schema_catches_a_misspelt_or_mistyped_field():
    policy = decoded(rendered()["policy.yaml"])
    args = policy["profiles"][0]["pluginConfig"][1]["args"]
    args["targetThreshold"] = args.pop("targetThresholds")  # singular: not the field
    policy["profiles"][0]["pluginConfig"][0]["args"]["minPodAge"] = 600
    assert problems(policy, POLICY) == [
        "policy.profiles[0].pluginConfig[0].args.minPodAge: duration expected, got 600",
        "policy.profiles[0].pluginConfig[1].args.targetThreshold: no such field in the descheduler's types",
    ]


def test_eviction_modes_belong_to_high_node_utilization_only():
    policy = decoded(rendered()["policy.yaml"])
    policy["profiles"][0]["pluginConfig"][1]["args"]["evictionModes"] = [
        "OnlyThresholdingResources"
    ]
    assert problems(policy, POLICY) == [
        "policy.profiles[0].pluginConfig[1].args.evictionModes: no such field in the descheduler's types"
    ]


def test_default_evictor_fields_of_v0_36_decode():
    policy = decoded(rendered()["policy.yaml"])
    policy["profiles"][0]["pluginConfig"][0]["args"].update(
        podProtections={"extraEnabled": ["PodsWithPVC"], "defaultDisabled": ["DaemonSetPods"]},
        namespaceLabelSelector={"matchLabels": {"team": "web"}},
        noEvictionPolicy="Preferred",
        evictFailedBarePods=True,
    )
    assert problems(policy, POLICY) == []


def test_a_field_given_twice_is_refused():
    with pytest.raises(ValueError, match="'nodeFit' given twice"):
        decoded("nodeFit: true\nminReplicas: 2\nnodeFit: false\n")


def test_the_descheduler_release_is_pinned_and_checked():
    values = decoded(rendered()["descheduler-values.yaml"])
    assert values["image"] == {
        "repository": "registry.k8s.io/descheduler/descheduler",
        "tag": "v0.36.0",
    }
    older = decoded(
        rendered("rebalancing.deschedulerPolicy.deschedulerVersion=v0.34.2")[
            "descheduler-values.yaml"
        ]
    )
    assert older["image"]["tag"] == "v0.34.2"


def test_the_prometheus_token_from_a_secret():
    policy = decoded(rendered()["policy.yaml"])
    assert "authToken" not in policy["metricsProviders"][0]["prometheus"]  # the pod's own token
    policy = decoded(
        rendered("rebalancing.deschedulerPolicy.prometheusAuthTokenSecret.name=prom-token")[
            "policy.yaml"
        ]
    )
    assert policy["metricsProviders"][0]["prometheus"]["authToken"] == {
        "secretReference": {"namespace": "kube-system", "name": "prom-token"}
    }
    assert problems(policy, POLICY) == []


def test_prometheus_mode_as_low_node_utilization_validates_it():
    policy = decoded(rendered("rebalancing.deschedulerPolicy.highThreshold=70")["policy.yaml"])
    args = policy["profiles"][0]["pluginConfig"][1]["args"]
    # One resource, MetricResource, in both threshold maps; the source Prometheus with a query.
    assert args["thresholds"] == {"MetricResource": 50}
    assert args["targetThresholds"] == {"MetricResource": 70}
    assert args["metricsUtilization"] == {
        "source": "Prometheus",
        "prometheus": {"query": "nettraffic:node_network_utilization:ratio"},
    }
    assert policy["metricsProviders"] == [
        {"source": "Prometheus", "prometheus": {"url": "http://prometheus.monitoring:9090"}}
    ]
    assert policy["profiles"][0]["plugins"]["balance"]["enabled"] == ["LowNodeUtilization"]


def test_safe_defaults():
    policy = decoded(rendered()["policy.yaml"])
    evictor, balance = (c["args"] for c in policy["profiles"][0]["pluginConfig"])
    assert balance["evictableNamespaces"]["exclude"] == ["kube-system", "nettraffic"]
    assert balance["evictionLimits"] == {"node": 1} and policy["maxNoOfPodsToEvictPerNode"] == 1
    assert evictor["minPodAge"] == "10m" and evictor["minReplicas"] == 2


def test_no_excluded_namespaces_leaves_the_releases_own():
    # --set ...=null removes the key (helm's values merge): no other namespace, not a crash.
    for unset in ("null", "{}"):
        policy = decoded(
            rendered(f"rebalancing.deschedulerPolicy.excludedNamespaces={unset}")["policy.yaml"]
        )
        balance = policy["profiles"][0]["pluginConfig"][1]["args"]
        assert balance["evictableNamespaces"]["exclude"] == ["nettraffic"]


def test_the_descheduler_chart_values_carry_the_same_policy():
    data = rendered("rebalancing.deschedulerPolicy.interval=2m")
    policy = decoded(data["policy.yaml"])
    values = decoded(data["descheduler-values.yaml"])
    assert values["deschedulerPolicy"] == {
        k: v for k, v in policy.items() if k not in ("apiVersion", "kind")
    }
    assert values["deschedulerPolicyAPIVersion"] == policy["apiVersion"]
    assert (values["kind"], values["deschedulingInterval"]) == ("Deployment", "2m")


def test_the_policy_queries_the_rule_the_chart_records():
    objects = render("helm", "--set", "rebalancing.enabled=true")
    (rule,) = by_kind(objects, "PrometheusRule")
    recorded = {r["record"] for g in rule["spec"]["groups"] for r in g["rules"]}
    policy = decoded(rendered()["policy.yaml"])
    query = policy["profiles"][0]["pluginConfig"][1]["args"]["metricsUtilization"]["prometheus"][
        "query"
    ]
    assert query in recorded


def test_off_by_default():
    names = [o["metadata"]["name"] for o in render("helm")]
    assert not [n for n in names if n.endswith(("-descheduler", "-rebalancing"))]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["prometheus.url="], "set rebalancing.deschedulerPolicy.prometheusUrl or prometheus.url"),
        (
            ["prometheus.url=http://p:9090", "rebalancing.deschedulerPolicy.lowThreshold=85"],
            "lowThreshold (85) must be below highThreshold (75)",
        ),
        (
            [
                "prometheus.url=http://p:9090",
                "rebalancing.deschedulerPolicy.deschedulerVersion=v0.35.1",
            ],
            'deschedulerVersion "v0.35.1": this policy runs on kubernetes-sigs/descheduler v0.34.x or v0.36.0',
        ),
        (
            [
                "prometheus.url=http://p:9090",
                "rebalancing.deschedulerPolicy.deschedulerVersion=0.36",
            ],
            'deschedulerVersion "0.36": this policy runs on',
        ),
    ],
)
def test_values_that_cannot_work_are_refused_with_the_fix(values, message):
    sets = [arg for value in values for arg in ("--set", value)]
    result = subprocess.run(
        ["helm", "template", "nt", CHART, *IMAGE, "--set", "rebalancing.deschedulerPolicy.enabled=true", *sets],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0 and message in result.stderr, result.stderr
