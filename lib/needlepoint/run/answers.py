"""Where the answer is in a response, per body profile, and what is reasoning, not answer.

Chat and reasoning answers are ``choices[0].message.content``; completion answers are
``choices[0].text``. Reasoning that comes with an answer (``message.reasoning_content``, or a
leading ``<think>…</think>`` block in the content) stays in the journal's raw body and is never
scored: only the *final* content after it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
