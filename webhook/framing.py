"""Where an HTTP/1.1 request ends, from the bytes received so far. Pure.

The front (webhook.front) reads each request whole before a thread sees it;
this says when it has: the header section ends at the first blank line, the
body after it is ``Content-Length`` bytes long (RFC 9112 §6.3). It is not a
parser: gunicorn parses the request once it is complete. It only refuses
what the front will not buffer, with the status and the message to answer:
a header section past ``MAX_HEADER_BYTES``, a chunked body (the API server
always sends Content-Length), a malformed or conflicting Content-Length, and
a body past the configured limit.
"""

from typing import NamedTuple

# gunicorn's own limits allow 100 fields of 8,190 bytes; a real AdmissionReview
# request has a handful of short ones. Past this, the sender is not an API server.
MAX_HEADER_BYTES = 64 * 1024
HEADER_END = b"\r\n\r\n"


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
    request_line, *fields = head.split("\r\n")
    parts = request_line.split(" ")
    path = parts[1] if len(parts) == 3 else ""
    lengths: set[str] = set()
    expects_continue = False
    for field in fields:
        name, _, value = field.partition(":")
        name = name.strip().lower()
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


def error_document(path: str, message: str) -> dict[str, str]:
    """The JSON of an error answer: ``error``, and the extender protocol's own
    ``Error`` field on the scheduler paths."""
    body = {"error": message}
    if path.startswith("/scheduler/"):
        body["Error"] = message
    return body
