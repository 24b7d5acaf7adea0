"""The shape verdict: each branch of the rule, the bootstrap p, Holm, and whole runs.

A steady decline with B at the ceiling makes the composite (B + E)/2 − M positive; the shape
must still read *decline*, and a U-shape needs both ends shown above the middle.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from itertools import product

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from needlepoint.analysis.record import Contrast
from needlepoint.analysis.shape import (
    DECLINE,
    FLAT,
    RISE,
    U_SHAPE,
    UNCLEAR,
    adjust,
    bootstrap_p,
    change_sits,
    classify,
    contrast,
    disagreements,
    holm,
    shapes,
)
from tests.support.analysis import analysis_params, outcome


def _c(direction: int, p: float | None = 0.01, name: str = "B − M") -> Contrast:
    est = None if p is None else 0.5 * direction
    return Contrast(name, 4, est, None, None, None, p, None, p, direction)


@pytest.mark.parametrize(
    ("first", "last", "verdict"),
    [
        (1, 1, U_SHAPE),
        (1, 0, DECLINE),
        (1, -1, DECLINE),
        (0, -1, DECLINE),
        (-1, 1, RISE),
        (0, 1, RISE),
        (-1, 0, RISE),
        (0, 0, FLAT),
        (-1, -1, UNCLEAR),
    ],
)
def test_classify_every_pair_of_directions(first: int, last: int, verdict: str) -> None:
    assert classify(_c(first), _c(last, name="E − M"))[0] == verdict


def test_the_verdicts_are_named_in_the_words_the_reader_reads() -> None:
    # Literal text: a test that compared them with the module's own constants could not notice
    # a changed name, and the headline, summary.md and depth.json print these words.
    assert (U_SHAPE, DECLINE, RISE, FLAT, UNCLEAR) == (
        "middle loss (U-shape)",
        "decline with position",
        "rise with position",
        "flat",
        "unclear",
    )


def test_classify_says_why_in_words() -> None:
    # The reason is printed after the verdict in the headline and summary.md: its words are
    # part of what the reader is told.
    assert classify(_c(1), _c(1, name="E − M")) == (U_SHAPE, "both ends are above the middle")
    assert classify(_c(-1), _c(-1, name="E − M")) == (
        UNCLEAR,
        "the middle is above both ends (no U-shape, no steady trend)",
    )
    assert classify(_c(0), _c(1, name="E − M")) == (
        RISE,
        "the last end is above the middle, the first end is not",
    )
    assert classify(_c(1), _c(0, name="E − M")) == (
        DECLINE,
        "the first end is above the middle, the last end is not",
    )
    assert classify(_c(0), _c(0, name="E − M")) == (
        FLAT,
        "neither end differs clearly from the middle",
    )


def test_classify_without_an_interval_is_unclear() -> None:
    assert classify(_c(1, None), _c(1)) == (UNCLEAR, "too few complete cases for an interval")
    assert classify(_c(1), _c(1, None))[0] == UNCLEAR


def test_bootstrap_p_is_twice_the_smaller_tail_at_or_beyond_zero() -> None:
    values = np.array([-0.5, 0.0, 0.5, 1.0])
    weights = np.array([1, 2, 3, 4])
    assert bootstrap_p(values, weights, 10) == Fraction(2 * 3, 10)  # at or below 0: 3 of 10
    assert bootstrap_p(np.array([0.25, 0.5]), np.array([3, 1]), 4) == 0
    assert bootstrap_p(np.array([0.0]), np.array([5]), 5) == 1  # capped at 1


def test_contrast_matches_the_effects_interval_and_needs_two_cases() -> None:
    params = analysis_params()
    c = contrast("B − M", [1, 1, 1, 0], 1, params)
    assert (c.estimate_exact, c.lower, c.upper) == ("3/4", 0.25, 1.0)
    # P(resample mean <= 0) = (1/4)**4: all four draws the one 0.
    assert c.p_exact == str(2 * Fraction(1, 256)) and c.direction == 0 and c.p_adjusted is None
    one = contrast("B − M", [1], 1, params)
    assert (one.estimate, one.lower, one.p) == (1.0, None, None)
    none = contrast("E − M", [], 1, params)
    assert (none.cases, none.estimate, none.p) == (0, None, None)
    # Two cases are enough: resamples (1, 1), (1, 0), (0, 1), (0, 0); P(mean <= 0) = 1/4.
    two = contrast("B − M", [1, 0], 1, params)
    assert (two.estimate_exact, two.lower, two.upper, two.p_exact) == ("1/2", 0.0, 1.0, "1/2")


def test_holm_is_statsmodels_holm_in_the_order_given() -> None:
    ps = [0.01, 0.04, 0.03, 0.5]
    assert holm(ps) == pytest.approx(list(multipletests(ps, method="holm")[1]))
    assert holm(ps) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm([]) == []


def test_adjust_sets_direction_only_at_or_under_alpha_and_skips_untested() -> None:
    family = [
        replace(_c(1), estimate=0.5, p=0.01),
        replace(_c(1), estimate=-0.5, p=0.02),
        replace(_c(1), estimate=0.5, p=0.04),
        replace(_c(1), estimate=0.5, p=None, p_adjusted=None, direction=0),
    ]
    out = adjust(family, 0.05)
    # Holm over three: 0.03, 0.04, 0.04: each at most 0.05.
    assert [c.direction for c in out] == [1, -1, 1, 0]
    assert [c.p_adjusted for c in out[:3]] == pytest.approx([0.03, 0.04, 0.04])
    assert out[3].p_adjusted is None
    strict = adjust(family, 0.035)
    assert [c.direction for c in strict] == [1, 0, 0, 0]
    # A Holm-adjusted p exactly at alpha counts (Holm over one p leaves it unchanged).
    assert adjust([replace(_c(1), estimate=0.5, p=0.05)], 0.05)[0].direction == 1
    assert adjust([replace(_c(1), estimate=-0.5, p=0.05)], 0.05)[0].direction == -1
    # An estimate of exactly 0 has no direction, whatever its p.
    assert adjust([replace(_c(1), estimate=0.0, p=0.0)], 0.05)[0].direction == 0


def _run(rates: dict[tuple[str, str], list[int]], lengths: tuple[int, ...] = (4,)) -> list:
    """Outcomes: for each (similarity, condition) the 0/1 answers of cases S1.. at every length."""
    out, seq = [], 0
    for (sim, cond), answers in rates.items():
        for length, (i, ok) in product(lengths, enumerate(answers)):
            seq += 1
            status = "correct" if ok else "error"
            out.append(
                outcome(seq=seq, case=f"S{i + 1}", length=length, similarity=sim,
                        condition=cond, status=status, kind="", block=1)
            )  # fmt: skip
    return out


def _decline() -> list:
    """High similarity: B always right, M right in 3 of 8, E in 1 of 8; low: all right."""
    rates = {}
    for cond in ("B", "M", "E", "A"):
        rates[("low", cond)] = [1] * 8
    rates[("high", "B")] = [1] * 8
    rates[("high", "M")] = [1, 1, 1, 0, 0, 0, 0, 0]
    rates[("high", "E")] = [0, 0, 0, 1, 0, 0, 0, 0]
    rates[("high", "A")] = [1] * 8
    return _run(rates)


def test_a_decline_with_b_at_the_ceiling_is_a_decline_not_a_middle_loss() -> None:
    s = shapes(_decline(), analysis_params())
    high = next(r for r in s.rows if r.similarity == "high")
    assert high.verdict == DECLINE
    assert high.counts == {"B": "8/8", "M": "3/8", "E": "1/8"}
    assert high.first.direction == 1 and high.last.direction == 0
    low = next(r for r in s.rows if r.similarity == "low")
    assert low.verdict == FLAT and low.first.p == 1
    assert s.method.startswith("Holm across the 4 contrasts")
    assert [c.name for c in s.changes] == ["B", "M", "E"]
    assert [c.direction for c in s.changes] == [0, -1, -1]
    assert s.change_sits == "at both M and E"
    assert s.disagreements == ()


def test_a_u_shape_needs_both_ends_above_the_middle() -> None:
    rates = {(sim, c): [1] * 8 for sim in ("low", "high") for c in ("B", "E", "A")}
    rates[("low", "M")] = [1] * 8
    rates[("high", "M")] = [0] * 8
    s = shapes(_run(rates), analysis_params())
    assert [r.verdict for r in s.rows] == [FLAT, U_SHAPE]
    assert s.change_sits == "at M"


def test_per_length_rows_and_their_disagreement_are_named() -> None:
    s = shapes(_run({("low", c): [1] * 8 for c in "BMEA"} | {("high", c): [1] * 8 for c in "BMEA"},
                    lengths=(4, 8)), analysis_params())  # fmt: skip
    assert [(r.similarity, r.length) for r in s.rows] == [
        ("low", None), ("low", 4), ("low", 8), ("high", None), ("high", 4), ("high", 8)
    ]  # fmt: skip
    assert s.method.startswith("Holm across the 12 contrasts")
    assert s.change_sits == "no position's accuracy changes clearly with similarity"
    rows = [replace(r, verdict=DECLINE if r.length == 8 else FLAT) for r in s.rows]
    said = disagreements(rows)
    assert len(said) == 2 and said[0].startswith("under low similarity the pooled row (flat)")
    assert "8 records: decline with position" in said[0]


def test_disagreement_is_read_within_each_similarity_and_needs_a_pooled_row() -> None:
    s = shapes(_run({("low", c): [1] * 8 for c in "BMEA"} | {("high", c): [1] * 8 for c in "BMEA"},
                    lengths=(4, 8)), analysis_params())  # fmt: skip
    # low agrees throughout; high's pooled row says flat, both its per-length rows decline.
    verdict = {("low", None): FLAT, ("low", 4): FLAT, ("low", 8): FLAT, ("high", None): FLAT}
    rows = [replace(r, verdict=verdict.get((r.similarity, r.length), DECLINE)) for r in s.rows]
    assert disagreements(rows) == [
        "under high similarity the pooled row (flat) and the per-length rows (4 records: decline "
        "with position; 8 records: decline with position) disagree: read the per-length rows "
        "before the pooled one"
    ]
    # Without a pooled row there is nothing to disagree with.
    assert disagreements([r for r in rows if r.length is not None]) == []


def test_change_sits_at_each_case() -> None:
    def ch(*moved: str) -> list[Contrast]:
        return [_c(-1 if n in moved else 0, name=n) for n in ("B", "M", "E")]

    assert change_sits(ch("E")) == "at E"
    assert change_sits(ch("B")) == "at B only, not at M or E"
    assert change_sits(ch("B", "M")) == "at M (B changes too)"
    assert change_sits([]) == "too few complete cases to say where the change sits"
    assert change_sits([_c(0, None, n) for n in "BME"]).startswith("too few")
