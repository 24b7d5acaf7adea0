"""Interpret a response body that arrived, without ever raising: strict JSON, bounded nesting,
valid Unicode, well-typed usage, a finite cost; and where its answer is.

The runner keeps what arrived before it interprets it, so nothing a server sends may crash the
run: whatever cannot be interpreted becomes a protocol failure of its own kind, with a reason
for ``error_detail``. ``audit-run`` reclassifies stored bodies through the same functions, so
the runner and the audit always agree.

Where the answer is depends on the body profile: chat and reasoning answers are
``choices[0].message.content``, completion answers ``choices[0].text``. Reasoning that comes with
an answer (``message.reasoning_content``, or a leading ``<think>…</think>`` block in the content)
stays in the journal's raw body and is never scored: only the *final* content after it is.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from needlepoint.safetext import SURROGATE as _SURROGATE  # the one copy of the rule

# Deeper than any chat-completions answer (about 7 levels), shallow enough that no recursive
# encoder or decoder downstream can run out of stack.
MAX_DEPTH = 64
# Token counts beyond 2^53 are not exactly representable as JSON numbers in most languages.
MAX_TOKENS = 2**53
USAGE_TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")
# Parsed JSON costs about 50 bytes per value: 16 MiB of "{}," would become 5.6 million objects
# (hundreds of MB). A chat answer holds a few hundred values; refusing past a million keeps the
# memory of interpreting any body bounded. Counted on the raw bytes before parsing.
MAX_JSON_VALUES = 1_000_000

UNPARSABLE = "unparsable_json"
TOO_DEEP = "json_too_deep"
TOO_MANY = "json_too_large"
BAD_UNICODE = "invalid_unicode"
DUPLICATE_KEY = "json_duplicate_key"
BAD_USAGE = "usage_invalid"
UNINTERPRETABLE = "uninterpretable"
# The kinds this module can give, in the order they are checked.
BODY_FAILURE_KINDS = (UNPARSABLE, TOO_MANY, TOO_DEEP, BAD_UNICODE, DUPLICATE_KEY, BAD_USAGE)


@dataclass(frozen=True)
class Parsed:
    """A body's JSON value, or the failure kind and a reason (``data`` is then None)."""

    data: Any
    kind: str | None
    reason: str


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_response(body: bytes | None) -> Parsed:
    """Strict UTF-8 JSON (no NaN or Infinity), at most MAX_DEPTH deep, no lone surrogates,
    and a ``usage`` that is null, absent or an object of well-typed counts."""
    if body is None:
        return Parsed(None, UNPARSABLE, "no body")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Parsed(None, UNPARSABLE, f"not UTF-8 ({exc.reason} at byte {exc.start})")
    values = body.count(b",") + body.count(b"{") + body.count(b"[") + body.count(b'"') // 2
    if values > MAX_JSON_VALUES:
        return Parsed(None, TOO_MANY, f"about {values} JSON values (limit {MAX_JSON_VALUES})")
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        # {"choices": [right], "choices": [wrong]} would silently keep the last value.
        value = dict(items)
        if len(value) != len(items) and not duplicates:
            seen: set[str] = set()
            duplicates.append(next(k for k, _ in items if k in seen or seen.add(k)))
        return value

    try:
        data = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=pairs)
    except RecursionError:
        return Parsed(None, TOO_DEEP, f"nested deeper than the parser's stack (limit {MAX_DEPTH})")
    except ValueError as exc:  # JSONDecodeError, NaN/Infinity, an integer of > 4300 digits
        return Parsed(None, UNPARSABLE, f"not JSON ({_short(exc)})")
    kind, reason = _walk(data)
    if kind is not None:
        return Parsed(None, kind, reason)
    if duplicates:
        shown = duplicates[0] if len(duplicates[0]) <= 80 else duplicates[0][:80] + "…"
        return Parsed(None, DUPLICATE_KEY, f"an object names the key {shown!r} more than once")
    problem = usage_problem(data)
    if problem:
        return Parsed(None, BAD_USAGE, problem)
    return Parsed(data, None, "")


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 200 else text[:200] + "…"


def _walk(data: Any) -> tuple[str | None, str]:
    """Depth and Unicode of every key and string, iteratively (no recursion to run out of)."""
    stack = [(data, 1)]
    bad_string: str | None = None
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if bad_string is None and _SURROGATE.search(value):
                bad_string = value
            continue
        if not isinstance(value, dict | list):
            continue
        if depth > MAX_DEPTH:
            return TOO_DEEP, f"nested more than {MAX_DEPTH} levels deep"
        if isinstance(value, dict):
            for key, item in value.items():
                if bad_string is None and _SURROGATE.search(key):
                    bad_string = key
                stack.append((item, depth + 1))
        else:
            stack.extend((item, depth + 1) for item in value)
    if bad_string is not None:
        at = _SURROGATE.search(bad_string)
        code = ord(bad_string[at.start()]) if at else 0
        return BAD_UNICODE, f"a string holds the lone surrogate U+{code:04X} (not Unicode text)"
    return None, ""


def usage_problem(data: Any) -> str:
    """Why ``usage`` is malformed, or "" (absent and null are fine: the cost is then unknown)."""
    usage = data.get("usage") if isinstance(data, dict) else None
    if usage is None:
        return ""
    if not isinstance(usage, dict):
        return f"usage is a {type(usage).__name__}, not an object"
    for name in USAGE_TOKEN_FIELDS:
        value = usage.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            return f"usage.{name} is a {type(value).__name__}, not an integer"
        if not 0 <= value < MAX_TOKENS:
            return f"usage.{name} is outside 0..2^53"
    stack = [usage]
    while stack:
        value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return "usage holds a number too large for a double"
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return ""


def cost_of(usage: Any, input_rate: float | None, output_rate: float | None) -> float | None:
    """Money for one response; None (unknown, never 0) without usage, rates, or a finite sum."""
    if input_rate is None or output_rate is None or not isinstance(usage, dict):
        return None
    tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not all(
        isinstance(v, int) and not isinstance(v, bool) and 0 <= v < MAX_TOKENS for v in tokens
    ):
        return None
    try:
        cost = round((tokens[0] * input_rate + tokens[1] * output_rate) / 1e6, 12)
    except (OverflowError, TypeError, ValueError):
        return None
    return cost if math.isfinite(cost) else None


THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
# Java's String.trim() characters: a think block may follow leading whitespace.
_BLANK = "".join(chr(c) for c in range(0x21))


@dataclass(frozen=True)
class Answer:
    """The parts of ``choices[0]`` that classification reads.

    ``content`` is the answer field as returned (any JSON value, None when absent); ``final`` is
    the content after a leading think block when the content is a string, else None.
    """

    finish_reason: Any
    role: Any
    content: Any
    final: str | None
    reasoning: str


def split_think(content: str) -> tuple[str, str]:
    """``(reasoning, final)``: a leading think block (after blanks) and the text after it.

    A think block that is opened but never closed (the reply was cut) is reasoning to the end,
    so the final content is empty.
    """
    stripped = content.lstrip(_BLANK)
    if not stripped.startswith(THINK_OPEN):
        return "", content
    end = stripped.find(THINK_CLOSE, len(THINK_OPEN))
    if end < 0:
        return stripped, ""
    cut = end + len(THINK_CLOSE)
    return stripped[:cut], stripped[cut:]


def answer_of(choice: dict[str, Any], completion: bool) -> Answer:
    """Read one choice of a chat (``completion`` False) or completions response."""
    if completion:
        content, role, extra = choice.get("text"), None, ""
    else:
        message = choice.get("message")
        message = message if isinstance(message, dict) else {}
        content, role = message.get("content"), message.get("role")
        extra = message.get("reasoning_content")
        extra = extra if isinstance(extra, str) else ""
    if not isinstance(content, str):
        return Answer(choice.get("finish_reason"), role, content, None, extra)
    think, final = split_think(content)
    return Answer(choice.get("finish_reason"), role, content, final, extra + think)


def reasoning_tokens(usage: Any) -> int | None:
    """``usage.completion_tokens_details.reasoning_tokens`` when the server reports it."""
    details = usage.get("completion_tokens_details") if isinstance(usage, dict) else None
    value = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
