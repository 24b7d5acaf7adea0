"""The bootstrap against brute force: every ordered resample, counted one by one.

For n <= 5 cases there are at most 5**5 = 3125 ordered resamples, few enough to list. The
reference below counts their sums with a Counter and reads quantiles off the sorted counts;
it shares no code with ``needlepoint.analysis.bootstrap``. Hypothesis feeds both the same
small data sets, ties included, and compares the interval, the distribution and the weights.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats

from needlepoint.analysis.bootstrap import (
    MAX_EXACT,
    as_fraction,
    exact_sums,
    grouped_sums,
    integer_sum_weights,
    inverse_cdf_index,
    percentile_interval,
    tail_probabilities,
)

FUZZ = settings(derandomize=True, max_examples=120, deadline=None)
SMALL = st.lists(st.integers(-5, 5), min_size=1, max_size=5)
LEVELS = st.sampled_from(["0.5", "0.8", "0.9", "0.95", "0.99", "2/3"])


def ordered_sums(values: list[int]) -> Counter[int]:
    """Sum of every ordered resample of n from n, with how many resamples give it."""
    return Counter(sum(pick) for pick in itertools.product(values, repeat=len(values)))


def quantile(counts: Counter[int], p: Fraction) -> int:
    """Inverse CDF: the smallest sum whose cumulative share of resamples is at least p."""
    total, acc = sum(counts.values()), 0
    for s in sorted(counts):
        acc += counts[s]
        if Fraction(acc, total) >= p:
            return s
    raise AssertionError("unreachable")


@FUZZ
@given(values=SMALL, level=LEVELS, denominator=st.sampled_from([1, 2, 4, 6]))
@example(values=[0, 1], level="0.5", denominator=1)  # Q(1/4) lands exactly on a tie
@example(values=[3], level="0.95", denominator=4)
def test_exact_interval_and_distribution_match_brute_force(
    values: list[int], level: str, denominator: int
) -> None:
    n = len(values)
    counts = ordered_sums(values)
    res = percentile_interval(values, level, denominator=denominator)
    lo, hi = tail_probabilities(level)
    assert res.lower_exact == Fraction(quantile(counts, lo), n * denominator)
    assert res.upper_exact == Fraction(quantile(counts, hi), n * denominator)
    assert (res.lower, res.upper) == (float(res.lower_exact), float(res.upper_exact))
    sums = sorted(counts)
    assert res.values.tolist() == [s / (n * denominator) for s in sums]
    assert res.weights.tolist() == [counts[s] for s in sums]
    assert res.total == n**n and res.probabilities.sum() == pytest.approx(1.0)
    assert (res.method, res.seed, res.n) == ("exact", None, n)
    assert res.resamples == math.comb(2 * n - 1, n)  # distinct multisets enumerated
    assert res.confidence == as_fraction(level)
    assert res.estimate == pytest.approx(sum(values) / n / denominator)
    assert res.degenerate == (len(set(values)) == 1)
    for s in sums:  # P(mean <= x) at every support point: ties count as "at most"
        x = s / (n * denominator)
        assert res.prob_at_most(x) == Fraction(sum(c for t, c in counts.items() if t <= s), n**n)


def test_quantile_at_an_exact_tie_takes_the_smaller_value() -> None:
    # Two cases 0 and 1: resample means 0, 1/2, 1 with weights 1, 2, 1. At 50% the levels are
    # 1/4 and 3/4, each exactly a cumulative share, so Q(1/4) = 0 and Q(3/4) = 1/2.
    res = percentile_interval([0, 1], "0.5")
    assert (res.lower_exact, res.upper_exact) == (Fraction(0), Fraction(1, 2))
    # A level a hair above a tie needs one step more: here the lower level, then the upper.
    eps = Fraction(1, 10**6)
    res = percentile_interval([0, 1], Fraction(1, 2) - eps)
    assert (res.lower_exact, res.upper_exact) == (Fraction(1, 2), Fraction(1, 2))
    res = percentile_interval([0, 1], Fraction(1, 2) + eps)
    assert (res.lower_exact, res.upper_exact) == (Fraction(0), Fraction(1))


@FUZZ
@given(
    weights=st.lists(st.integers(1, 6), min_size=1, max_size=8),
    num=st.integers(0, 60),
)
def test_inverse_cdf_index_matches_its_definition(weights: list[int], num: int) -> None:
    total = sum(weights)
    p = Fraction(min(num, total * 2), total * 2)  # lands on every cumulative share too
    cum = np.cumsum(weights)
    want = next(i for i, c in enumerate(cum) if Fraction(int(c), total) >= p)
    assert inverse_cdf_index(cum, total, p) == want


@FUZZ
@given(values=SMALL, scale=st.sampled_from([3, 7]))
def test_non_integer_values_match_brute_force(values: list[int], scale: int) -> None:
    floats = [v / scale for v in values]
    if all(v % scale == 0 for v in values):
        return  # those are integers after all
    counts = ordered_sums(values)
    res = percentile_interval(floats, 0.9, denominator=2)
    lo, hi = tail_probabilities(0.9)
    n = len(values)
    assert res.lower_exact is None and res.upper_exact is None
    assert res.lower == pytest.approx(quantile(counts, lo) / (scale * n * 2), abs=1e-12)
    assert res.upper == pytest.approx(quantile(counts, hi) / (scale * n * 2), abs=1e-12)
    assert res.estimate == pytest.approx(sum(floats) / n / 2)


def test_integer_sums_are_exact_only_below_2_to_the_53() -> None:
    assert percentile_interval([2.0**52]).lower_exact == 2**52
    assert percentile_interval([2.0**53]).lower_exact is None
    assert percentile_interval([2.0**51, 2.0**51]).lower_exact is None  # n * sum reaches 2**53


def test_the_exact_limit_is_inclusive() -> None:
    values = [1, 0, 2, -1, 3]
    assert percentile_interval(values, exact_max=5).method == "exact"
    mc = percentile_interval(values, exact_max=4, resamples=300, seed=9)
    assert (mc.method, mc.resamples, mc.total, mc.seed) == ("monte-carlo", 300, 300, 9)


def test_monte_carlo_with_a_denominator_matches_scipy() -> None:
    values = np.random.default_rng(4).normal(size=30)
    res = percentile_interval(values, 0.9, exact_max=12, resamples=1000, seed=3, denominator=2)
    sp = stats.bootstrap(
        (values / 2,), np.mean, method="percentile", n_resamples=1000, rng=np.random.default_rng(3)
    )
    dist = np.sort(sp.bootstrap_distribution)
    assert res.lower == pytest.approx(dist[49], abs=1e-12)  # Q(1/20) of 1000: order stat 50
    assert res.upper == pytest.approx(dist[949], abs=1e-12)
    assert res.estimate == pytest.approx(values.mean() / 2)
    assert np.allclose(np.repeat(res.values, res.weights), dist)


@FUZZ
@given(st.lists(st.integers(-3, 3), min_size=1, max_size=6))
def test_grouped_sums_give_the_same_distribution_as_exact_sums(values: list[int]) -> None:
    def collapse(sums: np.ndarray, weights: np.ndarray) -> dict[float, int]:
        out: Counter[float] = Counter()
        for s, w in zip(sums.tolist(), weights.tolist(), strict=True):
            out[s] += w
        return dict(out)

    s1, w1, t1 = exact_sums(np.array(values, dtype=float))
    s2, w2, t2 = grouped_sums(np.array(values, dtype=float))
    assert collapse(s1, w1) == collapse(s2, w2) == dict(ordered_sums(values))
    assert w1.dtype == w2.dtype == np.int64  # exact integer multiplicities, never floats
    assert t1 == t2 == len(values) ** len(values)


@FUZZ
@given(
    st.integers(1, 5).flatmap(
        lambda n: st.lists(
            st.lists(st.integers(-4, 4), min_size=n, max_size=n), min_size=1, max_size=4
        )
    )
)
def test_integer_sum_weights_match_brute_force(rows: list[list[int]]) -> None:
    lowest, weights = integer_sum_weights(np.array(rows))
    n = len(rows[0])
    low, high = min(map(min, rows)), max(map(max, rows))
    assert lowest == low * n
    # One column per possible sum from n * low to n * high, as exact integers.
    assert weights.shape == (len(rows), n * (high - low) + 1) and weights.dtype == np.int64
    for row, w in zip(rows, weights, strict=True):
        counts = ordered_sums(row)
        assert {lowest + j: int(c) for j, c in enumerate(w) if c} == dict(counts)
        assert int(w.sum()) == n**n


@settings(derandomize=True, max_examples=40, deadline=None)
@given(
    st.integers(1, 5).flatmap(lambda n: st.lists(st.integers(-3, 3), min_size=n, max_size=n)),
    st.sampled_from([1, 2**31, 2**60]),
)
@example([3, 3, 3], 2**60)  # one distinct value drawn 3 times: 9 * 2**60 is past int64
def test_grouped_sums_take_python_integers_as_exact_sums_does(
    multiples: list[int], scale: int
) -> None:
    # Resample sums are floats, as in exact_sums: integer values never overflow a product.
    values = [m * scale for m in multiples]  # each sum is (a small integer) * scale: exact
    s1, w1, _ = exact_sums(values)
    s2, w2, _ = grouped_sums(values)
    want = Counter({s * scale: c for s, c in ordered_sums(multiples).items()})
    for sums, weights in ((s1, w1), (s2, w2)):
        got: Counter[float] = Counter()
        for x, w in zip(sums.tolist(), weights.tolist(), strict=True):
            got[x] += w
        assert got == want and sums.dtype == np.float64


@settings(derandomize=True, max_examples=40, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda n: st.lists(
            st.lists(st.integers(-128, 127), min_size=n, max_size=n), min_size=1, max_size=3
        )
    ),
    st.sampled_from([np.int8, np.int16, np.int32, np.int64]),
)
@example([[-128, 127]], np.int8)  # a span of 255 does not fit the input's own int8
def test_integer_sum_weights_take_any_integer_dtype(rows: list[list[int]], dtype: type) -> None:
    lowest, weights = integer_sum_weights(np.array(rows, dtype=dtype))
    n = len(rows[0])
    assert lowest == min(map(min, rows)) * n
    for row, w in zip(rows, weights, strict=True):
        assert {lowest + j: int(c) for j, c in enumerate(w) if c} == dict(ordered_sums(row))


def test_thirteen_cases_are_the_most_that_are_enumerated() -> None:
    assert MAX_EXACT == 13
    _, w, total = grouped_sums(np.array([0.0] * 12 + [1.0]))
    assert total == 13**13 and int(w.sum()) == 13**13
    with pytest.raises(ValueError, match=r"^exact enumeration supports at most 13 values, got 14$"):
        grouped_sums(np.zeros(14))
    with pytest.raises(ValueError, match=r"^exact enumeration supports at most 13 values, got 14$"):
        integer_sum_weights(np.zeros((1, 14), dtype=int))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: percentile_interval([]), "the bootstrap needs at least one value"),
        (lambda: exact_sums(np.array([])), "the bootstrap needs at least one value"),
        (lambda: percentile_interval([1.0, np.nan]), "bootstrap values must be finite"),
        (lambda: percentile_interval([1.0, np.inf]), "bootstrap values must be finite"),
        (
            lambda: percentile_interval(list(range(13)), exact_max=12),
            "a Monte Carlo bootstrap needs a seed",
        ),
        (
            lambda: integer_sum_weights(np.array([1, 2])),
            r"integer_sum_weights needs a \(sets × n\) array with n >= 1",
        ),
        (
            lambda: integer_sum_weights(np.zeros((2, 0), dtype=int)),
            r"integer_sum_weights needs a \(sets × n\) array with n >= 1",
        ),
    ],
)
def test_bad_input_is_refused_with_its_reason(call, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        call()


@pytest.mark.parametrize("level", [0, 1, 0.0, 1.0, "1", -0.5, 1.5])
def test_confidence_must_lie_strictly_inside_0_and_1(level: object) -> None:
    with pytest.raises(
        ValueError, match=rf"^confidence must lie strictly between 0 and 1, got {level}$"
    ):
        tail_probabilities(level)  # type: ignore[arg-type]


def test_tail_probabilities_split_the_rest_evenly() -> None:
    assert tail_probabilities(Fraction(1, 2)) == (Fraction(1, 4), Fraction(3, 4))
    assert tail_probabilities("0.99") == (Fraction(1, 200), Fraction(199, 200))


def test_as_fraction_reads_decimals_as_written() -> None:
    assert as_fraction(0.1) == Fraction(1, 10) and as_fraction("0.1") == Fraction(1, 10)
    f = Fraction(1, 3)
    assert as_fraction(f) is f
