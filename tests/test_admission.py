"""The AdmissionReview answer: written from a template, it must be exactly
what the stock encoder writes for the same maps."""

import base64
import json

from hypothesis import example, given
from hypothesis import strategies as st

from harness.reviews import pod, review
from kubectl_nettraffic.scoring.placement import Preference
from kubectl_nettraffic.steering.affinity_patch import affinity_patch
from webhook.admission import answer, parse_review

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

    written = answer(parsed, patch, warnings)

    assert written == json.dumps(whole, separators=(",", ":"))
    if patch:
        assert json.loads(base64.b64decode(json.loads(written)["response"]["patch"])) == patch
