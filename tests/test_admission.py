"""The AdmissionReview answer: written from a template, it must be exactly
what the stock encoder writes for the same maps."""

import base64
import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from harness.reviews import pod, review
from kubectl_nettraffic.scoring.placement import Preference
from kubectl_nettraffic.steering.affinity_patch import affinity_patch, patch_text
from webhook.admission import HttpInputError, answer, decode_json, parse_review

# uids and warnings that JSON must escape: quotes, backslashes, controls, non-ASCII.
_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=300)


@given(
    uid=_text.filter(bool),
    warnings=st.lists(_text, max_size=3),
    patched=st.booleans(),
)
@example(uid="u", warnings=["w" * 300], patched=False)  # the API server's 256-character cut
def test_answer_is_what_the_stock_encoder_writes(uid, warnings, patched):
    sent = review(pod())
    sent["request"]["uid"] = uid
    parsed = parse_review(sent)
    patch = (
        affinity_patch(parsed.obj or {}, [Preference('n"1', 100, 80.0)], {"nettraffic.io/a": "b"})
        if patched
        else None
    )
    expected: dict = {"uid": uid, "allowed": True}
    if patch:
        text = json.dumps(patch, separators=(",", ":"))
        expected["patchType"] = "JSONPatch"
        expected["patch"] = base64.b64encode(text.encode()).decode()
    if warnings:
        expected["warnings"] = [w[:256] for w in warnings]
    whole = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": expected}

    written = answer(parsed, patch_text(patch) if patch else None, warnings)

    assert written == json.dumps(whole, separators=(",", ":"))
    if patch:
        assert json.loads(base64.b64decode(json.loads(written)["response"]["patch"])) == patch


# JSON as an API server sends it: integers within Go's int64 and uint64, finite
# floats, any text (hypothesis draws no lone surrogates; the example adds one).
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(value=_json_values, ensure_ascii=st.booleans())
@example(value={"a": "\ud800"}, ensure_ascii=True)  # a lone surrogate escape: valid JSON
def test_decoding_gives_what_the_standard_library_gives(value, ensure_ascii):
    raw = json.dumps(value, ensure_ascii=ensure_ascii).encode()
    decoded = decode_json(raw)
    assert decoded == json.loads(raw)
    assert json.dumps(decoded) == json.dumps(value)  # types too: 1 stays an int, 1.0 a float


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b'{"a": NaN}', "NaN is not a JSON number"),
        (b'{"a": [-Infinity]}', "-Infinity is not a JSON number"),
        (b'{"a": 1e400}', "number 1e400 is out of range"),
        (b'{"a": ' * 1_100 + b"1" + b"}" * 1_100, "nested too deeply"),
        (b'{"a": "\xff"}', "not valid JSON"),
        (b'{"a": 1,}', "not valid JSON"),
    ],
)
def test_refused_bodies_are_named_as_before(raw, says):
    with pytest.raises(HttpInputError, match=says):
        decode_json(raw)
