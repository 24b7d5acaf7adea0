"""journal_schema.record_problem: every field of every record type, on both sides of its rule.

The hash chain proves a journal was not edited; this schema is what refuses a re-chained file
whose records were. Each case changes one field of a valid record and pins the whole line the
reader gets (or None: still valid).
"""

from __future__ import annotations

from typing import Any

import pytest

from needlepoint.run.journal_schema import BODY_ENCODINGS, RECORD_TYPES, record_problem

ABSENT = object()  # the field is left out
NOT_SHA = "expected a lower-case hex SHA-256 digest"
TIME = "2026-11-30T10:00:00+00:00"
SHA = "a" * 64
HEAD = {"n": 0, "prev": "0" * 64}
VALID: dict[str, dict[str, Any]] = {
    "session": {
        "type": "session", **HEAD, "session": 1, "time": TIME, "run_json_sha256": SHA,
        "package_version": "0.1.0", "allow": 1, "min_gap_s": 0, "override_reason": None,
        "timeout_s": 0, "deadline_s": 0, "input_rate": None, "output_rate": None,
        "cost_cap": None,
    },
    "attempt": {"type": "attempt", **HEAD, "seq": 1, "request_sha256": SHA, "time": TIME,
                "gap_s": None},
    "outcome": {
        "type": "outcome", **HEAD, "seq": 1, "time": TIME, "http_status": 200, "error": None,
        "error_detail": "", "body": "{}", "body_encoding": "utf-8", "body_truncated": False,
        "headers": {"content-type": "application/json"}, "latency_s": 0, "usage": None,
        "cost": 0, "recovered": False,
        "classification": {"status": "correct", "kind": "", "response_text": "AB-1234"},
    },
    "stop": {"type": "stop", **HEAD, "time": TIME, "reason": "done", "detail": ""},
}  # fmt: skip


def problem(kind: str, **changes: Any) -> str | None:
    record = dict(VALID[kind])
    for name, value in changes.items():
        if value is ABSENT:
            del record[name]
        else:
            record[name] = value
    found = record_problem(record, "journal.jsonl:3")
    prefix = "journal.jsonl:3: field "
    if found is not None:
        assert found.startswith(prefix), found
        return found.removeprefix(prefix)
    return None


@pytest.mark.parametrize("kind", RECORD_TYPES)
def test_valid_records_of_each_type_pass(kind: str) -> None:
    assert problem(kind) is None


def test_the_record_types_and_encodings_are_the_documented_ones() -> None:
    assert RECORD_TYPES == ("session", "attempt", "outcome", "stop")
    assert BODY_ENCODINGS == ("utf-8", "base64")
    shown = "'session', 'attempt', 'outcome', 'stop'"
    assert problem("stop", type="note") == f"type: 'note' is not one of {shown}"
    assert problem("stop", type=ABSENT) == "type: missing"
    assert record_problem([], "j:1") == "j:1: field document: expected an object, found a list"


@pytest.mark.parametrize(
    ("changes", "found"),
    [
        ({"n": ABSENT}, "n: missing or mistyped"),
        ({"n": "0"}, "n: missing or mistyped"),
        ({"n": True}, "n: missing or mistyped"),
        ({"prev": None}, "prev: missing or mistyped"),
        ({"prev": ABSENT}, "prev: missing or mistyped"),
        ({"n": 7, "prev": ""}, None),  # the chain, not the schema, checks their values
    ],
)
def test_every_record_has_an_integer_n_and_a_string_prev(changes: dict, found: str | None) -> None:
    for kind in RECORD_TYPES:
        assert problem(kind, **changes) == found


def below(name: str, value: object, low: object) -> str:
    return f"{name}: {value!r} is below the minimum {low}"


@pytest.mark.parametrize(
    ("changes", "found"),
    [
        ({"session": 0}, below("session", 0, 1)),
        ({"session": 2}, None),
        ({"session": 1.0}, "session: expected an integer, found a number"),
        ({"session": ABSENT}, "session: missing"),
        ({"time": "yesterday"}, "time: 'yesterday' is not an ISO-8601 time"),
        ({"time": "9" * 50}, f"time: {'9' * 40!r} is not an ISO-8601 time"),
        ({"time": "2026-11-30"}, None),
        ({"time": 5}, "time: expected a string, found a number"),
        ({"run_json_sha256": "A" * 64}, f"run_json_sha256: {NOT_SHA}"),
        ({"run_json_sha256": "a" * 63}, f"run_json_sha256: {NOT_SHA}"),
        ({"run_json_sha256": ABSENT}, "run_json_sha256: missing"),
        ({"package_version": None}, "package_version: expected a string, found null"),
        ({"allow": 0}, below("allow", 0, 1)),
        ({"allow": ABSENT}, "allow: missing"),
        ({"min_gap_s": -0.5}, below("min_gap_s", -0.5, 0)),
        ({"min_gap_s": 0.5}, None),
        ({"min_gap_s": None}, "min_gap_s: expected a finite number, found null"),
        ({"override_reason": ABSENT}, None),
        ({"override_reason": "slow server"}, None),
        ({"override_reason": 1}, "override_reason: expected a string, found a number"),
        ({"timeout_s": -1}, below("timeout_s", -1, 0)),
        ({"timeout_s": ABSENT}, "timeout_s: missing"),
        ({"deadline_s": -1}, below("deadline_s", -1, 0)),
        ({"deadline_s": None}, "deadline_s: expected a finite number, found null"),
        ({"input_rate": -1}, below("input_rate", -1, 0)),
        ({"input_rate": ABSENT}, None),
        ({"output_rate": -1}, below("output_rate", -1, 0)),
        ({"output_rate": ABSENT, "cost_cap": 0}, None),
        ({"cost_cap": -1}, below("cost_cap", -1, 0)),
        ({"cost_cap": "1"}, "cost_cap: expected a finite number, found a string"),
        ({"dropped_tail_sha256": SHA}, None),
        ({"dropped_tail_sha256": "x"}, f"dropped_tail_sha256: {NOT_SHA}"),
        ({"dropped_tail_sha256": None}, "dropped_tail_sha256: expected a string, found null"),
        ({"declaration_sha256": SHA}, None),
        ({"declaration_sha256": "x"}, f"declaration_sha256: {NOT_SHA}"),
        ({"declaration_sha256": None}, "declaration_sha256: expected a string, found null"),
    ],
)  # fmt: skip
def test_session_fields(changes: dict, found: str | None) -> None:
    assert problem("session", **changes) == found


@pytest.mark.parametrize(
    ("changes", "found"),
    [
        ({"seq": 0}, below("seq", 0, 1)),
        ({"seq": ABSENT}, "seq: missing"),
        ({"request_sha256": "b" * 65}, f"request_sha256: {NOT_SHA}"),
        ({"request_sha256": ABSENT}, "request_sha256: missing"),
        ({"time": "x"}, "time: 'x' is not an ISO-8601 time"),
        ({"time": ABSENT}, "time: missing"),
        ({"gap_s": -1}, below("gap_s", -1, 0)),
        ({"gap_s": 0}, None),
        ({"gap_s": ABSENT}, None),
    ],
)  # fmt: skip
def test_attempt_fields(changes: dict, found: str | None) -> None:
    assert problem("attempt", **changes) == found


@pytest.mark.parametrize(
    ("changes", "found"),
    [
        ({"seq": 0}, below("seq", 0, 1)),
        ({"time": "x"}, "time: 'x' is not an ISO-8601 time"),
        ({"http_status": 99}, below("http_status", 99, 100)),
        ({"http_status": 100}, None),
        ({"http_status": 999}, None),
        ({"http_status": 1000}, "http_status: 1000 is above the maximum 999"),
        ({"http_status": None}, None),
        ({"http_status": ABSENT}, None),
        ({"error": "timeout"}, None),
        ({"error": 1}, "error: expected a string, found a number"),
        ({"error_detail": None}, "error_detail: expected a string, found null"),
        ({"error_detail": ABSENT}, "error_detail: missing"),
        ({"body": None}, "body_encoding: must be null exactly when body is null"),
        ({"body": None, "body_encoding": None}, None),
        ({"body_encoding": None}, "body_encoding: must be null exactly when body is null"),
        ({"body_encoding": "base64"}, None),
        ({"body_encoding": "latin-1"},
         "body_encoding: 'latin-1' is not one of 'utf-8', 'base64', None"),
        ({"body": 1}, "body: expected a string, found a number"),
        ({"body_truncated": 0}, "body_truncated: expected true or false, found a number"),
        ({"body_truncated": ABSENT}, "body_truncated: missing"),
        ({"headers": None}, "headers: expected an object, found null"),
        ({"headers": {"x-a": "1", "x-b": 2}}, "headers.x-b: expected a string"),
        ({"headers": {}}, None),
        ({"latency_s": -0.1}, below("latency_s", -0.1, 0)),
        ({"latency_s": None}, None),
        ({"usage": {"prompt_tokens": 1}}, None),
        ({"usage": []}, "usage: expected an object, found a list"),
        ({"usage": ABSENT}, None),
        ({"cost": -1}, below("cost", -1, 0)),
        ({"cost": ABSENT}, None),
        ({"recovered": None}, "recovered: expected true or false, found null"),
        ({"recovered": True}, None),
        ({"classification": ABSENT}, "classification: missing"),
        ({"classification": "correct"}, "classification: expected an object, found a string"),
        ({"classification": {"status": "fine", "kind": "", "response_text": ""}},
         "classification.status: 'fine' is not one of 'correct', 'error', 'protocol_failure', "
         "'unexecuted'"),
        ({"classification": {"status": "unexecuted", "kind": "", "response_text": ""}}, None),
        ({"classification": {"status": "error", "kind": None, "response_text": ""}},
         "classification.kind: expected a string, found null"),
        ({"classification": {"status": "error", "kind": "x"}},
         "classification.response_text: missing"),
    ],
)  # fmt: skip
def test_outcome_fields(changes: dict, found: str | None) -> None:
    assert problem("outcome", **changes) == found


@pytest.mark.parametrize(
    ("changes", "found"),
    [
        ({"time": "x"}, "time: 'x' is not an ISO-8601 time"),
        ({"reason": ""}, "reason: must not be empty"),
        ({"reason": ABSENT}, "reason: missing"),
        ({"reason": None}, "reason: expected a string, found null"),
        ({"detail": ""}, None),
        ({"detail": ABSENT}, "detail: missing"),
    ],
)
def test_stop_fields(changes: dict, found: str | None) -> None:
    assert problem("stop", **changes) == found
