"""Strict scoring of one chat-completions response: Java trim, then an exact comparison.

Classification never guesses. Anything that is not a well-formed, finished, assistant answer
from the requested model is a *protocol failure* and stays out of the accuracy denominator;
a transport problem after the request may have reached the server is *indeterminate*.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from needlepoint.jsonio import canonical_bytes
from needlepoint.run.interpret import (
    BODY_FAILURE_KINDS,
    UNINTERPRETABLE,
    answer_of,
    parse_response,
)
from needlepoint.schema import to_plain

# Java's String.trim() removes every char <= U+0020 from both ends and nothing else.
_JAVA_TRIM_CHARS = "".join(chr(c) for c in range(0x21))

CODE_RE = re.compile(r"[A-Z]{2}-[0-9]{4}")

CORRECT = "correct"
ERROR = "error"
PROTOCOL_FAILURE = "protocol_failure"
UNEXECUTED = "unexecuted"
STATUSES = (CORRECT, ERROR, PROTOCOL_FAILURE, UNEXECUTED)

ERROR_KINDS = (
    "near_distractor_code",
    "other_present_code",
    "absent_code",
    "false_unknown",
    "code_when_absent:near_distractor_code",
    "code_when_absent:other_present_code",
    "code_when_absent:absent_code",
    "extra_text",
    "bad_format",
)
# Transport outcomes: the key is what transport.py reports, the value the recorded kind.
TRANSPORT_KINDS = {
    "connect_error": "connect_error",
    "timeout": "indeterminate_timeout",
    "dropped": "indeterminate_dropped",
    "deadline": "indeterminate_deadline",
    "interrupted": "indeterminate_interrupted",
}
# A response that arrived but whose body could not be read whole: the key is what transport.py
# reports, the value the recorded kind.
RESPONSE_ERROR_KINDS = {
    "body_too_large": "body_too_large",
    "content_encoding": "content_encoding",
}
PROTOCOL_FAILURE_KINDS = (
    "http_status",
    *TRANSPORT_KINDS.values(),
    *RESPONSE_ERROR_KINDS.values(),
    *BODY_FAILURE_KINDS,
    UNINTERPRETABLE,
    "no_choices",
    "finish_reason",
    "length_empty",
    "role",
    "model_mismatch",
    "content_missing",
    "content_not_string",
    "content_empty",
)


def java_trim(s: str) -> str:
    """Exactly Java's ``String.trim()``: strip U+0000..U+0020 from both ends, nothing else.

    Unlike ``str.strip()`` it keeps U+00A0, U+3000, U+2028 and friends, and removes U+0000.
    """
    return s.strip(_JAVA_TRIM_CHARS)


@dataclass(frozen=True)
class Classification:
    """One scored outcome. ``response_text`` is the content exactly as returned (untrimmed)."""

    status: str
    kind: str
    response_text: str

    @property
    def indeterminate(self) -> bool:
        """True when the request may have executed although no usable answer came back."""
        return self.kind.startswith("indeterminate")


def _failure(kind: str, text: str = "") -> Classification:
    return Classification(PROTOCOL_FAILURE, kind, text)


def classify(
    *,
    http_status: int | None,
    transport_error: str | None,
    body: bytes | None,
    answer: Mapping[str, Any],
    model: str,
    unknown: str = "UNKNOWN",
    profile: str = "chat",
) -> Classification:
    """Classify one exchange for the seq whose answer-key entry is ``answer``.

    ``transport_error`` is a key of TRANSPORT_KINDS (or None when a response arrived);
    ``model`` is the model named in the frozen request body; ``profile`` is the frozen body
    profile, which says where the answer is (``message.content`` or, for completion, ``text``).
    """
    if transport_error is not None and transport_error not in RESPONSE_ERROR_KINDS:
        if transport_error not in TRANSPORT_KINDS:
            raise ValueError(f"unknown transport error kind {transport_error!r}")
        return _failure(TRANSPORT_KINDS[transport_error])
    if http_status != 200:
        return _failure("http_status")
    if transport_error is not None:
        return _failure(RESPONSE_ERROR_KINDS[transport_error])
    parsed = parse_response(body)
    if parsed.kind is not None:
        return _failure(parsed.kind)
    data = parsed.data
    # Checks follow the order of the protocol's list, so one response gets one stable kind.
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return _failure("no_choices")
    a = answer_of(choices[0], completion=profile == "completion")
    # Reasoning (a leading think block, reasoning_content) is never scored: only `final` is.
    text = a.final or ""
    if a.finish_reason != "stop":
        no_answer = a.content is None or (a.final is not None and not java_trim(a.final))
        if a.finish_reason == "length" and no_answer:
            return _failure("length_empty", text)  # the budget ran out before any answer
        return _failure("finish_reason", text)
    if profile != "completion" and a.role != "assistant":
        return _failure("role", text)
    if data.get("model") != model:
        return _failure("model_mismatch", text)
    if a.content is None:
        return _failure("content_missing")
    if a.final is None:
        return _failure("content_not_string")
    trimmed = java_trim(a.final)
    if not trimmed:
        return _failure("content_empty", a.final)
    return Classification(*score_text(trimmed, answer, unknown), a.final)


def classify_safely(**kwargs: Any) -> Classification:
    """``classify`` that cannot raise and whose result can always be journalled.

    The runner and ``audit-run`` both classify through it, so an input that trips an unforeseen
    error gets the same kind, ``uninterpretable``, in the record and in its reclassification.
    """
    try:
        c = classify(**kwargs)
        canonical_bytes(to_plain(c))
    except Exception:
        return _failure(UNINTERPRETABLE)
    return c


def score_text(
    trimmed: str, answer: Mapping[str, Any], unknown: str = "UNKNOWN"
) -> tuple[str, str]:
    """Score an already-trimmed answer against one answer-key entry: ``(status, kind)``."""
    expected = answer["expected"]
    if trimmed == expected:
        return CORRECT, ""
    if CODE_RE.fullmatch(trimmed):
        # Only codes that were really in this request count as distractors.
        if trimmed in answer.get("near_codes", ()):
            code_kind = "near_distractor_code"
        elif trimmed in answer.get("codes_present", ()):
            code_kind = "other_present_code"
        else:
            code_kind = "absent_code"
        return ERROR, (f"code_when_absent:{code_kind}" if expected == unknown else code_kind)
    if trimmed == unknown:
        return ERROR, "false_unknown"
    # The right answer as a whole token, plus anything else around it.
    if contains_token(trimmed, expected):
        return ERROR, "extra_text"
    return ERROR, "bad_format"


def contains_token(text: str, token: str) -> bool:
    """``token`` occurs in ``text`` with no letter or digit right before or after it."""
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(token)}(?![A-Za-z0-9])", text) is not None


def lenient_correct(trimmed: str, expected: str) -> bool:
    """Exploratory: the expected code (``UNKNOWN`` on A) is a whole token of the final content.

    Why it exists: other benchmarks (needle-in-a-haystack, RULER and most of their successors)
    count an answer as right when the expected string occurs in it. This rule lets a report set
    needlepoint's strict numbers beside theirs. It is never part of the protocol: it forgives
    text around the code and even several codes listed at once, so it never enters the
    decision, and it is computed only for protocol-valid responses (the strict denominator).
    For a valid response it is exactly: status ``correct``, or kind ``extra_text``.
    """
    return contains_token(trimmed, expected)


def scoring_selftest_checks() -> list[tuple[str, bool]]:
    """Scoring edge cases for ``needlepoint selftest``: ``(name, passed)`` pairs."""
    key = {
        "expected": "OM-3642",
        "near_codes": ["AB-1111"],
        "codes_present": ["AB-1111", "CD-2222", "OM-3642"],
    }
    absent = {**key, "expected": "UNKNOWN"}
    body = json.dumps(
        {
            "model": "m",
            "choices": [
                {
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "\u00a0OM-3642"},
                }
            ],
        }
    ).encode()
    return [
        ("trim removes U+0000", java_trim("\x00OM-3642\x00") == "OM-3642"),
        ("trim keeps U+00A0", java_trim("\u00a0x\u00a0") == "\u00a0x\u00a0"),
        ("trim keeps U+3000", java_trim("\u3000x") == "\u3000x"),
        ("trim keeps U+2028", java_trim("x\u2028") == "x\u2028"),
        ("exact code is correct", score_text("OM-3642", key) == (CORRECT, "")),
        ("near code is a distractor", score_text("AB-1111", key)[1] == "near_distractor_code"),
        ("present code", score_text("CD-2222", key)[1] == "other_present_code"),
        ("absent code", score_text("ZZ-9999", key)[1] == "absent_code"),
        ("false UNKNOWN", score_text("UNKNOWN", key)[1] == "false_unknown"),
        ("code when absent", score_text("AB-1111", absent)[1].startswith("code_when_absent:")),
        ("extra text", score_text("OM-3642.", key)[1] == "extra_text"),
        ("longer code is not the answer", score_text("OM-36420", key)[1] == "bad_format"),
        ("lower case is bad format", score_text("unknown", absent)[1] == "bad_format"),
        (
            "NBSP is not trimmed, so the answer has extra text",
            classify(http_status=200, transport_error=None, body=body, answer=key, model="m").kind
            == "extra_text",
        ),
    ]
