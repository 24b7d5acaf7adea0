"""The case-cluster bootstrap against plain loops, scipy, and its own Monte Carlo branch."""

from __future__ import annotations

import itertools
import math
import warnings
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from needlepoint.analysis.bootstrap import (
    EXACT,
    MONTE_CARLO,
    exact_sums,
    inverse_cdf_index,
    percentile_interval,
    tail_probabilities,
)


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
    sums, weights, total = exact_sums(np.arange(7.0))
    assert sums.size == math.comb(13, 7)
    assert int(weights.sum()) == total == 7**7


def test_exact_refuses_too_many_values() -> None:
    with pytest.raises(ValueError, match="at most"):
        exact_sums(np.zeros(14))


def test_non_integer_values_match_loop() -> None:
    values = [0.1, 0.7, -0.35, 0.2, 0.05]
    res = percentile_interval(values, 0.95)
    lo, hi = loop_ordered([round(v * 100) for v in values])
    assert res.lower_exact is None
    assert res.lower == pytest.approx(float(lo) / 100, abs=1e-12)
    assert res.upper == pytest.approx(float(hi) / 100, abs=1e-12)


def test_monte_carlo_reproduces_scipy_resamples_exactly() -> None:
    rng = np.random.default_rng(11)
    values = rng.normal(size=40)
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
    f_exact = np.array([float(exact.prob_at_most(x)) for x in grid])
    f_mc = np.array([float(mc.prob_at_most(x)) for x in grid])
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
        res = percentile_interval(np.full(n, 0.25), 0.95, exact_max=exact_max, seed=1)
    assert res.degenerate
    assert res.lower == res.upper == 0.25 and not math.isnan(res.estimate)
    assert capfd.readouterr().err == ""


def test_seeded_monte_carlo_is_reproducible_and_seed_sensitive() -> None:
    values = np.random.default_rng(0).normal(size=50)
    a = percentile_interval(values, seed=5, resamples=1000)
    b = percentile_interval(values, seed=5, resamples=1000)
    c = percentile_interval(values, seed=6, resamples=1000)
    assert (a.lower, a.upper) == (b.lower, b.upper)
    assert (a.lower, a.upper) != (c.lower, c.upper)


@pytest.mark.parametrize("n", [0, 1, 4, 13])
def test_the_binomial_table_is_exactly_n_plus_one_square(n: int) -> None:
    from needlepoint.analysis.bootstrap import _binomials

    table = _binomials(n)
    assert table.shape == (n + 1, n + 1) and table.dtype == np.int64
    expected = [[math.comb(r, c) if c <= r else 0 for c in range(n + 1)] for r in range(n + 1)]
    assert table.tolist() == expected


def test_by_default_twelve_values_are_exact_and_thirteen_take_10000_seeded_resamples() -> None:
    from needlepoint.analysis.bootstrap import percentile_interval

    assert percentile_interval(list(range(12))).method == "exact"
    with pytest.raises(ValueError, match="a Monte Carlo bootstrap needs a seed"):
        percentile_interval(list(range(13)))
    mc = percentile_interval(list(range(13)), seed=4)
    assert (mc.method, mc.resamples, mc.total) == ("monte-carlo", 10_000, 10_000)


def test_values_are_read_as_float64_whatever_their_dtype() -> None:
    from needlepoint.analysis.bootstrap import percentile_interval

    v32 = np.array([0.1, 0.2, 0.7], dtype=np.float32)
    result = percentile_interval(v32)
    assert result.estimate == float(v32.astype(np.float64).mean())
    assert result.estimate != float(v32.mean())


def test_a_non_integral_monte_carlo_distribution_is_of_resample_means() -> None:
    # Means, as scipy's bootstrap takes them, not sums divided afterwards (which round apart).
    from needlepoint.analysis.bootstrap import percentile_interval

    v = np.array([0.1 * k + 0.05 for k in range(14)])
    result = percentile_interval(v, resamples=200, seed=1, denominator=3)
    rng = np.random.default_rng(1)
    means = v[rng.integers(0, 14, (200, 14), dtype=np.uint32)].mean(axis=-1)
    points, counts = np.unique(means, return_counts=True)
    np.testing.assert_array_equal(result.values, points / 3)
    np.testing.assert_array_equal(result.weights, counts)
    sums = v[np.random.default_rng(1).integers(0, 14, (200, 14), dtype=np.uint32)].sum(axis=-1)
    assert not np.array_equal(np.unique(sums) / 42, points / 3)
