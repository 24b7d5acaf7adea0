"""The effect table's rows, at the function's interface."""

from __future__ import annotations

from needlepoint.analysis.headline import effect_rows
from needlepoint.analysis.inference import Effect


def _effect(**fields: object) -> Effect:
    base = dict(
        measure="middle_loss", similarity="low", length=None, condition=None, cases=2,
        estimate=0.5, estimate_exact="1/2", lower=0.25, upper=0.75,
        lower_exact="1/4", upper_exact="3/4",
    )  # fmt: skip
    return Effect(**{**base, **fields})  # type: ignore[arg-type]


def test_rows_show_the_exact_fraction_only_where_there_is_one() -> None:
    with_exact, without, none = effect_rows(
        [
            _effect(),
            _effect(estimate_exact=None, lower=None, upper=None, cases=1, condition="B"),
            _effect(estimate=None, estimate_exact=None, lower=None, upper=None, cases=0),
        ]
    )
    assert with_exact == ["middle_loss", "low", "all", 2, "0.5 (1/2)", "[0.25, 0.75] ([1/4, 3/4])"]
    assert without == ["B", "low", "all", 1, "0.5", "—"]
    assert none == ["middle_loss", "low", "all", 0, "—", "—"]
