"""Interpreting a body that arrived never raises, and its record can always be journalled; where
the answer is: the think-block rule against a regular expression, and each field read.

PROTOCOL.md: a *leading* ``<think>…</think>`` block (after blanks) is reasoning and never
scored; an unclosed one is reasoning to the end. Hypothesis compares ``split_think`` with that
sentence written as a regular expression, over strings built from the pieces that matter.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlepoint.jsonio import canonical_bytes
from needlepoint.run.interpret import (
    MAX_DEPTH,
    Answer,
    answer_of,
    cost_of,
    parse_response,
    reasoning_tokens,
    split_think,
)
from needlepoint.run.records import decode_body, received_fields
from needlepoint.run.scoring import PROTOCOL_FAILURE_KINDS, classify_safely
from needlepoint.schema import to_plain

KEY = {"expected": "OM-3642", "codes_present": ["OM-3642"], "near_codes": []}


def answer(content='"OM-3642"', usage='{"prompt_tokens":5,"completion_tokens":1}') -> bytes:
    return (
        '{"model":"m","choices":[{"finish_reason":"stop","message":{"role":"assistant",'
        f'"content":{content}}}}}],"usage":{usage}}}'
    ).encode()


@dataclass(frozen=True)
class Exchange:
    body: bytes | None
    http_status: int | None = 200
    error: str | None = None
    error_detail: str = ""
    latency_s: float = 0.1
    truncated: bool = False
    headers: dict[str, str] = field(default_factory=dict)


def record(body: bytes | None, rates=(1.0, 2.0), **kw) -> dict:
    return received_fields(
        3, "t", Exchange(body, **kw), answer=KEY, model="m", unknown="UNKNOWN", rates=rates
    )


HOSTILE = {
    "nan usage": (answer(usage='{"prompt_tokens":NaN,"completion_tokens":1}'), "unparsable_json"),
    "infinity": (answer(usage='{"prompt_tokens":Infinity}'), "unparsable_json"),
    "huge float usage": (answer(usage='{"prompt_tokens":5,"x":1e400}'), "usage_invalid"),
    "huge int usage": (answer(usage='{"prompt_tokens":' + "1" + "0" * 400 + "}"), "usage_invalid"),
    "int past 4300 digits": (
        answer(usage='{"prompt_tokens":' + "9" * 5000 + "}"),
        "unparsable_json",
    ),
    "string usage": (answer(usage='"lots"'), "usage_invalid"),
    "bool tokens": (answer(usage='{"completion_tokens":true}'), "usage_invalid"),
    "negative tokens": (answer(usage='{"prompt_tokens":-1}'), "usage_invalid"),
    "float tokens": (answer(usage='{"prompt_tokens":1.5}'), "usage_invalid"),
    "deep 200000": (b"[" * 200_000 + b"]" * 200_000, "json_too_deep"),
    "deep 900 in usage": (answer(usage='{"x":' + "[" * 900 + "]" * 900 + "}"), "json_too_deep"),
    "lone surrogate": (answer(content='"OM-3642\\ud800"'), "invalid_unicode"),
    "surrogate key": (answer(usage='{"\\udfff":1}'), "invalid_unicode"),
    "invalid utf-8": (
        answer(content='"OM-3642\xff"').replace(b"\xc3\xbf", b"\xff"),
        "unparsable_json",
    ),
    "not json": (b"<html>502</html>", "unparsable_json"),
    "a million objects": (b"[" + b"{}," * 600_000 + b"{}]", "json_too_large"),
    "empty": (b"", "unparsable_json"),
    "duplicate usage key": (
        answer(usage='{"prompt_tokens":5,"prompt_tokens":6}'),
        "json_duplicate_key",
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_bodies_become_specific_failures_with_a_reason(name):
    body, kind = HOSTILE[name]
    fields = record(body)
    canonical_bytes(fields)  # the record can be journalled
    assert fields["classification"]["status"] == "protocol_failure"
    assert fields["classification"]["kind"] == kind
    assert fields["error_detail"].startswith(kind + ": ")
    assert fields["usage"] is None and fields["cost"] is None
    assert decode_body(fields) == body, "the body that arrived is kept as it arrived"
    assert kind in PROTOCOL_FAILURE_KINDS


def test_a_duplicate_key_is_named_once_the_first_one_cut_at_80_characters() -> None:
    # json.loads would keep the last of two values silently: {"choices": [right], "choices":
    # [wrong]} must not score as the wrong answer, nor as the right one.
    twice = b'{"b":1,"a":2,"a":3,"b":4,"c":[{"d":1,"d":2}]}'
    parsed = parse_response(twice)
    assert (parsed.data, parsed.kind) == (None, "json_duplicate_key")
    assert parsed.reason == "an object names the key 'd' more than once"  # inner objects first
    flat = parse_response(b'{"b":1,"a":2,"a":3,"b":4}')
    assert flat.reason == "an object names the key 'a' more than once"
    long = "k" * 81
    cut = parse_response(f'{{"{long}":1,"{long}":2}}'.encode())
    assert cut.reason == f"an object names the key {'k' * 80 + '…'!r} more than once"
    exact = parse_response(f'{{"{long[:80]}":1,"{long[:80]}":2}}'.encode())
    assert exact.reason == f"an object names the key {long[:80]!r} more than once"
    assert parse_response(b'{"a":1,"b":{"a":2}}').kind is None  # one key per object is fine


def test_depth_limit_is_exact():
    ok = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    deep = b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)
    assert parse_response(ok).kind is None
    assert parse_response(deep).kind == "json_too_deep"


def test_a_clean_answer_keeps_usage_and_cost():
    fields = record(answer())
    assert fields["classification"]["status"] == "correct"
    assert fields["usage"] == {"prompt_tokens": 5, "completion_tokens": 1}
    assert fields["cost"] == pytest.approx((5 + 2) / 1e6)
    assert fields["error_detail"] == ""


@pytest.mark.parametrize(
    ("usage", "rates"),
    [
        ({"prompt_tokens": 2**52, "completion_tokens": 1}, (1e308, 1e308)),  # overflows to inf
        ({"prompt_tokens": 10**400, "completion_tokens": 1}, (1.0, 1.0)),
        ({"prompt_tokens": 1, "completion_tokens": 1}, (None, 1.0)),
        ({"prompt_tokens": "1", "completion_tokens": 1}, (1.0, 1.0)),
    ],
)
def test_cost_is_unknown_rather_than_infinite_or_raising(usage, rates):
    assert cost_of(usage, *rates) is None


@pytest.mark.parametrize(
    ("usage", "rates", "cost"),
    [
        ({"prompt_tokens": 1000, "completion_tokens": 10}, (2.0, 8.0), 0.00208),
        ({"prompt_tokens": 0, "completion_tokens": 0}, (2.0, 8.0), 0.0),
        ({"prompt_tokens": 1, "completion_tokens": 0}, (1.23456789, 8.0), 1.234568e-06),
        ({"prompt_tokens": 1000, "completion_tokens": 10}, (2.0, None), None),
        ({"prompt_tokens": 1000, "completion_tokens": 10}, (None, 8.0), None),
        ({"prompt_tokens": 1000.0, "completion_tokens": 10}, (2.0, 8.0), None),
        ({"prompt_tokens": 1000, "completion_tokens": True}, (2.0, 8.0), None),
        ({"prompt_tokens": -1, "completion_tokens": 10}, (2.0, 8.0), None),
        ([1000, 10], (2.0, 8.0), None),
    ],
)
def test_cost_is_unknown_without_both_rates_or_whole_token_counts(usage, rates, cost) -> None:
    # An unknown cost is None, never 0: a count that is not a non-negative int is not a count.
    assert cost_of(usage, *rates) == cost


def test_response_errors_classify_from_the_record():
    fields = record(
        b"0" * 50, error="body_too_large", error_detail="limit of 50 bytes", truncated=True
    )
    assert fields["classification"]["kind"] == "body_too_large"
    fields = record(b"{}", http_status=429, error="body_too_large", truncated=True)
    assert fields["classification"]["kind"] == "http_status"


def test_an_unknown_error_kind_is_uninterpretable_not_a_crash():
    c = classify_safely(http_status=200, transport_error="forged", body=b"", answer=KEY, model="m")
    assert (c.status, c.kind) == ("protocol_failure", "uninterpretable")


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(st.characters(codec=None, exclude_categories=())),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    usage=_json,
    content=_json,
    tail=st.binary(max_size=8),
    status=st.sampled_from([200, 200, 500, None]),
    error=st.sampled_from([None, None, "body_too_large", "content_encoding", "dropped"]),
)
def test_any_body_gives_a_journalable_record_that_reclassifies_the_same(
    usage, content, tail, status, error
):
    text = json.dumps(content, allow_nan=True)
    body = answer(content=text, usage=json.dumps(usage, allow_nan=True)) + tail
    fields = record(body, http_status=status, error=error)
    line = canonical_bytes(fields)
    stored = json.loads(line)
    again = classify_safely(
        http_status=stored["http_status"],
        transport_error=stored["error"],
        body=decode_body(stored),
        answer=KEY,
        model="m",
        unknown="UNKNOWN",
    )
    assert to_plain(again) == stored["classification"]


def test_the_record_scores_with_the_protocols_unknown_token() -> None:
    fields = received_fields(
        3, "t", Exchange(answer(content='"NONE"')), answer=KEY, model="m", unknown="NONE",
        rates=(None, None),
    )  # fmt: skip
    assert (fields["classification"]["status"], fields["classification"]["kind"]) == (
        "error",
        "false_unknown",
    )


def test_a_record_that_will_not_serialise_is_kept_in_a_safe_form() -> None:
    import base64

    body = answer()
    fields = record(body, error_detail="reset by peer \udcff")
    assert fields["error_detail"] == "reset by peer \udcff (record kept in a safe form)"
    assert (fields["usage"], fields["cost"]) == (None, None)
    assert (fields["body"], fields["body_encoding"]) == (base64.b64encode(body).decode(), "base64")
    assert fields["classification"]["status"] == "correct"  # what audit-run derives from the bytes
    nothing = record(None, error_detail="reset \udcff", http_status=None, error="dropped")
    assert (nothing["body"], nothing["body_encoding"]) == (None, None)
    assert nothing["error_detail"] == "reset \udcff (record kept in a safe form)"
    plain = record(body, error_detail="reset by peer")
    assert (plain["error_detail"], plain["body_encoding"]) == ("reset by peer", "utf-8")
    assert plain["usage"] == {"prompt_tokens": 5, "completion_tokens": 1}


PIECES = st.sampled_from(
    [" ", "\n", "\x00", "\u00a0", "<think>", "</think>", "<think", "a", "OM-3642"]
)


def by_regex(content: str) -> tuple[str, str]:
    closed = re.fullmatch(r"[\x00-\x20]*(<think>.*?</think>)(.*)", content, re.DOTALL)
    if closed:
        return closed.group(1), closed.group(2)
    unclosed = re.fullmatch(r"[\x00-\x20]*(<think>.*)", content, re.DOTALL)
    return (unclosed.group(1), "") if unclosed else ("", content)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=8).map("".join))
def test_split_think_matches_its_definition(content: str) -> None:
    assert split_think(content) == by_regex(content)


def test_answer_of_a_chat_choice_reads_the_message() -> None:
    choice = {
        "finish_reason": "stop",
        "message": {
            "role": "assistant",
            "content": " <think>hm</think>OM",
            "reasoning_content": "r;",
        },
    }
    assert answer_of(choice, completion=False) == Answer(
        "stop", "assistant", choice["message"]["content"], "OM", "r;<think>hm</think>"
    )


def test_answer_of_a_completion_choice_reads_only_text() -> None:
    choice = {
        "finish_reason": "length",
        "text": "OM",
        "message": {"role": "assistant", "content": "x"},
    }
    assert answer_of(choice, completion=True) == Answer("length", None, "OM", "OM", "")


@pytest.mark.parametrize(
    ("message", "answer"),
    [
        ({"content": 7, "reasoning_content": "r"}, Answer(None, None, 7, None, "r")),
        ({"content": "x", "reasoning_content": ["r"]}, Answer(None, None, "x", "x", "")),
        ("not a message", Answer(None, None, None, None, "")),
    ],
)
def test_odd_messages_read_as_far_as_they_go(message: object, answer: Answer) -> None:
    assert answer_of({"message": message}, completion=False) == answer


@pytest.mark.parametrize(
    ("value", "tokens"), [(0, 0), (12, 12), (-1, None), (True, None), ("3", None), (2.0, None)]
)
def test_reasoning_tokens_are_a_non_negative_integer_or_unknown(
    value: object, tokens: object
) -> None:
    assert reasoning_tokens({"completion_tokens_details": {"reasoning_tokens": value}}) == tokens
