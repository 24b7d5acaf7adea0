"""Java trim against OpenJDK's own output, and every classification branch."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.ids import plain_id

from needlepoint.run.scoring import (
    ERROR_KINDS,
    PROTOCOL_FAILURE_KINDS,
    TRANSPORT_KINDS,
    classify,
    java_trim,
    scoring_selftest_checks,
)

VECTORS = json.loads(
    resources.files("needlepoint").joinpath("data/java_vectors.json").read_text("utf-8")
)["trim"]


def reference_trim(s: str) -> str:
    """One-line definition from the Java API docs, written independently of java_trim."""
    return re.fullmatch(r"[\x00-\x20]*(.*?)[\x00-\x20]*", s, re.DOTALL).group(1)


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: plain_id(repr(v["input"])))
def test_java_trim_matches_openjdk(vector):
    assert java_trim(vector["input"]) == vector["java_trim"]


def test_vectors_cover_the_hard_cases():
    inputs = "".join(v["input"] for v in VECTORS)
    for ch in "\x00\u00a0\u3000\u2028\u0085\ufeff\x7f":
        assert ch in inputs
    # At least one vector where Python's str.strip() would be wrong.
    assert any(v["input"].strip() != v["java_trim"] for v in VECTORS)


_edge_chars = st.sampled_from(
    [chr(c) for c in range(0x23)] + ["\u00a0", "\u3000", "\u2028", "\u0085", "\ufeff", "\x7f"]
)


@given(st.lists(st.one_of(_edge_chars, st.characters()), max_size=12).map("".join))
def test_java_trim_property(s):
    assert java_trim(s) == reference_trim(s)


KEY = {
    "seq": 7,
    "expected": "OM-3642",
    "target_code": "OM-3642",
    "codes_present": ["AB-1111", "CD-2222", "EF-3333", "OM-3642"],
    "near_codes": ["AB-1111", "EF-3333"],
}
ABSENT = {**KEY, "expected": "UNKNOWN", "codes_present": ["AB-1111", "CD-2222", "EF-3333"]}


def body(content="OM-3642", *, finish="stop", role="assistant", model="m", drop=()):
    message = {"role": role, "content": content}
    for key in drop:
        message.pop(key)
    data = {"model": model, "choices": [{"index": 0, "finish_reason": finish, "message": message}]}
    return json.dumps(data).encode()


def cls(raw, *, answer=KEY, status=200, error=None):
    return classify(http_status=status, transport_error=error, body=raw, answer=answer, model="m")


@pytest.mark.parametrize(
    ("content", "answer", "kind"),
    [
        ("OM-3642", KEY, ""),
        (" \tOM-3642\n\x00", KEY, ""),
        ("UNKNOWN", ABSENT, ""),
        ("AB-1111", KEY, "near_distractor_code"),
        ("CD-2222", KEY, "other_present_code"),
        ("ZZ-9999", KEY, "absent_code"),
        ("UNKNOWN", KEY, "false_unknown"),
        ("AB-1111", ABSENT, "code_when_absent:near_distractor_code"),
        ("CD-2222", ABSENT, "code_when_absent:other_present_code"),
        # The target's code is not in an A request, so it is an absent code there.
        ("OM-3642", ABSENT, "code_when_absent:absent_code"),
        ("The code is OM-3642.", KEY, "extra_text"),
        ("\u00a0OM-3642", KEY, "extra_text"),
        ("UNKNOWN.", ABSENT, "extra_text"),
        ("OM-36420", KEY, "bad_format"),
        ("om-3642", KEY, "bad_format"),
        ("Unknown", ABSENT, "bad_format"),
        ("The code is AB-1111", KEY, "bad_format"),
    ],
)
def test_valid_answers(content, answer, kind):
    c = cls(body(content), answer=answer)
    assert (c.status, c.kind) == ("correct" if not kind else "error", kind)
    assert c.response_text == content
    assert not kind or kind in ERROR_KINDS


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (b"{not json", "unparsable_json"),
        (b"\xff\xfe", "unparsable_json"),
        (b"", "unparsable_json"),
        (b"[]", "no_choices"),
        (b'{"model":"m"}', "no_choices"),
        (b'{"model":"m","choices":[]}', "no_choices"),
        (b'{"model":"m","choices":["x"]}', "no_choices"),
        (body(finish="length"), "finish_reason"),
        (body(finish=None), "finish_reason"),
        (body(role="user"), "role"),
        (body(drop=("role",)), "role"),
        (body(model="other"), "model_mismatch"),
        (body(drop=("content",)), "content_missing"),
        (body(content=None), "content_missing"),
        (body(content=["OM-3642"]), "content_not_string"),
        (body(content=" \n\x00"), "content_empty"),
    ],
)
def test_protocol_failures(raw, kind):
    c = cls(raw)
    assert (c.status, c.kind) == ("protocol_failure", kind)
    assert kind in PROTOCOL_FAILURE_KINDS


def test_finish_reason_failure_keeps_the_text():
    assert cls(body("OM-3642", finish="length")).response_text == "OM-3642"


@pytest.mark.parametrize("status", [201, 400, 401, 403, 429, 500, 503, None])
def test_http_status_failure(status):
    c = cls(body(), status=status)
    assert (c.status, c.kind) == ("protocol_failure", "http_status")


@pytest.mark.parametrize(("error", "kind"), sorted(TRANSPORT_KINDS.items()))
def test_transport_errors(error, kind):
    c = cls(None, status=None, error=error)
    assert (c.status, c.kind) == ("protocol_failure", kind)
    assert c.indeterminate == (error != "connect_error")


def test_unknown_transport_error_is_a_bug():
    with pytest.raises(ValueError):
        cls(None, error="gremlins")


def test_selftest_checks_all_pass():
    checks = scoring_selftest_checks()
    assert len(checks) >= 10
    assert all(ok for _, ok in checks), [name for name, ok in checks if not ok]
