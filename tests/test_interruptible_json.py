"""Decoding Prometheus answers in pieces gives exactly what json.loads gives."""

import json
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_nettraffic.sources import interruptible_json

_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_value = st.recursive(
    _leaf,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["result", "data", "metric", "value", "x"]) | st.text(),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)


def _answer(series: list, extra: dict | None = None, extra_first: bool = False) -> dict:
    answer = {"status": "success", "data": {"resultType": "vector", "result": series}}
    # Keys before "data" come first in the text: a top-level "result" there is seen first.
    return {**(extra or {}), **answer} if extra_first else {**answer, **(extra or {})}


@settings(max_examples=300, deadline=None)
@given(
    result=st.lists(_value, max_size=6),
    extra=st.dictionaries(st.sampled_from(["warnings", "infos", "result"]), _value, max_size=2),
    extra_first=st.booleans(),
    indent=st.sampled_from([None, 0, 2]),
    separators=st.sampled_from([None, (",", ":"), (" , ", " : ")]),
    run_chars=st.sampled_from([1, 3, 20, 64 * 1024]),  # small runs: many cuts
)
def test_same_value_as_json_loads_for_any_answer(
    result, extra, extra_first, indent, separators, run_chars
):
    text = json.dumps(_answer(result, extra, extra_first), indent=indent, separators=separators)
    assert interruptible_json.loads(text, run_chars) == json.loads(text)


@pytest.mark.parametrize("run_chars", [1, 10, 30, 100])
def test_cuts_inside_an_element_fall_back_to_one_at_a_time(run_chars):
    # "},{" inside a label value and between nested objects: neither is an element boundary.
    series = [
        {"metric": {"instance": 'a},{"metric":{', "job": "},{"}, "value": [1, "2"]},
        {"metric": {"nested": [{"a": 1}, {"b": 2}]}, "value": [3, "4"]},
        {"metric": {}, "value": [5, "6"]},
    ]
    text = json.dumps(_answer(series), separators=(",", ":"))
    assert interruptible_json.loads(text, run_chars) == json.loads(text)


@settings(max_examples=300, deadline=None)
@given(document=_value)
def test_same_value_as_json_loads_for_any_document(document):
    # "result" keys anywhere, also where they are not data.result.
    text = json.dumps(document)
    assert interruptible_json.loads(text) == json.loads(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"status":"success","data":{"result":[1,]}}',
        '{"status":"success","data":{"result":[1 2]}}',
        '{"status":"success","data":{"result":[',
        '{"data":{"result":[]}} trailing',
        '{"data":{"result":["\\ud800"]}',
        "",
    ],
)
def test_malformed_answers_raise_as_json_loads_does(text):
    with pytest.raises(ValueError) as ours:
        interruptible_json.loads(text)
    with pytest.raises(ValueError) as stock:
        json.loads(text)
    assert type(ours.value) is type(stock.value)


def test_other_threads_run_while_a_large_answer_is_decoded():
    series = [
        {
            "metric": {"instance": f"10.0.{i // 256}.{i % 256}:9100", "job": "node"},
            "value": [1.5, "1e6"],
        }
        for i in range(60_000)
    ]
    text = json.dumps(_answer(series))
    ticks: list[float] = []
    done = threading.Event()

    def ticker() -> None:
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.0005)

    thread = threading.Thread(target=ticker)
    thread.start()
    time.sleep(0.02)
    try:
        started = time.perf_counter()
        decoded = interruptible_json.loads(text)
        finished = time.perf_counter()
    finally:
        done.set()
        thread.join()
    assert decoded["data"]["result"] == series
    during = [t for t in ticks if started < t < finished]
    # json.loads holds the GIL from start to end: not one tick in between.
    assert len(during) >= 5, f"the ticker ran {len(during)} times while the answer was decoded"
