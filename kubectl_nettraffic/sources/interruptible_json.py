"""``json.loads`` for Prometheus answers, in pieces other threads can run between.

``json.loads`` is one C call: it keeps the GIL until the whole document is
decoded. For 5,000 nodes a vector answer is about 2.7 MB and that call held
the GIL for 40-100 ms every refresh; each admission arriving meanwhile
waited it out. Here the ``result`` array is decoded in runs of whole
elements of about 64 KB each (under a millisecond of json.loads), from a
Python loop, so the interpreter can hand the GIL to a request thread between
runs (sys.getswitchinterval()). Runs are cut where one element ends and the
next begins, ``},{`` in Prometheus' compact JSON; a cut anywhere else leaves
an unclosed string or bracket, which does not decode, and from there the
elements are decoded one at a time. The rest of the document is decoded as
usual, with the array cut out; anything not shaped like an answer is decoded
whole.
"""

import json
import re
from typing import Any

_RESULT_ARRAY = re.compile(r'"result"\s*:\s*\[')
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_CUT = object()  # where the result array was


def loads(text: str, run_chars: int = 64 * 1024) -> Any:
    """The same value as ``json.loads(text)``; raises ValueError the same way.

    ``run_chars``: at least this much of the array per json.loads call.
    """
    match = _RESULT_ARRAY.search(text)
    if match is None:
        return json.loads(text)
    try:
        items, end = _array_items(text, match.end(), run_chars)
    except ValueError:
        return json.loads(text)  # not what it looked like: let json say what is wrong
    # The document with the array swapped for a NaN, which only this hook
    # decodes. One call means the NaN is ours; then it must sit at data.result
    # for the array to be the one we decoded.
    constants: list[str] = []

    def mark(name: str) -> object:
        constants.append(name)
        return _CUT

    rest = json.loads(text[: match.end() - 1] + "NaN" + text[end + 1 :], parse_constant=mark)
    data = rest.get("data") if isinstance(rest, dict) else None
    if len(constants) != 1 or not isinstance(data, dict) or data.get("result") is not _CUT:
        return json.loads(text)  # another shape of answer: decode it whole
    data["result"] = items
    return rest


def _array_items(text: str, start: int, run_chars: int) -> tuple[list[Any], int]:
    """The elements of the array whose '[' ends just before ``start``, and the index of its ']'."""
    items: list[Any] = []
    index = _WHITESPACE.match(text, start).end()  # type: ignore[union-attr]  # matches ""
    if text.startswith("]", index):
        return items, index
    # Runs of whole elements; ``index`` is always where an element starts.
    while (cut := text.find("},{", index + run_chars)) >= 0:
        try:
            items.extend(json.loads(f"[{text[index : cut + 1]}]"))
        except ValueError:
            break  # the cut was inside an element: one at a time from here
        index = cut + 2
    while True:
        item, index = _DECODER.raw_decode(text, index)
        items.append(item)
        index = _WHITESPACE.match(text, index).end()  # type: ignore[union-attr]
        if text.startswith(",", index):
            index = _WHITESPACE.match(text, index + 1).end()  # type: ignore[union-attr]
        elif text.startswith("]", index):
            return items, index
        else:
            raise ValueError(f"expected ',' or ']' at {index}")
