"""Where a request ends, and what the front refuses to buffer."""

import pytest

from webhook.framing import MAX_HEADER_BYTES, error_document, frame

HEAD = b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"


def test_a_request_is_complete_with_its_last_body_byte():
    assert not frame(HEAD, 100).complete
    assert frame(HEAD, 100).length == len(HEAD) + 5
    assert not frame(HEAD + b"1234", 100).complete
    assert frame(HEAD + b"12345", 100).complete
    # Bytes of a pipelined next request do not change where this one ends.
    framing = frame(HEAD + b"12345GET / HTTP/1.1\r\n", 100)
    assert framing.complete and framing.length == len(HEAD) + 5
    assert framing.path == "/mutate"


def test_no_content_length_means_no_body():
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    assert frame(request, 100).complete and frame(request, 100).length == len(request)


def test_an_unfinished_header_section_is_incomplete_until_its_limit():
    partial = b"POST /mutate HTTP/1.1\r\nHost: x\r\n"
    assert not frame(partial, 100).complete and not frame(partial, 100).refused
    huge = b"POST /mutate HTTP/1.1\r\nX: " + b"a" * MAX_HEADER_BYTES
    assert frame(huge, 100).status == 431
    assert frame(huge + b"\r\n\r\n", 100).status == 431


@pytest.mark.parametrize(
    ("header", "status", "says"),
    [
        (b"Transfer-Encoding: chunked", 411, "Content-Length"),
        (b"Content-Length: 5\r\nContent-Length: 6", 400, "'5, 6'"),
        (b"Content-Length: 5, 6", 400, "'5, 6'"),
        (b"Content-Length: -1", 400, "'-1'"),
        (b"Content-Length: 1e3", 400, "'1e3'"),
        (b"Content-Length: 101", 413, "server.maxRequestBytes"),
    ],
)
def test_refusals_carry_their_status_and_a_message_naming_the_value(header, status, says):
    framing = frame(b"POST /mutate HTTP/1.1\r\n" + header + b"\r\n\r\n", 100)
    assert framing.refused and framing.status == status
    assert says in framing.message


def test_repeated_equal_content_lengths_are_one_length():
    framing = frame(b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab", 100)
    assert framing.complete and not framing.refused


def test_expect_continue_is_noticed():
    framing = frame(b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n", 100)
    assert framing.expects_continue and not framing.complete


def test_error_documents_carry_the_extender_field_on_scheduler_paths():
    assert error_document("/mutate", "bad") == {"error": "bad"}
    assert error_document("/scheduler/filter", "bad") == {"error": "bad", "Error": "bad"}


@pytest.mark.parametrize(
    ("head", "status", "says"),
    [
        (b"post /mutate HTTP/1.1", 400, "is not METHOD TARGET HTTP/1.1"),
        (b"POST /mutate", 400, "is not METHOD TARGET HTTP/1.1"),
        (b"POST /mutate HTTP/one", 400, "is not METHOD TARGET HTTP/1.1"),
        (b"PRI * HTTP/2.0\r\n\r\nSM", 0, ""),  # a well-formed line: gunicorn's to judge
        (b"GET /" + b"a" * 5000 + b" HTTP/1.1", 414, "longer than 4094"),
        (b"POST /mutate HTTP/1.1\r\nBad Name: x", 400, "no valid field name"),
        (b"POST /mutate HTTP/1.1\r\nNoColon", 400, "no valid field name"),
        (b"POST /mutate HTTP/1.1\r\nX-A: 1\r\n  folded", 400, "obsolete folding"),
        (b"POST /mutate HTTP/1.1" + b"\r\nX-A: 1" * 101, 431, "more than 100 header fields"),
        (b"POST /mutate HTTP/1.1\r\nX-A: " + b"a" * 9000, 431, "longer than 8190"),
    ],
)
def test_request_lines_and_fields_gunicorn_would_refuse_are_refused_here(head, status, says):
    framing = frame(head + b"\r\n\r\n", 100)
    assert framing.status == status
    assert says in framing.message


def test_one_empty_line_before_the_request_line_is_ignored():
    framing = frame(b"\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 100)
    assert framing.complete and not framing.refused and framing.path == "/healthz"
