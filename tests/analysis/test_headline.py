"""What the reader is told, one function at a time, at each function's interface."""

from __future__ import annotations

from needlepoint.analysis.headline import effect_rows, interval_text, q1_reading, size_text
from needlepoint.analysis.inference import Effect, LengthSize


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


def test_interval_text_and_q1_reading_at_each_case() -> None:
    dash = _effect(estimate=None, estimate_exact=None, lower=None, upper=None, cases=0)
    one_sided = _effect(upper=None)  # an interval needs both ends
    assert interval_text(dash) == "—"
    assert interval_text(one_sided) == "0.5 (one case: no interval)"
    assert interval_text(_effect()) == "0.5 [0.25, 0.75]"
    assert q1_reading(one_sided) == "too few cases to tell"
    assert q1_reading(_effect(lower=None)) == "too few cases to tell"
    assert q1_reading(_effect()) == "a middle loss"
    assert q1_reading(_effect(lower=-0.5, upper=-0.25)) == "the middle does better than the ends"
    assert (
        q1_reading(_effect(lower=0.0, upper=0.25))
        == "no clear middle loss (the interval includes 0)"
    )
    assert (
        q1_reading(_effect(lower=-0.25, upper=0.0))
        == "no clear middle loss (the interval includes 0)"
    )


def test_size_text_shows_the_spread_only_when_lengths_vary() -> None:
    varied = LengthSize(12, "tokens", "usage", 8, 309, 316.0, 322)
    same = LengthSize(24, "characters", "prompt text", 8, 600, 600.5, 600)
    assert size_text(varied) == "12 records ≈ 316 tokens (309–322)"
    assert size_text(same) == "24 records ≈ 600.5 characters"
