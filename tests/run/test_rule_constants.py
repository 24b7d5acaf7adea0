"""The run stage's rule constants, each pinned at its exact boundary with literal values.

A test that imports the limit it checks moves with it, so these never do: ``AB-1234`` is the
code shape, ``AB-123`` and ``AB-12345`` are not; U+0020 is trimmed and ``!`` is not; 64 levels
of nesting parse and 65 do not. ``make mutate-constants`` (docs/mutation.md) changes each
constant in turn and checks that a test here, or elsewhere, notices.
"""

from __future__ import annotations

import json

import pytest

from needlepoint.run import scoring
from needlepoint.run.interpret import parse_response, split_think
from needlepoint.run.records import encode_body
from needlepoint.run.scoring import classify, java_trim, score_text
from needlepoint.run.transport import REDACTED

KEY = {"expected": "AB-1234", "near_codes": ["AB-1243"], "codes_present": ["AB-1243", "QQ-0001"]}


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("AB-1243", "near_distractor_code"),
        ("QQ-0001", "other_present_code"),
        ("CD-5678", "absent_code"),
        ("AZ-0000", "absent_code"),
        ("ZA-9999", "absent_code"),
        ("AB-123", "bad_format"),
        ("AB-12345", "bad_format"),
        ("A-1234", "bad_format"),
        ("ABC-1234", "bad_format"),
        ("ab-1234", "bad_format"),
        ("@B-1234", "bad_format"),
        ("A[-1234", "bad_format"),
        ("AB-/234", "bad_format"),
        ("AB-123:", "bad_format"),
        ("AB1234", "bad_format"),
        ("UNKNOWN", "false_unknown"),
        ("It is AB-1234.", "extra_text"),
    ],
)
def test_the_code_shape_is_two_capitals_a_hyphen_and_four_digits(text: str, kind: str) -> None:
    assert score_text(text, KEY) == ("error", kind)
    assert score_text("AB-1234", KEY) == ("correct", "")


def test_the_java_trim_set_is_u0000_to_u0020_exactly() -> None:
    blanks = "".join(chr(c) for c in range(0x21))
    assert java_trim(blanks + "AB-1234" + blanks[::-1]) == "AB-1234"
    for kept in ("!", "\u00a0", "\u3000", "X", "\u2028"):
        assert java_trim(f"{kept}a{kept}") == f"{kept}a{kept}"


def test_statuses_and_kinds_are_the_documented_words() -> None:
    # These strings are written to journals and results.csv (docs/runner.md, docs/schema.md).
    assert scoring.STATUSES == ("correct", "error", "protocol_failure", "unexecuted")
    assert (scoring.CORRECT, scoring.ERROR) == ("correct", "error")
    assert (scoring.PROTOCOL_FAILURE, scoring.UNEXECUTED) == ("protocol_failure", "unexecuted")
    assert scoring.ERROR_KINDS == (
        "near_distractor_code", "other_present_code", "absent_code", "false_unknown",
        "code_when_absent:near_distractor_code", "code_when_absent:other_present_code",
        "code_when_absent:absent_code", "extra_text", "bad_format",
    )  # fmt: skip
    assert scoring.PROTOCOL_FAILURE_KINDS == (
        "http_status", "connect_error", "indeterminate_timeout", "indeterminate_dropped",
        "indeterminate_deadline", "indeterminate_interrupted", "body_too_large",
        "content_encoding", "unparsable_json", "json_too_large", "json_too_deep",
        "invalid_unicode", "json_duplicate_key", "usage_invalid", "uninterpretable",
        "no_choices", "finish_reason",
        "length_empty", "role", "model_mismatch", "content_missing", "content_not_string",
        "content_empty",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ("connect_error", "connect_error"),
        ("timeout", "indeterminate_timeout"),
        ("dropped", "indeterminate_dropped"),
        ("deadline", "indeterminate_deadline"),
        ("interrupted", "indeterminate_interrupted"),
        ("body_too_large", "body_too_large"),
        ("content_encoding", "content_encoding"),
    ],
)
def test_each_transport_outcome_has_its_recorded_kind(error: str, kind: str) -> None:
    status = 200 if error in ("body_too_large", "content_encoding") else None
    got = classify(http_status=status, transport_error=error, body=None, answer=KEY, model="m")
    assert (got.status, got.kind) == ("protocol_failure", kind)


def test_an_unknown_transport_error_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown transport error kind 'reset'"):
        classify(http_status=None, transport_error="reset", body=None, answer=KEY, model="m")


@pytest.mark.parametrize(
    ("content", "split"),
    [
        ("<think>r</think>AB-1234", ("<think>r</think>", "AB-1234")),
        ("\x00\t \x20<think>r</think>A", ("<think>r</think>", "A")),
        ("!<think>r</think>A", ("", "!<think>r</think>A")),
        ("X<think>r</think>A", ("", "X<think>r</think>A")),
        ("\u00a0<think>r</think>A", ("", "\u00a0<think>r</think>A")),
        ("<thinking>r</thinking>A", ("", "<thinking>r</thinking>A")),
        ("<think>cut off", ("<think>cut off", "")),
        ("<think></think>", ("<think></think>", "")),
    ],
)
def test_a_think_block_is_the_exact_tags_after_u0000_to_u0020(content: str, split: tuple) -> None:
    assert split_think(content) == split


def body(value: object) -> bytes:
    return json.dumps(value).encode()


def test_nesting_up_to_64_levels_parses_and_65_is_too_deep() -> None:
    assert parse_response(b"[" * 64 + b"]" * 64).kind is None
    deep = parse_response(b"[" * 65 + b"]" * 65)
    assert (deep.kind, deep.reason) == ("json_too_deep", "nested more than 64 levels deep")


def test_a_million_json_values_are_read_and_one_more_is_too_many() -> None:
    # The estimate counts commas, brackets, braces and quote pairs before anything is parsed.
    assert parse_response(b"[" + b"0," * 999_999 + b"0]").kind is None
    big = parse_response(b"[" + b"0," * 1_000_000 + b"0]")
    assert (big.kind, big.reason) == ("json_too_large", "about 1000001 JSON values (limit 1000000)")


@pytest.mark.parametrize("name", ["prompt_tokens", "completion_tokens", "total_tokens"])
def test_token_counts_lie_in_0_to_2_to_the_53_exclusive(name: str) -> None:
    assert parse_response(body({"usage": {name: 2**53 - 1}})).kind is None
    assert parse_response(body({"usage": {name: 0}})).kind is None
    for bad in (2**53, -1):
        got = parse_response(body({"usage": {name: bad}}))
        assert (got.kind, got.reason) == ("usage_invalid", f"usage.{name} is outside 0..2^53")
    got = parse_response(body({"usage": {name: 1.0}}))
    assert (got.kind, got.reason) == ("usage_invalid", f"usage.{name} is a float, not an integer")


def test_other_usage_fields_are_not_counts() -> None:
    assert parse_response(body({"usage": {"cached_tokens": -5}})).kind is None


@pytest.mark.parametrize(
    ("escape", "kind"),
    [("\\ud7ff", None), ("\\ud800", "invalid_unicode"), ("\\udfff", "invalid_unicode"),
     ("\\ue000", None)],
)  # fmt: skip
def test_lone_surrogates_are_u_d800_to_u_dfff(escape: str, kind: str | None) -> None:
    assert parse_response(f'{{"a": "x{escape}"}}'.encode()).kind == kind
    assert parse_response(f'{{"k{escape}": 1}}'.encode()).kind == kind


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (None, "unparsable_json"),
        (b"{", "unparsable_json"),
        (b"\xff", "unparsable_json"),
    ],
)
def test_body_failure_kinds_are_the_documented_words(data: bytes | None, kind: str) -> None:
    assert parse_response(data).kind == kind


def test_redaction_writes_the_documented_marker() -> None:
    assert REDACTED == "[REDACTED]"


def test_a_body_is_base64_when_escaping_would_more_than_double_it() -> None:
    # U+0000..U+001F cost five more bytes each when escaped (\u00XX); U+0020 costs nothing.
    even = b"\x00" * 6 + b"a" * 24  # 30 more bytes for 30: not more than double
    assert encode_body(even) == (even.decode(), "utf-8")
    for control in (b"\x00", b"\x1f"):
        assert encode_body(control * 7 + b"a" * 27)[1] == "base64"  # 35 more for 34
    assert encode_body(b" " * 40) == (" " * 40, "utf-8")
    assert encode_body(b'"' * 3 + b"\\" * 3) == ('"""\\\\\\', "utf-8")  # 6 more for 6


def test_a_parse_failure_keeps_the_parsers_reason_up_to_200_characters() -> None:
    from needlepoint.run.interpret import _short

    assert _short(ValueError("x" * 200)) == "x" * 200
    assert _short(ValueError("x" * 201)) == "x" * 200 + "…"
    broken = parse_response(b'{"a": NaN}')
    assert (broken.kind, broken.reason) == (
        "unparsable_json",
        "not JSON (NaN is not a JSON number)",
    )
    cut = parse_response(b"{")
    assert cut.reason == (
        "not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"
    )


def test_quotes_and_backslashes_count_one_each_towards_the_base64_switch() -> None:
    # Two controls (10 more), a quote and a backslash (2 more): 12 more bytes for 11.
    body = b"\x00\x00" + b'"' + b"\\" + b"a" * 7
    assert encode_body(body)[1] == "base64"
    assert encode_body(body + b"a")[1] == "utf-8"  # 12 more for 12


def test_the_think_block_ends_at_the_first_closing_tag() -> None:
    assert split_think("<think>a</think>b</think>c") == ("<think>a</think>", "b</think>c")


def test_every_value_is_walked_after_a_string() -> None:
    # The walk goes on past a string (the last item is walked first): what it has not walked
    # yet is still checked for depth and Unicode.
    deep = b"[" + b"[" * 64 + b"]" * 64 + b', "x"]'
    assert parse_response(deep).kind == "json_too_deep"
    bad = b'["y\\ud800", "x"]'
    assert parse_response(bad).kind == "invalid_unicode"


def test_usage_must_be_an_object_and_its_numbers_doubles() -> None:
    from needlepoint.run.interpret import usage_problem

    assert usage_problem({"usage": [1]}) == "usage is a list, not an object"
    assert usage_problem({"usage": "lots"}) == "usage is a str, not an object"
    too_big = "usage holds a number too large for a double"
    assert usage_problem({"usage": {"details": [1.0, float("inf")]}}) == too_big
    assert usage_problem({"usage": {"a": {"b": float("nan")}}}) == too_big
    assert usage_problem({"usage": {"details": [1.0, [2.5]]}}) == ""


def test_a_cost_needs_both_rates_and_token_counts_below_2_to_the_53() -> None:
    from needlepoint.run.interpret import cost_of

    usage = {"prompt_tokens": 1_000_000, "completion_tokens": 500_000}
    assert cost_of(usage, 2.0, 4.0) == 4.0
    assert cost_of(usage, 2.0, None) is None and cost_of(usage, None, 4.0) is None
    assert cost_of({"prompt_tokens": 2**53 - 1, "completion_tokens": 0}, 0.0, 0.0) == 0.0
    assert cost_of({"prompt_tokens": 2**53, "completion_tokens": 0}, 0.0, 0.0) is None
    assert cost_of({"prompt_tokens": 0, "completion_tokens": 2**53}, 0.0, 0.0) is None


def test_each_body_failure_and_success_gives_its_reason_in_full() -> None:
    assert parse_response(None) == parse_response(None).__class__(
        None, "unparsable_json", "no body"
    )
    ok = parse_response(b'{"a": 1}')
    assert (ok.data, ok.kind, ok.reason) == ({"a": 1}, None, "")
    deep = parse_response(b"[" * 200_000 + b"]" * 200_000)
    assert (deep.kind, deep.reason) == (
        "json_too_deep",
        "nested deeper than the parser's stack (limit 64)",
    )
    lone = parse_response(b'["ok", {"k": "a\\udfffb"}]')
    assert (lone.kind, lone.reason) == (
        "invalid_unicode",
        "a string holds the lone surrogate U+DFFF (not Unicode text)",
    )


def test_nesting_counts_objects_like_lists() -> None:
    def nested(levels: int) -> bytes:
        return b'{"a":' * (levels - 1) + b"{}" + b"}" * (levels - 1)

    assert parse_response(nested(64)).kind is None
    assert parse_response(nested(65)).kind == "json_too_deep"
    assert parse_response(b"[" + nested(63) + b"]").kind is None
    assert parse_response(b"[" + nested(64) + b"]").kind == "json_too_deep"


def test_a_pair_of_quotes_counts_as_one_json_value() -> None:
    assert parse_response(b'"' * 2_000_000).kind == "unparsable_json"
    many = parse_response(b'"' * 2_000_002)
    assert (many.kind, many.reason) == (
        "json_too_large",
        "about 1000001 JSON values (limit 1000000)",
    )


def test_a_clean_walk_has_no_kind_and_no_reason() -> None:
    from needlepoint.run.interpret import _walk

    assert _walk({"a": [1, "b", {"c": None}]}) == (None, "")
