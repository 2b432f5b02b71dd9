"""Where an HTTP/1.1 request ends, from the bytes received so far. Pure.

The front (webhook.front) reads each request whole before a thread sees it;
this says when it has: the header section ends at the first blank line, the
body after it is ``Content-Length`` bytes long (RFC 9112 §6.3). It is not a
parser: gunicorn parses the request once it is complete. It only refuses
what the front will not buffer, with the status and the message to answer:
a header section past ``MAX_HEADER_BYTES``, a request line or header fields
that gunicorn's parser would refuse (answered here as JSON), a chunked body
(the API server always sends Content-Length), a malformed or conflicting
Content-Length, and a body past the configured limit.
"""

import re
from typing import NamedTuple

# gunicorn's own limits allow 100 fields of 8,190 bytes; a real AdmissionReview
# request has a handful of short ones. Past this, the sender is not an API server.
MAX_HEADER_BYTES = 64 * 1024
HEADER_END = b"\r\n\r\n"
# gunicorn's defaults (limit_request_line, limit_request_fields,
# limit_request_field_size): refused here, as JSON, before its parser would
# refuse them with a page of HTML.
MAX_REQUEST_LINE = 4094
MAX_FIELDS = 100
MAX_FIELD_BYTES = 8190
# RFC 9110 §5.6.2 tokens; methods as gunicorn takes them (no lowercase, 3-20 long).
TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
METHOD = re.compile(r"[!$%&'*+\-.^_`|~0-9A-Z]{3,20}")
VERSION = re.compile(r"HTTP/\d\.\d")


class Framing(NamedTuple):
    """What is known of the request at the front of a buffer."""

    complete: bool = False
    # Bytes of the whole request (header section and body), once it is known.
    length: int | None = None
    # Set when the request is refused: the status and the message to answer.
    status: int = 0
    message: str = ""
    # Declared body length of a refused oversized body (the front drains it).
    body_length: int = 0
    path: str = ""
    # The client asks for "100 Continue" before it sends the body.
    expects_continue: bool = False

    @property
    def refused(self) -> bool:
        return self.status != 0


INCOMPLETE = Framing()


def body_too_large_message(limit: int) -> str:
    return f"body is larger than {limit} bytes (server.maxRequestBytes)"


def frame(buffer: bytes | bytearray, max_body_bytes: int) -> Framing:
    """How far the request at the start of ``buffer`` reaches."""
    end = buffer.find(HEADER_END)
    if end > MAX_HEADER_BYTES or (end < 0 and len(buffer) > MAX_HEADER_BYTES):
        return Framing(
            status=431,
            message=f"request header section is larger than {MAX_HEADER_BYTES} bytes",
        )
    if end < 0:
        return INCOMPLETE
    head = bytes(buffer[:end]).decode("latin-1")
    if head.startswith("\r\n"):
        head = head[2:]  # RFC 9112 §2.2: one empty line may come before the request line
    request_line, *fields = head.split("\r\n")
    parts = request_line.split(" ", 2)
    path = parts[1] if len(parts) == 3 else ""
    refusal = _syntax_refusal(request_line, parts, fields)
    if refusal is not None:
        status, message = refusal
        return Framing(status=status, message=message, path=path)
    lengths: set[str] = set()
    expects_continue = False
    for field in fields:
        name, _, value = field.partition(":")
        name = name.lower()
        if name == "content-length":
            lengths.update(v.strip() for v in value.split(","))
        elif name == "transfer-encoding":
            return Framing(
                status=411,
                message=f"Transfer-Encoding {value.strip()!r} is not accepted; "
                "send the body with a Content-Length",
                path=path,
            )
        elif name == "expect":
            expects_continue = value.strip().lower() == "100-continue"
    if len(lengths) > 1 or not all(v.isascii() and v.isdigit() for v in lengths):
        return Framing(
            status=400,
            message=f"Content-Length {', '.join(sorted(lengths))!r} is not one whole number of bytes",
            path=path,
        )
    body = int(lengths.pop()) if lengths else 0
    if body > max_body_bytes:
        return Framing(
            status=413,
            message=body_too_large_message(max_body_bytes),
            body_length=body,
            path=path,
        )
    length = end + len(HEADER_END) + body
    return Framing(
        complete=len(buffer) >= length,
        length=length,
        path=path,
        expects_continue=expects_continue,
    )


def _syntax_refusal(
    request_line: str, parts: list[str], fields: list[str]
) -> tuple[int, str] | None:
    """The status and message for a header section gunicorn would refuse, or None."""
    if len(request_line) > MAX_REQUEST_LINE:
        return 414, f"request line is longer than {MAX_REQUEST_LINE} bytes"
    if len(parts) != 3 or not METHOD.fullmatch(parts[0]) or not VERSION.fullmatch(parts[2]):
        return 400, f"request line {request_line[:100]!r} is not METHOD TARGET HTTP/1.1"
    if len(fields) > MAX_FIELDS:
        return 431, f"request has more than {MAX_FIELDS} header fields"
    for field in fields:
        if len(field) > MAX_FIELD_BYTES:
            return 431, f"header field {field[:40]!r}... is longer than {MAX_FIELD_BYTES} bytes"
        if field[:1] in (" ", "\t"):
            return 400, f"header line {field[:100]!r} continues the previous one (obsolete folding)"
        name, colon, _ = field.partition(":")
        if not colon or not TOKEN.fullmatch(name):
            return 400, f"header line {field[:100]!r} has no valid field name"
    return None


def error_document(path: str, message: str) -> dict[str, str]:
    """The JSON of an error answer: ``error``, and the extender protocol's own
    ``Error`` field on the scheduler paths."""
    body = {"error": message}
    if path.startswith("/scheduler/"):
        body["Error"] = message
    return body
