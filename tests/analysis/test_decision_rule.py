"""The preregistered decision at its boundaries, and against a brute-force reading of the rule.

Rule (PROTOCOL.md): with fewer than ``min_complete_cases`` complete cases the run is not
evaluable; otherwise it is supported exactly when the mean difference is at least the
threshold and the percentile interval's lower bound is above 0. The reference below states
that rule over every ordered resample (n**n of them), sharing no code with the analysis.
"""

from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.analysis import analysis_params

from needlepoint.analysis.decision import (
    NOT_EVALUABLE,
    NOT_SUPPORTED,
    SUPPORTED,
    decide,
    fmt,
)
from needlepoint.analysis.record import AnalysisParameters, Mass

QUANTILE = "inverse CDF: Q(p) = smallest resample mean with P(mean <= Q) >= p"


def params(**kw: object) -> AnalysisParameters:
    return analysis_params(**kw)


def brute_quantile(values: list[int], denominator: int, p: Fraction) -> Fraction:
    """Q(p) over every ordered resample: the smallest mean whose cumulative share reaches p."""
    n = len(values)
    sums = Counter(sum(pick) for pick in itertools.product(values, repeat=n))
    acc = 0
    for s in sorted(sums):
        acc += sums[s]
        if Fraction(acc, n**n) >= p:
            return Fraction(s, n * denominator)
    raise AssertionError("unreachable")


def brute_decision(values: list[int], denominator: int, p: AnalysisParameters) -> str:
    if len(values) < p.min_complete_cases:
        return NOT_EVALUABLE
    alpha = (1 - Fraction(str(p.confidence))) / 2
    mean = Fraction(sum(values), len(values) * denominator)
    lower = brute_quantile(values, denominator, alpha)
    ok = mean >= Fraction(str(p.threshold)) and lower > 0
    return SUPPORTED if ok else NOT_SUPPORTED


# --- how many complete cases make a run evaluable ---------------------------------------------


@pytest.mark.parametrize(
    ("n", "reason"),
    [
        (0, "0 complete cases; the protocol requires at least 2"),
        (1, "1 complete case; the protocol requires at least 2"),
    ],
)
def test_fewer_than_two_complete_cases_are_not_evaluable(n: int, reason: str) -> None:
    out = decide([4] * n, 4, params())
    assert (out.decision, out.reason) == (NOT_EVALUABLE, reason)
    assert (out.estimate, out.estimate_exact, out.interval, out.threshold) == (
        None,
        None,
        None,
        0.1,
    )


def test_exactly_two_complete_cases_are_evaluable() -> None:
    out = decide([4, 4], 4, params())
    assert out.decision == SUPPORTED and out.interval is not None and out.interval.cases == 2


def test_the_minimum_comes_from_the_protocol() -> None:
    out = decide([4, 4], 4, params(min_complete_cases=3))
    assert (out.decision, out.reason) == (
        NOT_EVALUABLE,
        "2 complete cases; the protocol requires at least 3",
    )
    assert decide([4, 4, 4], 4, params(min_complete_cases=3)).decision == SUPPORTED


# --- the threshold and the lower bound, each exactly at its edge --------------------------------


def test_exactly_the_threshold_with_a_positive_lower_bound_is_supported() -> None:
    # Ten cases, one at 0.2, one at 0, eight at 0.1: the mean is exactly 1/10, and no resample
    # mean at the 2.5% point is 0 or below.
    out = decide([2, 0, 1, 1, 1, 1, 1, 1, 1, 1], 10, params())
    assert out.estimate_exact == "1/10" and out.interval is not None
    assert Fraction(out.interval.lower_exact) > 0
    assert out.decision == SUPPORTED
    assert out.reason == (
        "difference 0.1 >= threshold 0.1 and the 95% interval's lower bound "
        f"{fmt(Fraction(out.interval.lower_exact))} is above 0"
    )


def test_exactly_the_threshold_with_a_lower_bound_of_zero_is_not_supported() -> None:
    # Two cases, 0 and 0.2: a quarter of all resamples have mean 0, so Q(1/40) = 0.
    out = decide([0, 2], 10, params())
    assert out.estimate_exact == "1/10" and out.interval is not None
    assert out.interval.lower_exact == "0" and out.interval.upper_exact == "1/5"
    assert (out.decision, out.reason) == (
        NOT_SUPPORTED,
        "the 95% interval's lower bound 0 is not above 0",
    )


def test_just_below_the_threshold_is_not_supported_however_sure() -> None:
    out = decide([1] * 11, 11, params())  # every case exactly 1/11 < 1/10
    assert out.interval is not None and out.interval.lower_exact == "1/11"
    assert (out.decision, out.reason) == (
        NOT_SUPPORTED,
        "difference 0.09091 is below the threshold 0.1",
    )


def test_both_reasons_are_given_when_both_fail() -> None:
    out = decide([-1, 1], 4, params())
    assert out.reason == (
        "difference 0 is below the threshold 0.1 and the 95% interval's lower bound -0.25 is "
        "not above 0"
    )


def test_a_zero_threshold_still_needs_a_positive_lower_bound() -> None:
    assert decide([0, 0], 4, params(threshold=0.0)).decision == NOT_SUPPORTED
    assert decide([1, 1], 4, params(threshold=0.0)).decision == SUPPORTED


def test_other_confidence_levels_are_named_in_the_reason() -> None:
    out = decide([0, 2], 10, params(confidence=0.5))
    # At 50% the lower point is Q(1/4): exactly the 0's cumulative share, so Q(1/4) = 0 (a tie
    # is resolved to the smaller value), and the upper point Q(3/4) is 0.1.
    assert out.interval is not None
    assert (out.interval.lower_exact, out.interval.upper_exact) == ("0", "1/10")
    assert out.reason == "the 50% interval's lower bound 0 is not above 0"


# --- what the decision records ---------------------------------------------------------------


def test_the_exact_interval_record() -> None:
    out = decide([0, 2], 10, params())
    assert out.threshold == 0.1 and out.estimate == 0.1
    iv = out.interval
    assert iv is not None
    assert (iv.confidence, iv.lower, iv.upper) == (0.95, 0.0, 0.2)
    assert (iv.method, iv.seed, iv.resamples, iv.cases, iv.degenerate) == (
        "exact",
        None,
        3,
        2,
        False,
    )
    assert iv.quantile == QUANTILE
    assert iv.distribution == (Mass(0.0, 1), Mass(0.1, 2), Mass(0.2, 1))
    assert iv.total_weight == 4


def test_the_monte_carlo_interval_record() -> None:
    out = decide([4, 0, 2, 4, -2] * 3, 4, params(bootstrap_resamples=500, bootstrap_seed=7))
    iv = out.interval
    assert iv is not None
    assert (iv.method, iv.seed, iv.resamples, iv.cases, iv.total_weight) == (
        "monte-carlo",
        7,
        500,
        15,
        500,
    )
    assert sum(m.weight for m in iv.distribution) == 500
    assert [m.value for m in iv.distribution] == sorted({m.value for m in iv.distribution})


def test_the_exact_limit_comes_from_the_protocol() -> None:
    values = [4, 0, 2, 4, -2, 1]
    assert decide(values, 4, params(exact_bootstrap_max_cases=6)).interval.method == "exact"
    mc = decide(values, 4, params(exact_bootstrap_max_cases=5)).interval
    assert (mc.method, mc.resamples, mc.seed) == ("monte-carlo", 2000, 20260930)


def test_a_degenerate_interval_is_flagged() -> None:
    iv = decide([3, 3, 3], 4, params()).interval
    assert iv is not None and iv.degenerate and iv.lower == iv.upper == 0.75


# --- the rule against brute force ---------------------------------------------------------------


@settings(derandomize=True, max_examples=150, deadline=None)
@given(
    values=st.lists(st.integers(-4, 4), max_size=5),
    denominator=st.sampled_from([1, 2, 4, 10]),
    threshold=st.sampled_from([0.0, 0.1, 0.25, 0.5]),
    confidence=st.sampled_from([0.5, 0.8, 0.9, 0.95]),
    minimum=st.integers(1, 3),
)
def test_decision_matches_brute_force(
    values: list[int], denominator: int, threshold: float, confidence: float, minimum: int
) -> None:
    p = params(threshold=threshold, confidence=confidence, min_complete_cases=minimum)
    out = decide(values, denominator, p)
    assert out.decision == brute_decision(values, denominator, p)
    if out.interval is not None:
        alpha = (1 - Fraction(str(confidence))) / 2
        lower = brute_quantile(values, denominator, alpha)
        upper = brute_quantile(values, denominator, 1 - alpha)
        assert (out.interval.lower_exact, out.interval.upper_exact) == (str(lower), str(upper))
        assert out.estimate_exact == str(Fraction(sum(values), len(values) * denominator))
