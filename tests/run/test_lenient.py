"""The exploratory lenient score: the expected code as a whole token of the final content."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlepoint.run.scoring import CORRECT, java_trim, lenient_correct, score_text

KEY = {
    "expected": "OM-3642",
    "near_codes": ["AB-1111"],
    "codes_present": ["AB-1111", "CD-2222", "OM-3642"],
}
ABSENT = {**KEY, "expected": "UNKNOWN"}

CASES = [
    # (final content, answer key, leniently correct?)
    ("OM-3642", KEY, True),
    ("  OM-3642\n", KEY, True),
    ("The code is OM-3642.", KEY, True),
    ("**OM-3642**", KEY, True),
    ("(OM-3642)", KEY, True),
    ("OM-3642 or AB-1111", KEY, True),  # several codes: lenient forgives even this
    ("OM-36420", KEY, False),  # a longer number is another code, not the answer
    ("XOM-3642", KEY, False),
    ("OM-3642x", KEY, False),
    ("om-3642", KEY, False),  # case matters, as in the strict score
    ("OM 3642", KEY, False),
    ("AB-1111", KEY, False),
    ("UNKNOWN", KEY, False),
    ("UNKNOWN", ABSENT, True),
    ("The answer is UNKNOWN.", ABSENT, True),
    ("unknown", ABSENT, False),
    ("UNKNOWNS", ABSENT, False),
    ("AB-1111", ABSENT, False),
    ("\u00a0OM-3642", KEY, True),  # NBSP is not trimmed (extra text), but not a letter either
]


@pytest.mark.parametrize(("content", "key", "expected"), CASES)
def test_lenient_edge_cases(content: str, key: dict, expected: bool) -> None:
    assert lenient_correct(java_trim(content), key["expected"]) is expected


@settings(derandomize=True, max_examples=400)
@given(
    st.lists(
        st.sampled_from(["OM-3642", "AB-1111", "CD-2222", "UNKNOWN", "x", " ", ".", "9", "-"]),
        max_size=4,
    ),
    st.sampled_from([KEY, ABSENT]),
)
def test_lenient_is_strict_correct_or_extra_text(pieces: list[str], key: dict) -> None:
    """For a valid answer, lenient means: exactly correct, or the right code with extra text."""
    trimmed = java_trim("".join(pieces))
    if not trimmed:
        return  # an empty answer is a protocol failure, never scored
    status, kind = score_text(trimmed, key)
    assert lenient_correct(trimmed, key["expected"]) == (status == CORRECT or kind == "extra_text")
