"""The chart's ValidatingAdmissionPolicy, rendered by the real helm and its
CEL evaluated with a CEL implementation (common-expression-language), the
way the API server applies it: the match conditions choose the request,
then every validation must hold."""

import shutil

import cel
import pytest

from tests.test_chart import by_kind, render

pytestmark = pytest.mark.skipif(not shutil.which("helm"), reason="helm not on PATH")

WEBHOOK = "system:serviceaccount:nettraffic:nt-nettraffic"
CLEANUP = "system:serviceaccount:nettraffic:nt-nettraffic-tier-labels-cleanup"
TIER = "nettraffic.io/traffic-tier"


@pytest.fixture(scope="module")
def policy():
    objects = render()
    (policy,) = by_kind(objects, "ValidatingAdmissionPolicy")
    (binding,) = by_kind(objects, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert policy["spec"]["failurePolicy"] == "Fail"
    return policy["spec"]


def _node(labels=None, annotations=None, spec=None):
    metadata = {"name": "n1"}
    if labels is not None:
        metadata["labels"] = labels
    if annotations is not None:
        metadata["annotations"] = annotations
    node = {"apiVersion": "v1", "kind": "Node", "metadata": metadata}
    if spec is not None:
        node["spec"] = spec
    return node


def _admit(spec, user, old, new):
    """None when the policy does not apply; else the messages of failed validations."""
    context = {"object": new, "oldObject": old, "request": {"userInfo": {"username": user}}}
    if not all(cel.evaluate(c["expression"], context) for c in spec["matchConditions"]):
        return None
    return [
        v["message"]
        for v in spec["validations"]
        if cel.evaluate(v["expression"], context) is not True
    ]


BASE = {"kubernetes.io/hostname": "n1", "team": "a"}


@pytest.mark.parametrize(
    "old, new",
    [
        (_node(BASE), _node({**BASE, TIER: "1"})),  # adds the tier
        (_node({**BASE, TIER: "1"}), _node({**BASE, TIER: "3"})),  # changes it
        (_node({**BASE, TIER: "1"}), _node(BASE)),  # removes it
        (_node(), _node({TIER: "2"})),  # a node that had no labels at all
        (_node({TIER: "2"}), _node()),  # ... and is left with none
        (
            _node(BASE, {"a": "b"}, {"podCIDR": "10.0.0.0/24"}),
            _node({**BASE, TIER: "4"}, {"a": "b"}, {"podCIDR": "10.0.0.0/24"}),
        ),
    ],
    ids=["add", "change", "remove", "first-label", "last-label", "spec-and-annotations-kept"],
)
def test_the_webhook_may_write_its_own_labels(policy, old, new):
    assert _admit(policy, WEBHOOK, old, new) == []
    assert _admit(policy, CLEANUP, old, new) == []


@pytest.mark.parametrize(
    "old, new, message",
    [
        (_node(BASE), _node({**BASE, "team": "b"}), "add or change only nettraffic.io/ labels"),
        (_node(BASE), _node({**BASE, "role": "x"}), "add or change only nettraffic.io/ labels"),
        (_node(), _node({"role": "x"}), "add or change only nettraffic.io/ labels"),
        (_node(BASE), _node({"kubernetes.io/hostname": "n1"}), "remove only nettraffic.io/ labels"),
        (_node(BASE), _node(), "remove only nettraffic.io/ labels"),
        (_node(BASE, {"a": "b"}), _node(BASE, {"a": "c"}), "not change a Node's annotations"),
        (_node(BASE), _node(BASE, {"a": "b"}), "not change a Node's annotations"),
        (
            _node(BASE, spec={}),
            _node(BASE, spec={"unschedulable": True}),
            "not change a Node's spec",
        ),
        (
            _node(BASE, spec={"taints": []}),
            _node(BASE, spec={"taints": [{"key": "k", "effect": "NoSchedule"}]}),
            "not change a Node's spec",
        ),
    ],
    ids=[
        "change-other",
        "add-other",
        "add-first-other",
        "remove-other",
        "remove-all",
        "annotation",
        "add-annotation",
        "cordon",
        "taint",
    ],
)
def test_anything_else_on_a_node_is_denied(policy, old, new, message):
    for user in (WEBHOOK, CLEANUP):
        failed = _admit(policy, user, old, new)
        assert failed and any(message in m for m in failed), failed


def test_other_users_are_not_subject_to_it(policy):
    old, new = _node(BASE), _node({**BASE, "team": "b"}, spec={"unschedulable": True})
    for user in ("system:node:n1", "system:serviceaccount:kube-system:node-controller", "admin"):
        assert _admit(policy, user, old, new) is None
    # The same account name in another namespace is someone else.
    assert _admit(policy, "system:serviceaccount:other:nt-nettraffic", old, new) is None
