"""The case-cluster statistics beside the decision, each against a plain reference.

- ``cluster_interval`` is the preregistered interval: the same bounds as ``percentile_interval``
  (the decision's own), exact or Monte Carlo, at every confidence.
- ``quick_decision`` is ``decide`` without the distribution: the same verdict on every input,
  at the threshold, at the minimum case count and at the exact/Monte Carlo switch.
- ``sign_flip`` counts every one of the 2^n sign patterns (brute force below), exact up to 20
  cases and seeded Monte Carlo from 21, with p = (1 + hits) / (1 + draws).
- ``bca_interval`` is scipy's BCa with the protocol's seed, or a reason when it is undefined.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from support.analysis import analysis_params

from needlepoint.analysis.bootstrap import percentile_interval
from needlepoint.analysis.clustered import (
    SIGN_FLIP_EXACT_MAX,
    bca_interval,
    cluster_interval,
    quick_decision,
    sign_flip,
)
from needlepoint.analysis.decision import NOT_EVALUABLE, decide

FUZZ = settings(derandomize=True, max_examples=80, deadline=None)


@FUZZ
@given(
    values=st.lists(st.integers(-4, 4), min_size=1, max_size=9),
    confidence=st.sampled_from([0.95, 0.9, 0.5, 0.9512345, 0.99]),
    exact_max=st.integers(0, 9),
)
def test_cluster_interval_is_the_percentile_interval(
    values: list[int], confidence: float, exact_max: int
) -> None:
    p = analysis_params(confidence=confidence, exact_bootstrap_max_cases=exact_max)
    got = cluster_interval(values, 4, p)
    want = percentile_interval(
        values, confidence, exact_max=exact_max, resamples=p.bootstrap_resamples,
        seed=p.bootstrap_seed, denominator=4,
    )  # fmt: skip
    assert (got.lower, got.upper) == (want.lower_exact, want.upper_exact)
    assert got.estimate == Fraction(sum(values), 4 * len(values))
    assert got.method == want.method and got.cases == len(values)


@FUZZ
@given(
    values=st.lists(st.integers(-2, 4), min_size=0, max_size=8),
    threshold=st.sampled_from([0.1, 0.0, 0.25, 0.5]),
    minimum=st.integers(1, 4),
)
def test_quick_decision_is_decide(values: list[int], threshold: float, minimum: int) -> None:
    p = analysis_params(threshold=threshold, min_complete_cases=minimum)
    quick = quick_decision(values, 4, p)
    full = decide(values, 4, p)
    assert quick.decision == full.decision
    if full.decision != NOT_EVALUABLE:
        assert full.interval is not None
        assert (str(quick.estimate), str(quick.lower), str(quick.upper)) == (
            full.estimate_exact,
            full.interval.lower_exact,
            full.interval.upper_exact,
        )


def test_quick_decision_at_the_minimum_and_at_the_threshold() -> None:
    p = analysis_params(min_complete_cases=3, threshold=0.25, confidence=0.5)
    assert quick_decision([1, 1], 4, p).decision == NOT_EVALUABLE
    assert quick_decision([], 4, p).decision == NOT_EVALUABLE
    assert quick_decision([1, 1, 1], 4, p).decision == "supported"  # exactly 0.25
    assert quick_decision([1, 1, 0], 4, p).decision == "not supported"  # one unit below


def brute_force(values: list[int]) -> tuple[Fraction, Fraction]:
    observed = sum(values)
    sums = [sum(s * v for s, v in zip(signs, values, strict=True))
            for signs in itertools.product((1, -1), repeat=len(values))]  # fmt: skip
    total = len(sums)
    return (
        Fraction(sum(x >= observed for x in sums), total),
        Fraction(sum(abs(x) >= abs(observed) for x in sums), total),
    )


@FUZZ
@given(st.lists(st.integers(-4, 4), min_size=1, max_size=9))
def test_the_exact_sign_flip_counts_every_pattern(values: list[int]) -> None:
    r = sign_flip(values, 4, analysis_params())
    assert (r.p_one_sided, r.p_two_sided) == brute_force(values)
    assert r.method == "exact" and r.patterns == 2 ** len(values) and r.seed is None
    assert r.statistic == Fraction(sum(values), 4 * len(values))


def test_the_gemma_case_differences_give_3_32() -> None:
    # The committed Gemma run's seven case differences, in halves: 1/2, 1, 1/2, 1/2, -1/2, 1/2, 0.
    r = sign_flip([1, 2, 1, 1, -1, 1, 0], 2, analysis_params())
    assert (r.p_one_sided, r.p_two_sided) == (Fraction(3, 32), Fraction(3, 16))
    assert r.statistic == Fraction(5, 14) and r.patterns == 128


def test_exact_up_to_twenty_cases_then_seeded_monte_carlo() -> None:
    p = analysis_params(bootstrap_resamples=500, bootstrap_seed=7)
    exact = sign_flip([1] * SIGN_FLIP_EXACT_MAX, 1, p)
    assert exact.method == "exact" and exact.patterns == 2**20
    assert exact.p_one_sided == Fraction(1, 2**20)  # only the observed pattern reaches 20
    values = [1, -1, 1, 0, 1] * 4 + [1]  # 21 cases, sum 9 of 17
    mc = sign_flip(values, 1, p)
    assert (mc.method, mc.patterns, mc.seed) == ("monte-carlo", 500, 7)
    signs = np.random.default_rng(7).integers(0, 2, (500, 21), dtype=np.int8) * 2 - 1
    sums = signs.astype(int) @ np.array(values)
    hits, both = int((sums >= sum(values)).sum()), int((abs(sums) >= sum(values)).sum())
    assert 0 < hits < both < 500, (hits, both)
    # The observed pattern counts as one draw: p = (1 + hits) / (1 + draws).
    assert (mc.p_one_sided, mc.p_two_sided) == (Fraction(1 + hits, 501), Fraction(1 + both, 501))
    assert mc == sign_flip(values, 1, p)
    assert sign_flip(values, 1, analysis_params(bootstrap_resamples=500, bootstrap_seed=8)) != mc


def test_bca_is_scipys_with_the_protocols_seed() -> None:
    p = analysis_params(bootstrap_resamples=3000, bootstrap_seed=11)
    values = [2, 3, 2, -3, 4, 4, 3, 4]
    r = bca_interval(values, 4, p)
    want = stats.bootstrap(
        (np.array(values) / 4,), np.mean, method="BCa", n_resamples=3000,
        rng=np.random.default_rng(11),
    ).confidence_interval  # fmt: skip
    assert (r.lower, r.upper) == (want.low, want.high)
    assert (r.resamples, r.seed, r.note) == (3000, 11, "")


@pytest.mark.parametrize(
    ("values", "note"),
    [
        ([3], "undefined: fewer than two cases"),
        ([2, 2, 2], "undefined: every case has the same value"),
    ],
)
def test_bca_says_why_it_has_no_interval(values: list[int], note: str) -> None:
    r = bca_interval(values, 4, analysis_params())
    assert (r.lower, r.upper, r.note) == (None, None, note)
