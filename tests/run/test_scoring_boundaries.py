"""Scoring rules at their edges: what each failure keeps, odd shapes, the self-test's own table.

test_scoring.py walks every classification branch once; these pin what a branch records
besides its kind (the response text a reviewer will read), the shapes a server may send that
the table there does not, and the self-test table itself, so that none can change unnoticed.
"""

from __future__ import annotations

import json

import pytest

from needlepoint.run import scoring
from needlepoint.run.interpret import UNPARSABLE, parse_response
from needlepoint.run.scoring import (
    CORRECT,
    ERROR,
    PROTOCOL_FAILURE,
    Classification,
    classify,
    score_text,
    scoring_selftest_checks,
)
from needlepoint.schema import to_plain

KEY = {"expected": "OM-3642", "near_codes": ["AB-1111"], "codes_present": ["AB-1111", "CD-2222"]}


def raw(data: object) -> bytes:
    return json.dumps(data).encode()


def reply(content: object = "OM-3642", **choice: object) -> dict:
    message = {"role": "assistant", "content": content}
    return {"model": "m", "choices": [{"finish_reason": "stop", "message": message, **choice}]}


def cls(body: bytes | None, answer: dict = KEY, **kw: object) -> Classification:
    return classify(
        http_status=kw.pop("http_status", 200),
        transport_error=kw.pop("transport_error", None),
        body=body,
        answer=answer,
        model="m",
        **kw,
    )


@pytest.mark.parametrize(
    ("data", "kind", "text"),
    [
        # The answer is kept wherever one came back, so a reviewer can read what was refused.
        ({**reply(), "model": "other"}, "model_mismatch", "OM-3642"),
        (reply(finish_reason="length"), "finish_reason", "OM-3642"),
        (
            {"model": "m", "choices": [{"finish_reason": "stop", "message": {"content": "x"}}]},
            "role",
            "x",
        ),
        (reply(" \n\x00"), "content_empty", " \n\x00"),
        # No string content: nothing to keep, and the text is empty rather than a placeholder.
        (reply(None), "content_missing", ""),
        (reply(["OM-3642"]), "content_not_string", ""),
        # Cut by the budget before any answer (no content, or blanks only): its own kind.
        (reply(None, finish_reason="length"), "length_empty", ""),
        (reply(" \n", finish_reason="length"), "length_empty", " \n"),
        (reply("<think>a", finish_reason="length"), "length_empty", ""),
        (reply(7, finish_reason="length"), "finish_reason", ""),
        (reply("OM-", finish_reason="length"), "finish_reason", "OM-"),
        (reply(7, finish_reason=None), "finish_reason", ""),
        # A message that is not an object reads as an empty one: its role is missing.
        ({"model": "m", "choices": [{"finish_reason": "stop", "message": "OM-3642"}]}, "role", ""),
        ({"model": "m", "choices": [{"finish_reason": "stop"}]}, "role", ""),
    ],
)
def test_each_failure_keeps_exactly_the_text_it_should(data: dict, kind: str, text: str) -> None:
    c = cls(raw(data))
    assert (c.status, c.kind, c.response_text) == (PROTOCOL_FAILURE, kind, text)
    assert not c.indeterminate


@pytest.mark.parametrize("status", [None, 100, 199, 204, 299, 404])
def test_only_http_200_is_read(status: int | None) -> None:
    c = cls(raw(reply()), http_status=status)
    assert (c.status, c.kind, c.response_text) == (PROTOCOL_FAILURE, "http_status", "")


def test_transport_failure_keeps_no_text_even_with_a_body() -> None:
    c = cls(raw(reply()), http_status=200, transport_error="dropped")
    assert (c.kind, c.response_text, c.indeterminate) == ("indeterminate_dropped", "", True)


def test_unknown_transport_error_names_the_kind() -> None:
    with pytest.raises(ValueError, match=r"^unknown transport error kind 'gremlins'$"):
        cls(None, transport_error="gremlins")


@pytest.mark.parametrize(
    "body", [None, b"", b"\xff", b"{", b"nul", b'"\xe9"', b"\xef\xbb\xbf{}", b"NaN x"]
)
def test_anything_but_utf8_json_is_unparsable_with_a_reason(body: bytes | None) -> None:
    parsed = parse_response(body)
    assert (parsed.data, parsed.kind) == (None, UNPARSABLE) and parsed.reason
    assert cls(body).kind == "unparsable_json"


@pytest.mark.parametrize("body", [b"null", b"0", b"[]", b'"x"', b"{}"])
def test_json_that_is_not_an_object_has_no_choices(body: bytes) -> None:
    # The literal null is UTF-8 JSON too (docs/runner.md: unparsable means "not UTF-8 JSON"):
    # it parses, and like any other non-object it has no choices.
    assert parse_response(body).kind is None
    assert cls(body).kind == "no_choices"


def test_a_custom_unknown_token_is_honoured_end_to_end() -> None:
    absent = {**KEY, "expected": "未知"}
    assert (cls(raw(reply("未知")), absent, unknown="未知").status) == CORRECT
    assert cls(raw(reply("未知")), KEY, unknown="未知").kind == "false_unknown"
    # With the protocol's token changed, the default token is just text.
    assert cls(raw(reply("UNKNOWN")), KEY, unknown="未知").kind == "bad_format"
    assert cls(raw(reply("AB-1111")), absent, unknown="未知").kind == (
        "code_when_absent:near_distractor_code"
    )


def test_an_answer_key_without_code_lists_scores_every_code_as_absent() -> None:
    bare = {"expected": "OM-3642"}
    assert score_text("AB-1111", bare) == (ERROR, "absent_code")
    assert score_text("OM-3642", bare) == (CORRECT, "")
    assert score_text("AB-1111", {"expected": "UNKNOWN"}) == (
        ERROR,
        "code_when_absent:absent_code",
    )


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("OM-3642 OM-3642", "extra_text"),
        ("[OM-3642]", "extra_text"),
        ("xOM-3642", "bad_format"),  # glued to a letter: not the code as a token
        ("OM-36421", "bad_format"),
        ("OM-3642x", "bad_format"),
        ("0OM-3642", "bad_format"),
        ("OM.3642", "bad_format"),  # the dash is literal, not a regex wildcard
    ],
)
def test_the_answer_counts_only_as_a_whole_token(text: str, kind: str) -> None:
    assert score_text(text, KEY) == (ERROR, kind)


def test_regex_characters_in_the_expected_answer_are_literal() -> None:
    key = {"expected": "A.B"}
    assert score_text("A.B!", key) == (ERROR, "extra_text")
    assert score_text("AxB!", key) == (ERROR, "bad_format")


def test_classification_json_has_exactly_three_fields() -> None:
    c = cls(raw(reply("\u00a0OM-3642")))
    assert to_plain(c) == {
        "status": "error",
        "kind": "extra_text",
        "response_text": "\u00a0OM-3642",
    }


SELFTEST_NAMES = [
    "trim removes U+0000",
    "trim keeps U+00A0",
    "trim keeps U+3000",
    "trim keeps U+2028",
    "exact code is correct",
    "near code is a distractor",
    "present code",
    "absent code",
    "false UNKNOWN",
    "code when absent",
    "extra text",
    "longer code is not the answer",
    "lower case is bad format",
    "NBSP is not trimmed, so the answer has extra text",
]


def test_the_self_test_table_is_pinned_and_passes() -> None:
    # `needlepoint self-test` prints these names: a reviewer reads them as the rules checked.
    assert scoring_selftest_checks() == [(name, True) for name in SELFTEST_NAMES]


def test_the_self_test_notices_python_strip(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each check can fail: swap in str.strip, which trims U+00A0, U+3000 and U+2028."""
    monkeypatch.setattr(scoring, "java_trim", lambda s: s.strip())
    failed = [name for name, ok in scoring_selftest_checks() if not ok]
    assert failed == [
        "trim removes U+0000",
        "trim keeps U+00A0",
        "trim keeps U+3000",
        "trim keeps U+2028",
        "NBSP is not trimmed, so the answer has extra text",
    ]


def test_the_self_test_notices_a_scorer_that_ignores_distractors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = scoring.score_text

    def flat(trimmed: str, answer: dict, unknown: str = "UNKNOWN") -> tuple[str, str]:
        status, kind = real(trimmed, answer, unknown)
        plain = kind in ("near_distractor_code", "other_present_code")
        return (status, "absent_code") if plain else (status, kind)

    monkeypatch.setattr(scoring, "score_text", flat)
    failed = [name for name, ok in scoring_selftest_checks() if not ok]
    assert failed == ["near code is a distractor", "present code"]


def _failed_with(monkeypatch: pytest.MonkeyPatch, wrong_kind) -> list[str]:
    """The self-test's failed checks under a scorer that rewrites some answers' kinds."""
    real = scoring.score_text

    def scorer(trimmed: str, answer: dict, unknown: str = "UNKNOWN") -> tuple[str, str]:
        status, kind = real(trimmed, answer, unknown)
        return wrong_kind(trimmed, answer, status, kind) or (status, kind)

    monkeypatch.setattr(scoring, "score_text", scorer)
    return [name for name, ok in scoring_selftest_checks() if not ok]


def test_the_self_test_notices_present_codes_ranked_above_near_codes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A near code is also present in the request, as in a real key: it must stay a distractor.
    def present_first(trimmed: str, answer: dict, status: str, kind: str):
        if kind == "near_distractor_code" and trimmed in answer["codes_present"]:
            return status, "other_present_code"
        return None

    assert _failed_with(monkeypatch, present_first) == ["near code is a distractor"]


def test_the_self_test_notices_present_codes_looked_up_before_the_exact_match(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A real key lists the expected code among the codes present; the self-test's does too.
    def lookup_first(trimmed: str, answer: dict, status: str, kind: str):
        plain = trimmed in answer["codes_present"] and trimmed not in answer["near_codes"]
        return (ERROR, "other_present_code") if plain else None

    assert _failed_with(monkeypatch, lookup_first) == ["exact code is correct"]


def test_the_self_test_notices_a_code_matched_without_its_right_edge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # "OM-36420" holds the code with nothing before it: only the right edge tells them apart.
    def prefix(trimmed: str, answer: dict, status: str, kind: str):
        found = kind == "bad_format" and trimmed.startswith(answer["expected"])
        return (ERROR, "extra_text") if found else None

    assert _failed_with(monkeypatch, prefix) == ["longer code is not the answer"]


def test_the_self_test_notices_a_case_blind_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    def case_blind(trimmed: str, answer: dict, status: str, kind: str):
        same = trimmed.upper() == answer["expected"] and trimmed != answer["expected"]
        return (CORRECT, "") if same else None

    assert _failed_with(monkeypatch, case_blind) == ["lower case is bad format"]
