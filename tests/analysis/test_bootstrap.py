"""The case-cluster bootstrap against plain loops, brute force, scipy and its own Monte Carlo.

For n <= 5 cases there are at most 5**5 = 3125 ordered resamples, few enough to list. The
reference below counts their sums with a Counter and reads quantiles off the sorted counts;
it shares no code with ``needlepoint.analysis.bootstrap``. Hypothesis feeds both the same
small data sets, ties included, and compares the interval, the distribution and the weights.
The Monte Carlo branch draws exactly scipy's resamples.

``case_interval`` is ``percentile_interval`` with the protocol's confidence, exact limit,
resamples and seed; each of its rules is pinned where it turns, with a number worked out by
hand.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats
from support.analysis import analysis_params

from needlepoint.analysis.bootstrap import (
    EXACT,
    MAX_EXACT,
    MONTE_CARLO,
    as_fraction,
    case_interval,
    integer_sum_weights,
    inverse_cdf_index,
    percentile_interval,
    resample_indices,
    tail_probabilities,
)

# --- against plain loops and scipy ----------------------------------------------------------------


def at_most(res, x: float) -> Fraction:
    """The exact bootstrap probability that a resample mean is <= x."""
    k = int(np.searchsorted(res.values, x, side="right"))
    return Fraction(int(res.weights[:k].sum()), res.total)


def loop_quantile(points: list[tuple[Fraction, int]], total: int, p: Fraction) -> Fraction:
    """Q(p) written out: the smallest value whose cumulative probability is at least p."""
    acc = 0
    for value, weight in sorted(points):
        acc += weight
        if Fraction(acc, total) >= p:
            return value
    raise AssertionError("cumulative probability never reached p")


def loop_ordered(values: list[int]) -> tuple[Fraction, Fraction]:
    """Every ordered resample (n**n of them), each with weight one."""
    n = len(values)
    sums = Counter(sum(pick) for pick in itertools.product(values, repeat=n))
    means = [(Fraction(s, n), w) for s, w in sums.items()]
    return loop_quantile(means, n**n, Fraction(1, 40)), loop_quantile(means, n**n, Fraction(39, 40))


def loop_multisets(values: list[int]) -> tuple[Fraction, Fraction]:
    """Every multiset with its multinomial weight n! / prod(c!)."""
    n = len(values)
    points = []
    for combo in itertools.combinations_with_replacement(range(n), n):
        counts = [combo.count(i) for i in range(n)]
        weight = math.factorial(n)
        for c in counts:
            weight //= math.factorial(c)
        points.append(
            (Fraction(sum(c * v for c, v in zip(counts, values, strict=True)), n), weight)
        )
    return loop_quantile(points, n**n, Fraction(1, 40)), loop_quantile(
        points, n**n, Fraction(39, 40)
    )


def test_tail_probabilities_are_exact() -> None:
    assert tail_probabilities(0.95) == (Fraction(1, 40), Fraction(39, 40))
    assert tail_probabilities("0.9") == (Fraction(1, 20), Fraction(19, 20))
    with pytest.raises(ValueError):
        tail_probabilities(1.0)


def test_inverse_cdf_index_reaches_p_exactly() -> None:
    cum = np.array([1, 2, 3, 4])
    assert inverse_cdf_index(cum, 4, Fraction(1, 4)) == 0
    assert inverse_cdf_index(cum, 4, Fraction(1, 4) + Fraction(1, 10**9)) == 1
    assert inverse_cdf_index(cum, 4, Fraction(0)) == 0


@pytest.mark.parametrize("values", [[3, -1, 0, 2, 2], [0, 4, -2, 1, 1, -3]])
def test_exact_matches_loop_over_every_ordered_resample(values: list[int]) -> None:
    res = percentile_interval(values, 0.95)
    assert res.method == EXACT and res.seed is None
    assert (res.lower_exact, res.upper_exact) == loop_ordered(values)
    assert res.resamples == math.comb(2 * len(values) - 1, len(values))


def test_exact_matches_loop_over_multisets_for_eight_cases() -> None:
    values = [2, 0, -1, 1, 3, 0, 0, -2]
    res = percentile_interval(values, 0.95, denominator=4)
    lo, hi = loop_multisets(values)
    assert res.lower_exact == lo / 4 and res.upper_exact == hi / 4
    assert res.lower == float(lo / 4) and res.upper == float(hi / 4)
    assert res.total == 8**8 and int(res.weights.sum()) == 8**8


def test_exact_weights_sum_to_n_power_n() -> None:
    res = percentile_interval(np.arange(7.0))
    assert res.resamples == math.comb(13, 7)
    assert int(res.weights.sum()) == res.total == 7**7


def test_exact_refuses_too_many_values() -> None:
    with pytest.raises(ValueError, match="at most"):
        percentile_interval(np.zeros(14), exact_max=14)


def test_non_integer_values_are_refused() -> None:
    # Numerators over one denominator keep every sum exact; a fraction has no place in them.
    with pytest.raises(ValueError, match="integer numerators"):
        percentile_interval([0.1, 0.7, -0.35, 0.2, 0.05], 0.95)


def test_monte_carlo_reproduces_scipy_resamples_exactly() -> None:
    rng = np.random.default_rng(11)
    values = rng.integers(-9, 10, size=40)
    res = percentile_interval(values, 0.95, exact_max=12, resamples=2000, seed=7)
    assert res.method == MONTE_CARLO and res.seed == 7 and res.resamples == 2000
    sp = stats.bootstrap(
        (values,), np.mean, method="percentile", n_resamples=2000, rng=np.random.default_rng(7)
    )
    dist = np.sort(sp.bootstrap_distribution)
    # Same draws: our inverse-CDF quantiles are order statistics 50 and 1950 of scipy's.
    assert res.lower == dist[49] and res.upper == dist[1949]
    assert np.array_equal(np.repeat(res.values, res.weights), dist)
    # scipy interpolates between neighbouring order statistics; ours picks one of them.
    low, high = sp.confidence_interval
    assert dist[48] <= low <= dist[50] and dist[1948] <= high <= dist[1950]


def test_monte_carlo_integer_values_give_exact_bounds_matching_scipy() -> None:
    values = np.array([2, 0, -1, 1, 3, 0, 0, -2, 1, 1, 2, 0, -1, 4, 0, 1], dtype=float)
    res = percentile_interval(values, 0.95, resamples=5000, seed=20260930, denominator=4)
    sp = stats.bootstrap(
        (values / 4,),
        np.mean,
        method="percentile",
        n_resamples=5000,
        rng=np.random.default_rng(20260930),
    )
    q = stats.quantile(sp.bootstrap_distribution, [0.025, 0.975], method="inverted_cdf")
    assert res.lower == pytest.approx(q[0], abs=1e-15) and res.upper == pytest.approx(
        q[1], abs=1e-15
    )
    assert res.lower_exact is not None and res.lower_exact.denominator in (1, 2, 4, 8, 16, 32, 64)


def test_exact_and_monte_carlo_and_scipy_agree_in_distribution() -> None:
    values = np.array([2, 0, -1, 1, 3, 0, 0, -2], dtype=float)
    exact = percentile_interval(values, 0.95)
    mc = percentile_interval(values, 0.95, exact_max=0, resamples=20000, seed=3)
    sp = stats.bootstrap(
        (values,), np.mean, method="percentile", n_resamples=20000, rng=np.random.default_rng(99)
    )
    grid = np.union1d(exact.values, mc.values)
    f_exact = np.array([float(at_most(exact, x)) for x in grid])
    f_mc = np.array([float(at_most(mc, x)) for x in grid])
    f_sp = np.searchsorted(np.sort(sp.bootstrap_distribution), grid, side="right") / 20000
    # 20,000 resamples: a CDF gap of 0.02 has probability below 1e-6 (DKW); all are seeded.
    assert np.max(np.abs(f_exact - f_mc)) < 0.02
    assert np.max(np.abs(f_exact - f_sp)) < 0.02
    step = 1 / 8
    assert abs(mc.lower - exact.lower) <= step and abs(mc.upper - exact.upper) <= step
    low, high = sp.confidence_interval
    assert abs(low - exact.lower) <= step and abs(high - exact.upper) <= step


def test_monte_carlo_needs_a_seed() -> None:
    with pytest.raises(ValueError, match="seed"):
        percentile_interval(np.arange(20.0), exact_max=12)


@pytest.mark.parametrize("n,exact_max", [(1, 12), (8, 12), (30, 12)])
def test_degenerate_data_gives_zero_width_without_warnings(
    n: int, exact_max: int, capfd: pytest.CaptureFixture[str]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = percentile_interval(np.full(n, 1), 0.95, exact_max=exact_max, seed=1, denominator=4)
    assert res.degenerate
    assert res.lower == res.upper == 0.25 and not math.isnan(res.estimate)
    assert capfd.readouterr().err == ""


def test_seeded_monte_carlo_is_reproducible_and_seed_sensitive() -> None:
    values = np.random.default_rng(0).integers(-9, 10, size=50)
    a = percentile_interval(values, seed=5, resamples=1000)
    b = percentile_interval(values, seed=5, resamples=1000)
    c = percentile_interval(values, seed=6, resamples=1000)
    assert (a.lower, a.upper) == (b.lower, b.upper)
    assert (a.lower, a.upper) != (c.lower, c.upper)


def test_by_default_twelve_values_are_exact_and_thirteen_take_10000_seeded_resamples() -> None:
    from needlepoint.analysis.bootstrap import percentile_interval

    assert percentile_interval(list(range(12))).method == "exact"
    with pytest.raises(ValueError, match="a Monte Carlo bootstrap needs a seed"):
        percentile_interval(list(range(13)))
    mc = percentile_interval(list(range(13)), seed=4)
    assert (mc.method, mc.resamples, mc.total) == ("monte-carlo", 10_000, 10_000)


def test_integer_numerators_of_any_dtype_are_read_exactly() -> None:
    for values in (np.array([1, 2, 7], dtype=np.int8), [1.0, 2.0, 7.0], [True, 2, np.int64(7)]):
        result = percentile_interval(values, denominator=3)
        assert (result.lower_exact, result.upper_exact) == (Fraction(1, 3), Fraction(7, 3))


# --- against brute force: every ordered resample --------------------------------------------------


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
    assert res.total == n**n and int(res.weights.sum()) == n**n
    assert (res.method, res.seed, res.n) == ("exact", None, n)
    assert res.resamples == math.comb(2 * n - 1, n)  # distinct multisets enumerated
    assert res.confidence == as_fraction(level)
    assert res.estimate == pytest.approx(sum(values) / n / denominator)
    assert res.degenerate == (len(set(values)) == 1)
    cumulative = np.cumsum(res.weights)
    for s, c in zip(sums, cumulative, strict=True):  # P(sum <= s): ties count as "at most"
        assert int(c) == sum(k for t, k in counts.items() if t <= s)


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


def test_integer_sums_are_exact_only_below_2_to_the_53() -> None:
    assert percentile_interval([2.0**52]).lower_exact == 2**52
    for values in ([2.0**53], [2.0**51, 2.0**51]):  # n * sum reaches 2**53
        with pytest.raises(ValueError, match=r"^bootstrap numerators too large for exact"):
            percentile_interval(values)


def test_the_exact_limit_is_inclusive() -> None:
    values = [1, 0, 2, -1, 3]
    assert percentile_interval(values, exact_max=5).method == "exact"
    mc = percentile_interval(values, exact_max=4, resamples=300, seed=9)
    assert (mc.method, mc.resamples, mc.total, mc.seed) == ("monte-carlo", 300, 300, 9)


def test_monte_carlo_with_a_denominator_matches_scipy() -> None:
    values = np.random.default_rng(4).integers(-9, 10, size=30)
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
    res = percentile_interval([0] * 12 + [1], exact_max=13)
    assert res.total == 13**13 and int(res.weights.sum()) == 13**13
    with pytest.raises(ValueError, match=r"^exact enumeration supports at most 13 values, got 14$"):
        percentile_interval(np.zeros(14), exact_max=14)
    with pytest.raises(ValueError, match=r"^exact enumeration supports at most 13 values, got 14$"):
        integer_sum_weights(np.zeros((1, 14), dtype=int))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: percentile_interval([]), "the bootstrap needs at least one value"),
        (
            lambda: percentile_interval([0.5]),
            "bootstrap values must be integer numerators over one denominator",
        ),
        (
            lambda: integer_sum_weights(np.array([[0, 2**20]])),
            "exact enumeration: numerators from 0 to 1048576 span too many resample sums",
        ),
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


# --- the preregistered interval (case_interval) ---------------------------------------------------


MC = "monte-carlo"
FUZZ_INTERVAL = settings(derandomize=True, max_examples=80, deadline=None)


def interval(values: list, denominator: int, params) -> tuple:
    """(cases, estimate, lower, upper, method) of the preregistered interval, as fractions."""
    r = case_interval(values, denominator, params)
    estimate = Fraction(int(sum(int(v) for v in values)), len(values) * denominator)
    return (r.n, estimate, r.lower_exact, r.upper_exact, r.method)


@FUZZ_INTERVAL
@given(
    values=st.lists(st.integers(-4, 4), min_size=1, max_size=9),
    confidence=st.sampled_from([0.95, 0.9, 0.5, 0.9512345, 0.99]),
    exact_max=st.integers(0, 9),
)
def test_case_interval_is_the_percentile_interval_with_the_protocols_parameters(
    values: list[int], confidence: float, exact_max: int
) -> None:
    p = analysis_params(confidence=confidence, exact_bootstrap_max_cases=exact_max)
    got = case_interval(values, 4, p)
    want = percentile_interval(
        values, confidence, exact_max=exact_max, resamples=p.bootstrap_resamples,
        seed=p.bootstrap_seed, denominator=4,
    )  # fmt: skip
    assert (got.lower_exact, got.upper_exact) == (want.lower_exact, want.upper_exact)
    assert got.method == want.method and got.n == len(values)


def test_an_interval_of_no_case_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"^the bootstrap needs at least one value$"):
        case_interval([], 2, analysis_params())


def test_one_case_is_its_own_interval() -> None:
    assert interval([3], 4, analysis_params()) == (
        1,
        Fraction(3, 4),
        Fraction(3, 4),
        Fraction(3, 4),
        "exact",
    )


def test_the_exact_interval_counts_all_n_to_the_n_ordered_resamples() -> None:
    # [0, 0, 3]/3: of the 27 ordered resamples 8 have sum 0, 12 sum 3, 6 sum 6 and 1 sum 9.
    # At 50 % confidence the tails are 1/4 and 3/4: cumulative 8/27 reaches 1/4 at sum 0, and
    # 20/27 falls short of 3/4, so the upper bound is sum 6: [0, 6/9].
    r = interval([0, 0, 3], 3, analysis_params(confidence=0.5))
    assert r == (3, Fraction(1, 3), Fraction(0), Fraction(2, 3), "exact")
    # At 95 %: 1/40 of 27 is reached by the 8 zero sums, 39/40 only by the single sum 9.
    wide = interval([0, 0, 3], 3, analysis_params(confidence=0.95))
    assert (wide[2], wide[3]) == (Fraction(0), Fraction(1))


def test_the_exact_interval_is_shifted_by_the_lowest_sum() -> None:
    # [−2, −1]/2: sums −4 (1 of 4), −3 (2), −2 (1). At 50 % the tails need 1 and 3 of 4:
    # −4/4 and −3/4; at 95 %, 1 and 4 of 4: −4/4 and −2/4.
    r = interval([-2, -1], 2, analysis_params(confidence=0.5))
    assert r == (2, Fraction(-3, 4), Fraction(-1), Fraction(-3, 4), "exact")
    wide = interval([-2, -1], 2, analysis_params())
    assert (wide[2], wide[3]) == (Fraction(-1), Fraction(-1, 2))


def test_the_exact_interval_reads_integers_from_any_number_type() -> None:
    r = interval([np.int64(2), 1.0, True], 2, analysis_params(confidence=0.5))
    assert r == interval([2, 1, 1], 2, analysis_params(confidence=0.5))
    assert r[1] == Fraction(2, 3)


def test_exact_up_to_the_protocols_maximum_then_seeded_monte_carlo() -> None:
    values = [0, 1, 2, 3, 4, 5]
    at = interval(values, 5, analysis_params(exact_bootstrap_max_cases=6))
    assert at[4] == "exact"
    p = analysis_params(
        exact_bootstrap_max_cases=5, bootstrap_resamples=20, bootstrap_seed=4, confidence=0.5
    )
    over = interval(values, 5, p)
    assert over == (6, Fraction(1, 2), Fraction(13, 30), Fraction(19, 30), MC)
    want = percentile_interval(values, 0.5, exact_max=5, resamples=20, seed=4, denominator=5)
    assert (want.lower_exact, want.upper_exact) == (over[2], over[3])
    # Each protocol parameter counts: another seed, count, confidence or switch differs.
    for other in (
        percentile_interval(values, 0.5, exact_max=5, resamples=20, seed=5, denominator=5),
        percentile_interval(values, 0.5, exact_max=5, resamples=19, seed=4, denominator=5),
        percentile_interval(values, 0.95, exact_max=5, resamples=20, seed=4, denominator=5),
        percentile_interval(values, 0.5, exact_max=6, resamples=20, seed=4, denominator=5),
    ):
        assert (other.lower_exact, other.upper_exact) != (over[2], over[3])


def test_the_exact_lower_bound_can_lie_above_the_lowest_sum() -> None:
    # [0, 1, 2, 3]/3: of 256 ordered resamples the sums 0, 1, 2 have 1, 4 and 10; 1/40 of 256
    # (6.4) is first reached at sum 2, and 39/40 (249.6) at sum 10: [2/12, 10/12].
    r = interval([0, 1, 2, 3], 3, analysis_params())
    assert r == (4, Fraction(1, 2), Fraction(1, 6), Fraction(5, 6), "exact")
    shifted = interval([-3, -2, -1, 0], 3, analysis_params())
    assert (shifted[2], shifted[3]) == (Fraction(-5, 6), Fraction(-1, 6))


def test_the_monte_carlo_draw_is_uint32_indices_of_scipys_stream() -> None:
    # uint32 halves the memory of scipy's int64 indices and draws the very same stream.
    drawn = resample_indices(7, 50, 3)
    assert drawn.dtype == np.uint32 and drawn.shape == (50, 7)
    np.testing.assert_array_equal(drawn, np.random.default_rng(3).integers(0, 7, (50, 7)))


def test_the_exact_span_limit_refuses_at_its_boundary_and_enumerates_just_below() -> None:
    """MAX_EXACT_SPAN bounds the polynomial (one integer per reachable sum): n × span reaching
    2**20 is refused, one below it is enumerated."""
    lowest, weights = integer_sum_weights(np.array([[0, 2**19 - 1]]))
    assert lowest == 0 and weights.shape == (1, 2**20 - 1) and int(weights.sum()) == 4
    assert weights[0, [0, 2**19 - 1, 2**20 - 2]].tolist() == [1, 2, 1]
    with pytest.raises(ValueError, match=r"^exact enumeration: numerators from 0 to 524288 span"):
        integer_sum_weights(np.array([[0, 2**19]]))


def test_numerators_are_read_as_floats_checked_then_kept_as_int64() -> None:
    """Values are read as floats first, so an integer beyond int64 is refused by the exactness
    check rather than by numpy, and the numerators kept are int64, so every sum is an integer."""
    from needlepoint.analysis.bootstrap import _numerators

    with pytest.raises(ValueError, match=r"^bootstrap numerators too large for exact resample"):
        percentile_interval([2**70])
    kept = _numerators([3, -2, 0])
    assert kept.dtype == np.int64 and kept.tolist() == [3, -2, 0]
