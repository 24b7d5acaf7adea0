"""Where the answer is: the think-block rule against a regular expression, and each field read.

PROTOCOL.md: a *leading* ``<think>…</think>`` block (after blanks) is reasoning and never
scored; an unclosed one is reasoning to the end. Hypothesis compares ``split_think`` with that
sentence written as a regular expression, over strings built from the pieces that matter.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlepoint.run.answers import Answer, answer_of, reasoning_tokens, split_think

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
