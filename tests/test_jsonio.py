"""jsonio's strict reading, at its own interface: a non-standard constant is refused by name."""

from __future__ import annotations

import pytest

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import DuplicateKey, parse_json


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_non_standard_constant_is_refused_by_name(constant: str) -> None:
    with pytest.raises(NeedlepointError) as caught:
        parse_json(f'{{"x": {constant}}}', "in.json")
    assert str(caught.value) == f"in.json: not JSON ({constant} is not a JSON number)"


def test_a_key_named_twice_is_refused_by_name_wherever_it_is() -> None:
    # json.loads would keep the last value silently; which one the writer meant is unknowable.
    with pytest.raises(NeedlepointError) as caught:
        parse_json('{"a": 1, "b": {"c": 2, "c": 3}}', "in.json", 7)
    assert str(caught.value) == "in.json:7: duplicate key 'c' (each key may appear once)"


def test_a_duplicate_key_error_carries_the_key_and_says_it() -> None:
    error = DuplicateKey("seq")
    assert (error.key, str(error), isinstance(error, ValueError)) == (
        "seq",
        "duplicate key 'seq'",
        True,
    )
