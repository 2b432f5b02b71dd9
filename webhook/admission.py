"""AdmissionReview v1 on the wire: parse and validate a request, build the
response. Pure; types follow k8s.io/api/admission/v1/types.go.
"""

import json
import math
from binascii import b2a_base64
from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring_ascii as json_string
from typing import Any, NamedTuple

from kubectl_nettraffic.errors import InputError

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"

# Compact, and without the cycle check: our answers are fresh dicts and lists
# that cannot refer to themselves. A quarter less encoding time per admission.
ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)


class HttpInputError(InputError):
    """Malformed input, with the HTTP status that says so."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Review(NamedTuple):  # a tuple: one is made on every admission
    api_version: str
    kind: str
    uid: str
    operation: str
    resource_kind: str  # request.kind.kind
    namespace: str
    name: str  # request.name, empty for generateName pods
    obj: Mapping[str, Any] | None
    dry_run: bool

    @property
    def is_pod_create(self) -> bool:
        return self.operation == "CREATE" and self.resource_kind == "Pod"

    def pod_name(self) -> str:
        """A name for logs: request.name, else generateName + '*'."""
        if self.name:
            return self.name
        metadata = (self.obj or {}).get("metadata")
        if not isinstance(metadata, dict):
            return "*"
        return str(metadata.get("name") or f"{metadata.get('generateName', '')}*")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (RFC 8259); send finite numbers")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise ValueError(f"number {text} is out of range for a 64-bit float")
    return value


# Built once: json.loads with options builds a decoder on every call.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)


def decode_json(raw: bytes) -> Any:
    """A request body as JSON, strictly: no NaN or Infinity, no number a Go
    float64 cannot hold (the API server's own decoder refuses them too), and
    a clear error for nesting past what the decoder can follow. The API
    server sends UTF-8 (RFC 8259 section 8.1); other encodings are refused."""
    try:
        return _DECODER.decode(raw.decode("utf-8"))
    except RecursionError:
        raise HttpInputError(
            "body is nested too deeply to decode; an AdmissionReview is a few levels deep"
        ) from None
    except (ValueError, UnicodeDecodeError) as error:
        raise HttpInputError(f"body is not valid JSON: {error}") from None


def parse_review(body: Any) -> Review:
    """Validate an AdmissionReview request; raise HttpInputError saying what is wrong."""
    if not isinstance(body, dict):
        raise HttpInputError("body is not a JSON object; send an AdmissionReview")
    api_version = body.get("apiVersion")
    if api_version != API_VERSION:
        raise HttpInputError(
            f"apiVersion {api_version!r} is not supported; send {API_VERSION} "
            "(admissionReviewVersions: [v1] in the webhook configuration)"
        )
    if body.get("kind") != KIND:
        raise HttpInputError(f"kind {body.get('kind')!r} is not {KIND}")
    request = body.get("request")
    if not isinstance(request, dict):
        raise HttpInputError("AdmissionReview has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise HttpInputError("request.uid is missing; the API server always sets it")
    kind = request.get("kind") or {}
    resource_kind = kind.get("kind", "") if isinstance(kind, dict) else ""
    operation = str(request.get("operation") or "")
    obj = request.get("object")
    if operation == "CREATE" and resource_kind == "Pod":
        if not isinstance(obj, dict):
            raise HttpInputError("request.object is missing for a Pod CREATE")
        if obj.get("kind", "Pod") != "Pod":
            raise HttpInputError(f"request.object is a {obj.get('kind')!r}, not a Pod")
    if not isinstance(obj, dict):
        obj = None  # not a pod we could read: an UPDATE's list, a DELETE's null
    namespace = request.get("namespace")
    if not namespace and obj is not None and isinstance(obj.get("metadata"), dict):
        namespace = obj["metadata"].get("namespace")
    return Review(
        api_version=api_version,
        kind=KIND,
        uid=uid,
        operation=operation,
        resource_kind=str(resource_kind),
        namespace=str(namespace or ""),
        name=str(request.get("name") or ""),
        obj=obj,
        dry_run=bool(request.get("dryRun", False)),
    )


def answer(review: Review, patch: str | None = None, warnings: Sequence[str] = ()) -> str:
    """The AdmissionReview answer, as compact JSON text.

    Always allowed: this webhook only ever advises. uid/apiVersion/kind are
    echoed. Written from a template rather than built as maps for the
    encoder: with the patch's text already written (``patch``, the engine's
    steering/affinity_patch.patch_text), no JSON encoder runs per admission. What it writes is what ``json.dumps`` of the equivalent maps writes; a
    property test holds the two equal.
    """
    text = f'{{"uid":{json_string(review.uid)},"allowed":true'
    if patch:
        encoded = b2a_base64(patch.encode(), newline=False).decode("ascii")
        text += f',"patchType":"JSONPatch","patch":"{encoded}"'
    if warnings:
        # The API server may truncate warnings over 256 characters; ours are short.
        text += f',"warnings":[{",".join([json_string(w[:256]) for w in warnings])}]'
    return (
        f'{{"apiVersion":{json_string(review.api_version)},"kind":{json_string(review.kind)},'
        f'"response":{text}}}}}'
    )
