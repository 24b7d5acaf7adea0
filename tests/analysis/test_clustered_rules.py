"""The case-cluster statistics' rules at their edges, each with a number worked out by hand.

``test_clustered.py`` checks these functions against their references over many inputs; here
each rule is pinned where it turns: the exact/Monte Carlo switches, the minimum case count, the
threshold, ties with the observed sum, zeros among the sign-flipped values, and the words a
reader sees when an interval is undefined.
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from support.analysis import analysis_params

from needlepoint.analysis.bootstrap import percentile_interval
from needlepoint.analysis.clustered import (
    SIGN_FLIP_EXACT_MAX,
    BcaResult,
    ClusterResult,
    QuickDecision,
    SignFlipResult,
    _signed_sum_counts,
    bca_interval,
    cluster_interval,
    quick_decision,
    sign_flip,
)

MC = "monte-carlo"

# cluster_interval ------------------------------------------------------------------------------


def test_an_interval_of_no_case_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"^an interval needs at least one case$"):
        cluster_interval([], 2, analysis_params())


def test_one_case_is_its_own_interval() -> None:
    assert cluster_interval([3], 4, analysis_params()) == ClusterResult(
        1, Fraction(3, 4), Fraction(3, 4), Fraction(3, 4), "exact"
    )


def test_the_exact_interval_counts_all_n_to_the_n_ordered_resamples() -> None:
    # [0, 0, 3]/3: of the 27 ordered resamples 8 have sum 0, 12 sum 3, 6 sum 6 and 1 sum 9.
    # At 50 % confidence the tails are 1/4 and 3/4: cumulative 8/27 reaches 1/4 at sum 0, and
    # 20/27 falls short of 3/4, so the upper bound is sum 6: [0, 6/9].
    r = cluster_interval([0, 0, 3], 3, analysis_params(confidence=0.5))
    assert r == ClusterResult(3, Fraction(1, 3), Fraction(0), Fraction(2, 3), "exact")
    # At 95 %: 1/40 of 27 is reached by the 8 zero sums, 39/40 only by the single sum 9.
    wide = cluster_interval([0, 0, 3], 3, analysis_params(confidence=0.95))
    assert (wide.lower, wide.upper) == (Fraction(0), Fraction(1))


def test_the_exact_interval_is_shifted_by_the_lowest_sum() -> None:
    # [−2, −1]/2: sums −4 (1 of 4), −3 (2), −2 (1). At 50 % the tails need 1 and 3 of 4:
    # −4/4 and −3/4; at 95 %, 1 and 4 of 4: −4/4 and −2/4.
    r = cluster_interval([-2, -1], 2, analysis_params(confidence=0.5))
    assert r == ClusterResult(2, Fraction(-3, 4), Fraction(-1), Fraction(-3, 4), "exact")
    wide = cluster_interval([-2, -1], 2, analysis_params())
    assert (wide.lower, wide.upper) == (Fraction(-1), Fraction(-1, 2))


def test_the_exact_interval_reads_integers_from_any_number_type() -> None:
    r = cluster_interval([np.int64(2), 1.0, True], 2, analysis_params(confidence=0.5))
    assert r == cluster_interval([2, 1, 1], 2, analysis_params(confidence=0.5))
    assert r.estimate == Fraction(2, 3)


def test_exact_up_to_the_protocols_maximum_then_seeded_monte_carlo() -> None:
    values = [0, 1, 2, 3, 4, 5]
    at = cluster_interval(values, 5, analysis_params(exact_bootstrap_max_cases=6))
    assert at.method == "exact"
    p = analysis_params(
        exact_bootstrap_max_cases=5, bootstrap_resamples=20, bootstrap_seed=4, confidence=0.5
    )
    over = cluster_interval(values, 5, p)
    assert over == ClusterResult(6, Fraction(1, 2), Fraction(13, 30), Fraction(19, 30), MC)
    want = percentile_interval(values, 0.5, exact_max=5, resamples=20, seed=4, denominator=5)
    assert (want.lower_exact, want.upper_exact) == (over.lower, over.upper)
    # Each protocol parameter counts: another seed, count, confidence or switch differs.
    for other in (
        percentile_interval(values, 0.5, exact_max=5, resamples=20, seed=5, denominator=5),
        percentile_interval(values, 0.5, exact_max=5, resamples=19, seed=4, denominator=5),
        percentile_interval(values, 0.95, exact_max=5, resamples=20, seed=4, denominator=5),
        percentile_interval(values, 0.5, exact_max=6, resamples=20, seed=4, denominator=5),
    ):
        assert (other.lower_exact, other.upper_exact) != (over.lower, over.upper)


def test_the_exact_lower_bound_can_lie_above_the_lowest_sum() -> None:
    # [0, 1, 2, 3]/3: of 256 ordered resamples the sums 0, 1, 2 have 1, 4 and 10; 1/40 of 256
    # (6.4) is first reached at sum 2, and 39/40 (249.6) at sum 10: [2/12, 10/12].
    r = cluster_interval([0, 1, 2, 3], 3, analysis_params())
    assert r == ClusterResult(4, Fraction(1, 2), Fraction(1, 6), Fraction(5, 6), "exact")
    shifted = cluster_interval([-3, -2, -1, 0], 3, analysis_params())
    assert (shifted.lower, shifted.upper) == (Fraction(-5, 6), Fraction(-1, 6))


# quick_decision --------------------------------------------------------------------------------


def test_below_the_minimum_case_count_nothing_is_decided() -> None:
    p = analysis_params(min_complete_cases=3)
    assert quick_decision([2, 2], 2, p) == QuickDecision(2, None, None, None, "not evaluable")
    one = Fraction(1)
    assert quick_decision([2, 2, 2], 2, p) == QuickDecision(3, one, one, one, "supported")


def test_no_case_is_never_evaluable_even_with_no_minimum() -> None:
    p = analysis_params(min_complete_cases=0)
    assert quick_decision([], 2, p) == QuickDecision(0, None, None, None, "not evaluable")
    assert quick_decision([2], 2, p).decision == "supported"


def test_supported_needs_the_estimate_at_the_threshold_and_the_lower_bound_above_0() -> None:
    # [1, 1, 1, 2]/4 = 5/16 with the lower bound 1/4 (at 50 %: 81 of 256 resamples sum 4).
    p = analysis_params(confidence=0.5, threshold=0.3125)
    q = quick_decision([1, 1, 1, 2], 4, p)
    assert q == QuickDecision(4, Fraction(5, 16), Fraction(1, 4), Fraction(3, 8), "supported")
    above = analysis_params(confidence=0.5, threshold=0.3126)
    assert quick_decision([1, 1, 1, 2], 4, above).decision == "not supported"
    # A lower bound of exactly 0 is not above 0.
    assert quick_decision([0, 0, 4], 4, analysis_params(confidence=0.5)) == QuickDecision(
        3, Fraction(1, 3), Fraction(0), Fraction(2, 3), "not supported"
    )


# _signed_sum_counts and sign_flip --------------------------------------------------------------


def test_the_signed_sums_are_counted_from_the_lowest() -> None:
    lowest, counts = _signed_sum_counts([1, 2])  # ±1 ± 2: −3, −1, 1, 3
    assert (lowest, counts.tolist()) == (-3, [1, 0, 1, 0, 1, 0, 1])
    assert counts.dtype.kind == "i"  # counted in integers
    lowest, counts = _signed_sum_counts([2, -2])  # 0 twice, ±4 once each
    assert (lowest, counts.tolist()) == (-4, [1, 0, 0, 0, 2, 0, 0, 0, 1])


def test_a_zero_keeps_the_sum_under_both_signs() -> None:
    lowest, counts = _signed_sum_counts([0, 1, 0])
    assert (lowest, counts.tolist()) == (-1, [4, 0, 4])
    assert _signed_sum_counts([0])[1].tolist() == [2]
    assert _signed_sum_counts([])[1].tolist() == [1]


def test_a_sign_flip_of_no_case_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"^the sign-flip test needs at least one case$"):
        sign_flip([], 2, analysis_params())


def test_the_observed_sum_counts_among_the_patterns_that_reach_it() -> None:
    # One case of 1: the signs give −1 and 1; p one-sided 1/2, two-sided 1.
    assert sign_flip([1], 2, analysis_params()) == SignFlipResult(
        1, "exact", 2, None, Fraction(1, 2), Fraction(1, 2), Fraction(1)
    )
    # [2, −1, 0]: sums ±2 ± 1 (each twice, for the zero): 3, 1, −1, −3. Observed 1: 4 of 8 reach
    # it, and |sum| ≥ 1 always.
    r = sign_flip([2, -1, 0], 4, analysis_params())
    assert r == SignFlipResult(3, "exact", 8, None, Fraction(1, 12), Fraction(1, 2), Fraction(1))


def test_the_two_sided_p_counts_sums_as_far_from_0_on_either_side() -> None:
    # [3, 1]: sums 4, 2, −2, −4. Observed 4: one-sided 1/4; |sum| ≥ 4 twice, 2/4.
    r = sign_flip([3, 1], 1, analysis_params())
    assert (r.p_one_sided, r.p_two_sided, r.statistic) == (
        Fraction(1, 4),
        Fraction(1, 2),
        Fraction(2),
    )
    # A negative observed sum −4: every pattern reaches it one-sided, 2 of 4 two-sided.
    r = sign_flip([-3, -1], 1, analysis_params())
    assert (r.p_one_sided, r.p_two_sided) == (Fraction(1), Fraction(1, 2))


def test_twenty_cases_are_exact_and_twenty_one_monte_carlo() -> None:
    assert SIGN_FLIP_EXACT_MAX == 20
    p = analysis_params(bootstrap_resamples=300, bootstrap_seed=2)
    twenty = sign_flip([1] * 20, 1, p)
    assert (twenty.method, twenty.patterns, twenty.seed) == ("exact", 2**20, None)
    assert (twenty.p_one_sided, twenty.p_two_sided) == (Fraction(1, 2**20), Fraction(2, 2**20))
    mc = sign_flip([1] * 21, 1, p)
    # Each sign is + or − with even odds: no draw of 300 has all 21 plus (nor all minus).
    assert mc == SignFlipResult(
        21, "monte-carlo", 300, 2, Fraction(1), Fraction(1, 301), Fraction(1, 301)
    )


def test_the_monte_carlo_sign_flip_draws_from_the_protocols_seed() -> None:
    # 21 cases of [1, −1, …, 1] (sum 1): a drawn sum is odd, so never 0; 24 of 50 reach 1.
    values = [(-1) ** i for i in range(21)]
    p = analysis_params(bootstrap_resamples=50, bootstrap_seed=4)
    signs = np.random.default_rng(4).integers(0, 2, (50, 21), dtype=np.int8) * 2 - 1
    sums = signs.astype(np.int64) @ np.array(values)
    hits, both = int((sums >= 1).sum()), int((abs(sums) >= 1).sum())
    assert (hits, both) == (24, 50)
    assert sign_flip(values, 3, p) == SignFlipResult(
        21, "monte-carlo", 50, 4, Fraction(1, 63), Fraction(25, 51), Fraction(1)
    )


def test_a_monte_carlo_draw_equal_to_the_observed_sum_counts_as_reaching_it() -> None:
    # 21 cases: twenty zeros and a 2. Every draw is ±2: the plus draws tie the observed sum.
    values = [0] * 20 + [2]
    p = analysis_params(bootstrap_resamples=10, bootstrap_seed=1)
    signs = np.random.default_rng(1).integers(0, 2, (10, 21), dtype=np.int8) * 2 - 1
    plus = int((signs[:, 20] == 1).sum())
    assert 0 < plus < 10
    assert sign_flip(values, 1, p) == SignFlipResult(
        21, "monte-carlo", 10, 1, Fraction(2, 21), Fraction(1 + plus, 11), Fraction(1)
    )


def test_the_monte_carlo_sums_are_exact_integers_beyond_float_precision() -> None:
    # [2^54, 1, 0, …]: in floats 2^54 − 1 rounds up to 2^54 and would tie the observed 2^54 + 1;
    # in integers only the draws with both leading signs plus reach it.
    values = [2**54, 1] + [0] * 19
    p = analysis_params(bootstrap_resamples=40, bootstrap_seed=3)
    signs = np.random.default_rng(3).integers(0, 2, (40, 21), dtype=np.int8) * 2 - 1
    first, both = signs[:, 0] == 1, (signs[:, 0] == 1) & (signs[:, 1] == 1)
    same = (signs[:, 0] == signs[:, 1]).sum()
    assert 0 < both.sum() < first.sum() and same < 40
    r = sign_flip(values, 1, p)
    assert (r.p_one_sided, r.p_two_sided) == (Fraction(1 + both.sum(), 41), Fraction(1 + same, 41))


# bca_interval ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "note"),
    [
        ([], "undefined: fewer than two cases"),
        ([3], "undefined: fewer than two cases"),
        ([1, 1], "undefined: every case has the same value"),
    ],
)
def test_bca_is_undefined_below_two_cases_and_without_spread(values: list[int], note: str) -> None:
    p = analysis_params(bootstrap_resamples=7, bootstrap_seed=5)
    assert bca_interval(values, 2, p) == BcaResult(None, None, 7, 5, note)


def test_bca_of_two_different_cases_is_scipys() -> None:
    r = bca_interval([1, 2], 2, analysis_params())
    assert r == BcaResult(0.5, 1.0, 2000, 20260930, "")


def test_bca_needs_only_one_case_to_differ_from_the_first() -> None:
    p = analysis_params(bootstrap_resamples=300, bootstrap_seed=6, confidence=0.5)
    r = bca_interval([1, 1, 3, 1], 2, p)
    want = stats.bootstrap(
        (np.array([1, 1, 3, 1]) / 2,), np.mean, confidence_level=0.5, n_resamples=300,
        method="BCa", rng=np.random.default_rng(6),
    ).confidence_interval  # fmt: skip
    assert r == BcaResult(float(want.low), float(want.high), 300, 6, "")
    assert 0.5 <= r.lower < r.upper <= 1.5


def test_a_bca_correction_that_is_not_finite_is_named() -> None:
    # [0, 4]/2 with the one resample seed 0 draws: scipy's bias correction is infinite.
    p = analysis_params(bootstrap_resamples=1, bootstrap_seed=0)
    assert bca_interval([0, 4], 2, p) == BcaResult(
        None, None, 1, 0, "undefined: the BCa correction is not finite"
    )
    assert bca_interval([0, 4], 2, analysis_params(bootstrap_resamples=1, bootstrap_seed=1)) == (
        BcaResult(1.0, 1.0, 1, 1, "")
    )


def test_a_bca_correction_that_is_not_finite_is_reported_without_a_warning() -> None:
    p = analysis_params(bootstrap_resamples=1, bootstrap_seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bca_interval([0, 4], 2, p).note == "undefined: the BCa correction is not finite"
