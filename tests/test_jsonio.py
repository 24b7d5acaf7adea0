"""jsonio's strict reading, at its own interface: a non-standard constant is refused by name."""

from __future__ import annotations

import pytest

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import parse_json


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_non_standard_constant_is_refused_by_name(constant: str) -> None:
    with pytest.raises(NeedlepointError) as caught:
        parse_json(f'{{"x": {constant}}}', "in.json")
    assert str(caught.value) == f"in.json: not JSON ({constant} is not a JSON number)"
