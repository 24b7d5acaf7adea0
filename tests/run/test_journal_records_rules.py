"""Outcome records on disk: every field of both kinds, and bodies that are not UTF-8.

An outcome line is part of the journal's format (version 1): a recovered or interrupted attempt
must carry exactly the fields of an ordinary outcome, and a body that is not UTF-8 must come
back byte for byte from its base64 text, or the run audit would re-score something else.
"""

from __future__ import annotations

import pytest

from needlepoint.run.journal_records import (
    REDACTED,
    Scrubber,
    decode_body,
    encode_body,
    interrupted_fields,
    outcome_fields,
)
from needlepoint.run.scoring import classify
from needlepoint.run.transport import Exchange

NO_INTEGERS = "its usage has no integer prompt_tokens and completion_tokens"


def exchange(body: bytes | None) -> Exchange:
    return Exchange(200, body, None, "", 0.1234567, False, {"x-id": "1"})


def test_an_interrupted_outcome_has_every_field_of_an_ordinary_one() -> None:
    c = classify(http_status=None, transport_error="interrupted", body=None, answer={}, model="")
    assert interrupted_fields(7, "2026-01-01T00:00:00Z", "killed mid-request", True) == {
        "seq": 7,
        "time": "2026-01-01T00:00:00Z",
        "http_status": None,
        "error": "interrupted",
        "error_detail": "killed mid-request",
        "body": None,
        "body_encoding": None,
        "body_truncated": False,
        "headers": {},
        "latency_s": None,
        "usage": None,
        "cost": None,
        "recovered": True,
        "classification": {
            "status": "protocol_failure",
            "kind": "indeterminate_interrupted",
            "response_text": "",
        },
    }
    assert c.kind == "indeterminate_interrupted"
    ordinary = outcome_fields(7, "t", exchange(b"{}"), c, None, None)
    assert set(ordinary) == set(interrupted_fields(7, "t", "d", False))
    assert interrupted_fields(7, "t", "d", False)["recovered"] is False


def test_an_ordinary_outcome_records_the_exchange() -> None:
    c = classify(http_status=200, transport_error=None, body=b"{}", answer={}, model="m")
    fields = outcome_fields(3, "t", exchange(b"{}"), c, 0.5, {"prompt_tokens": 1})
    assert fields == {
        "seq": 3,
        "time": "t",
        "http_status": 200,
        "error": None,
        "error_detail": "",
        "body": "{}",
        "body_encoding": "utf-8",
        "body_truncated": False,
        "headers": {"x-id": "1"},
        "latency_s": 0.123457,
        "usage": {"prompt_tokens": 1},
        "cost": 0.5,
        "recovered": False,
        "classification": {"status": "protocol_failure", "kind": "no_choices", "response_text": ""},
    }


@pytest.mark.parametrize(
    ("body", "text", "encoding"),
    [
        (None, None, None),
        (b"", "", "utf-8"),
        ('{"a":"é"}'.encode(), '{"a":"é"}', "utf-8"),
        (b"\xff\xfe\x00x", "//4AeA==", "base64"),
        (b"caf\xe9", "Y2Fm6Q==", "base64"),
    ],
)
def test_bodies_round_trip_through_the_journal(
    body: bytes | None, text: str | None, encoding: str | None
) -> None:
    assert encode_body(body) == (text, encoding)
    assert decode_body({"body": text, "body_encoding": encoding}) == body


def test_a_record_without_an_encoding_is_read_as_utf8() -> None:
    assert decode_body({"body": "é"}) == "é".encode()
    assert decode_body({"body_encoding": "base64"}) is None


def test_the_key_is_scrubbed_inside_lists_and_everything_else_is_kept() -> None:
    scrub = Scrubber("sk-secret")
    record = {"error_detail": ["sent sk-secret", 3, None, {"h": [b"sk-secret!"]}], "n": 2.5}
    assert scrub(record) == {
        "error_detail": [f"sent {REDACTED}", 3, None, {"h": [REDACTED.encode() + b"!"]}],
        "n": 2.5,
    }
    assert Scrubber(None)(record) is record


def test_journal_state_counts_sessions_and_keeps_the_latest_time() -> None:
    # The session count numbers the next session record, and last_time is the clock a resumed
    # run compares against (a clock that went backwards is refused): both are folded here.
    from needlepoint.run.journal_records import JournalState

    records = [
        {"type": "session", "time": "2026-12-01T00:00:00Z"},
        {"type": "attempt", "seq": 1, "time": "2026-12-01T00:00:01Z"},
        {"type": "session", "time": "2026-12-01T00:00:05Z"},
        {"type": "session", "time": "2026-12-01T00:00:09Z"},
        {"type": "note"},
    ]
    state = JournalState.of(records)
    assert state.sessions == 3
    assert state.last_time_text == "2026-12-01T00:00:09Z"
    assert state.last_time == JournalState.of(records[3:4]).last_time
    assert JournalState.of([{"type": "attempt", "seq": 1}]).last_time is None
    assert JournalState.of([{"type": "Session", "time": "2026-12-01T00:00:00Z"}]).sessions == 0


def test_journal_state_keeps_each_seqs_first_attempt_and_adds_up_known_costs() -> None:
    from needlepoint.run.journal_records import JournalState

    first = {"type": "attempt", "seq": 4, "time": "2026-12-01T00:00:00Z"}
    again = {"type": "attempt", "seq": 4, "time": "2026-12-01T00:01:00Z"}
    paid = [{"type": "outcome", "seq": s, "time": "2026-12-01T00:02:00Z", "cost": c}
            for s, c in ((1, 0.25), (2, 0.5), (3, None))]  # fmt: skip
    state = JournalState.of([first, again, *paid])
    # Only what the rules read is kept of an attempt (memory stays bounded on long journals).
    kept = {"seq": 4, "request_sha256": None, "time": "2026-12-01T00:00:00Z"}
    assert state.attempts == {4: kept} and state.attempt_count == 2
    assert state.spent == 0.75 and state.unknown_cost == [3]


@pytest.mark.parametrize(
    ("usage", "why"),
    [
        (None, "no usage in the response"),
        ({"prompt_tokens": "7", "completion_tokens": 2}, NO_INTEGERS),
        ({}, NO_INTEGERS),
    ],
    ids=["no-usage", "string-count", "empty-usage"],
)
def test_an_unknown_cost_says_whether_usage_was_missing_or_held_no_counts(
    usage: object, why: str
) -> None:
    # The cost-cap stop line quotes this: a reader must know which of the two went wrong.
    from needlepoint.run.journal_records import JournalState

    outcome = {"type": "outcome", "seq": 5, "time": "2026-12-01T00:02:00Z", "usage": usage}
    state = JournalState.of([outcome])
    assert (state.why_unknown(5), state.why_unknown(6)) == (why, "no usage in the response")


@pytest.mark.parametrize(("chars", "kept"), [(4095, True), (4096, True), (4097, False)])
def test_an_answer_of_up_to_4096_characters_is_kept_in_memory_and_a_longer_one_is_not(
    chars: int, kept: bool
) -> None:
    # Beyond this a reader fetches the text from the journal line again (memory stays bounded).
    from needlepoint.run.journal_records import OutcomeSummary

    text = "é" * chars  # characters, not bytes: two bytes each in UTF-8
    record = {"seq": 1, "classification": {"response_text": text}}
    assert OutcomeSummary.of(record).response_text == (text if kept else None)


def test_an_outcome_summary_keeps_every_field_but_the_body_and_headers() -> None:
    from needlepoint.run.journal_records import OutcomeSummary

    record = {
        "type": "outcome",
        "seq": 7,
        "time": "2026-12-01T00:02:00Z",
        "http_status": 200,
        "latency_s": 1.5,
        "cost": 0.25,
        "recovered": True,
        "classification": {"status": "correct", "kind": "exact", "response_text": "OM-3642"},
        "usage": {
            "prompt_tokens": 9,
            "completion_tokens": 2,
            "completion_tokens_details": {"reasoning_tokens": 1},
        },
        "body_b64": "e30=",
        "headers": {"x-id": "1"},
    }
    got = OutcomeSummary.of(record, at="here")
    assert (got.seq, got.time, got.http_status, got.latency_s, got.cost, got.recovered) == (
        7, "2026-12-01T00:02:00Z", 200, 1.5, 0.25, True,
    )  # fmt: skip
    assert (got.status, got.kind, got.response_text, got.at) == (
        "correct",
        "exact",
        "OM-3642",
        "here",
    )
    assert (got.prompt_tokens, got.completion_tokens, got.reasoning_tokens) == (9, 2, 1)
    assert got.has_usage


@pytest.mark.parametrize(
    ("count", "kept"),
    [(3, 3), (0, 0), (True, None), (False, None), (3.0, None), ("3", None), (None, None)],
)
def test_a_token_count_is_kept_only_as_an_integer_that_is_not_a_bool(
    count: object, kept: int | None
) -> None:
    # json reads true as a bool, which Python counts as the integer 1: a count it never was.
    from needlepoint.run.journal_records import OutcomeSummary

    record = {"seq": 1, "usage": {"prompt_tokens": count, "completion_tokens": count}}
    got = OutcomeSummary.of(record)
    assert (got.prompt_tokens, got.completion_tokens) == (kept, kept)
    assert OutcomeSummary.of({"seq": 1, "usage": [count]}).prompt_tokens is None
