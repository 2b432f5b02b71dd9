"""Malformed and hostile bodies against the running server (real gunicorn,
real TLS): every one gets a clear 4xx JSON answer or an allowed admission,
never a 500 and never a dropped connection; a patch, when one is sent,
applies to the pod in the review."""

import base64
import copy
import json
from typing import Any

import jsonpatch
import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.fakeapi import node
from harness.reviews import pod, review
from harness.webhook import WebhookProcess
from tests.e2e.conftest import MIXED_RATES
from tests.e2e.conftest import node_file as _node_file
from tests.e2e.conftest import webhook_config as _config

CLEAR_ANSWERS = {400, 413, 415}


@pytest.fixture(scope="module")
def webhook(prometheus, tmp_path_factory):
    nodes = [node(n) for n in MIXED_RATES]
    path = _node_file(tmp_path_factory.mktemp("hostile"), "nodes.json", nodes)
    process = WebhookProcess(_config(prometheus.url, path))
    yield process
    process.stop()


def _post_raw(webhook: WebhookProcess, path: str, body: bytes) -> requests.Response:
    return webhook.session.post(
        webhook.url + path,
        data=body,
        headers={"Content-Type": "application/json"},
        timeout=10,
    )


def _check_admission(sent: Any, answer: requests.Response) -> None:
    """A clear 4xx, or an allowed answer whose patch applies to the pod sent."""
    assert answer.headers["Content-Type"].startswith("application/json"), answer.text
    if answer.status_code in CLEAR_ANSWERS:
        body = answer.json()
        assert isinstance(body["error"], str) and body["error"]
        return
    _check_allowed(sent, answer)


def _check_allowed(sent: Any, answer: requests.Response) -> None:
    """An allowed answer (200, not a 4xx) whose patch, if any, applies to the pod sent."""
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"].startswith("application/json"), answer.text
    body = answer.json()
    response = body["response"]
    assert response["allowed"] is True
    assert response["uid"] == sent["request"]["uid"]
    # A decision that raised: odd pods must be skipped by rule, not by accident.
    assert not any("internal error" in w for w in response.get("warnings") or ()), response
    if "patch" in response:
        patch = json.loads(base64.b64decode(response["patch"]))
        jsonpatch.apply_patch(sent["request"]["object"], patch)  # raises if it cannot apply


# ---------------------------------------------------------------- generated

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON document, the root's children down."""
    found: list[tuple[Any, ...]] = []
    children = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, child in children:
        found.append((*prefix, key))
        found.extend(_paths(child, (*prefix, key)))
    return found


def _steerable_review() -> dict[str, Any]:
    spec = {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "net"}],
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 5,
                        "preference": {
                            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]
                        },
                    }
                ],
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "disk", "operator": "NotIn", "values": ["hdd"]}
                            ]
                        }
                    ]
                },
            },
            "podAntiAffinity": {},
        },
    }
    return review(pod(annotations={"team": "a"}, spec=spec), dry_run=True)


TEMPLATE = _steerable_review()
# The request and everything in the pod: where a broken value hurts.
PATHS = [path for path in _paths(TEMPLATE) if path[0] == "request" and path[1:2] != ("userInfo",)]


@st.composite
def mutated_reviews(draw: st.DrawFn) -> dict[str, Any]:
    sent = copy.deepcopy(TEMPLATE)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        parent: Any = sent
        try:
            for key in path[:-1]:
                parent = parent[key]
            if draw(st.booleans()) and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = draw(json_values)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation replaced a parent of this path
    return sent


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sent=mutated_reviews())
def test_any_broken_review_is_answered_clearly(webhook, sent):
    answer = _post_raw(webhook, "/mutate", json.dumps(sent).encode())
    request = sent.get("request")
    if isinstance(request, dict) and isinstance(request.get("uid"), str) and request["uid"]:
        _check_admission(sent, answer)
    else:
        assert answer.status_code == 400 and answer.json()["error"], answer.text


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=json_values)
def test_any_json_document_is_answered_clearly_on_every_endpoint(webhook, body):
    for path in ("/mutate", "/scheduler/filter", "/scheduler/prioritize"):
        answer = _post_raw(webhook, path, json.dumps(body).encode())
        assert answer.status_code in CLEAR_ANSWERS | {200}, (path, answer.text)
        assert answer.headers["Content-Type"].startswith("application/json")
        if answer.status_code != 200:
            assert answer.json()["error"]


# ---------------------------------------------------------------- by hand


def _nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


@pytest.mark.parametrize(
    ("body", "says"),
    [
        pytest.param(_nested(1_100), "nested", id="objects-1100-deep"),
        pytest.param(_nested(100_000), "nested", id="objects-100000-deep"),
        pytest.param(b"[" * 50_000 + b"]" * 50_000, "nested", id="lists-50000-deep"),
        pytest.param(b'{"apiVersion": NaN}', "NaN", id="nan"),
        pytest.param(b'{"apiVersion": -Infinity}', "Infinity", id="infinity"),
        pytest.param(b'{"apiVersion": 1e400}', "1e400", id="number-out-of-range"),
        pytest.param(b'{"apiVersion": "\xff\xfe"}', "not valid JSON", id="invalid-utf8"),
        pytest.param(b"", "not valid JSON", id="empty"),
    ],
)
def test_hostile_json_gets_400_that_names_the_problem(webhook, body, says):
    for path in ("/mutate", "/scheduler/filter"):
        answer = _post_raw(webhook, path, body)
        assert answer.status_code == 400, answer.text
        assert says in answer.json()["error"]


def test_duplicate_keys_take_the_last_value_as_the_api_server_does(webhook):
    sent = review(pod())
    text = json.dumps(sent)
    # The first apiVersion is wrong; the last one, which Go's decoder keeps, is right.
    text = '{"apiVersion": "v0",' + text[1:]
    answer = _post_raw(webhook, "/mutate", text.encode())
    _check_allowed(sent, answer)
    assert answer.json()["apiVersion"] == "admission.k8s.io/v1"


def _with(obj: dict[str, Any], **replace: Any) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    for key, value in replace.items():
        if value is ...:
            changed.pop(key, None)
        else:
            changed[key] = value
    return changed


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(_with(pod(), metadata=None), id="metadata-null"),
        pytest.param(_with(pod(), metadata=False), id="metadata-false"),
        pytest.param(_with(pod(), metadata=...), id="metadata-missing"),
        pytest.param(_with(pod(), metadata=["x"]), id="metadata-list"),
        pytest.param(_with(pod(), spec=...), id="spec-missing"),
        pytest.param(_with(pod(), spec=None), id="spec-null"),
        pytest.param(_with(pod(), metadata={"annotations": None}), id="annotations-null"),
        pytest.param(_with(pod(), metadata={"annotations": []}), id="annotations-list"),
    ],
)
def test_pods_of_odd_shape_get_a_patch_that_applies_or_none(webhook, obj):
    sent = review(pod(), dry_run=True)
    sent["request"]["object"] = obj
    sent["request"]["name"] = ""
    sent["request"]["namespace"] = ""
    _check_allowed(sent, _post_raw(webhook, "/mutate", json.dumps(sent).encode()))


def test_an_update_whose_object_is_a_list_is_allowed(webhook):
    sent = review(pod(), operation="UPDATE")
    sent["request"]["object"] = [1, 2]
    sent["request"]["namespace"] = None
    answer = _post_raw(webhook, "/mutate", json.dumps(sent).encode())
    _check_allowed(sent, answer)
    assert "patch" not in answer.json()["response"]
