"""Case-cluster inference beside the preregistered decision: the same interval, a sign-flip test,
and a second (BCa) interval.

``cluster_interval`` is the preregistered percentile interval (``bootstrap.percentile_interval``)
for any per-case integer numerators: exact up to the protocol's ``exact_bootstrap_max_cases``,
seeded Monte Carlo above. Its exact branch counts the ordered resamples of every resample sum by
integer polynomial powers (``bootstrap.integer_sum_weights``), the same distribution as
enumerating the multisets but fast enough for the dozens of intervals the robustness panel takes.

``sign_flip`` is written here rather than taken from scipy because it must be exact: the p-value
is a fraction of the 2^n sign patterns, counted in integers (``scipy.stats.permutation_test``
enumerates in floating point and cannot give that fraction).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from needlepoint.analysis.bootstrap import (
    EXACT,
    MONTE_CARLO,
    integer_sum_weights,
    inverse_cdf_index,
    percentile_interval,
    tail_probabilities,
)
from needlepoint.analysis.decision import NOT_EVALUABLE, NOT_SUPPORTED, SUPPORTED, meets_rule
from needlepoint.analysis.record import AnalysisParameters

# Up to this many cases the sign-flip test counts all 2^n patterns; above it, Monte Carlo.
SIGN_FLIP_EXACT_MAX = 20


@dataclass(frozen=True)
class ClusterResult:
    """An estimate with its case-cluster percentile interval, as exact fractions."""

    cases: int
    estimate: Fraction
    lower: Fraction
    upper: Fraction
    method: str


def cluster_interval(
    numerators: Sequence[int], denominator: int, params: AnalysisParameters
) -> ClusterResult:
    """The preregistered percentile interval of the mean of ``numerators / denominator``."""
    nums = [int(v) for v in numerators]
    n = len(nums)
    if n == 0:
        raise ValueError("an interval needs at least one case")
    estimate = Fraction(sum(nums), n * denominator)
    if n <= int(params.exact_bootstrap_max_cases):
        lowest, weights = integer_sum_weights(np.array([nums], dtype=np.int64))
        cum = np.cumsum(weights[0])
        total = n**n
        lo_p, hi_p = tail_probabilities(float(params.confidence))
        lo = lowest + inverse_cdf_index(cum, total, lo_p)
        hi = lowest + inverse_cdf_index(cum, total, hi_p)
        return ClusterResult(
            n, estimate, Fraction(lo, n * denominator), Fraction(hi, n * denominator), EXACT
        )
    boot = percentile_interval(
        nums,
        float(params.confidence),
        exact_max=int(params.exact_bootstrap_max_cases),
        resamples=int(params.bootstrap_resamples),
        seed=int(params.bootstrap_seed),
        denominator=denominator,
    )
    assert boot.lower_exact is not None and boot.upper_exact is not None  # integer numerators
    return ClusterResult(n, estimate, boot.lower_exact, boot.upper_exact, MONTE_CARLO)


@dataclass(frozen=True)
class QuickDecision:
    """The preregistered decision for a set of case numerators, without its distribution."""

    cases: int
    estimate: Fraction | None
    lower: Fraction | None
    upper: Fraction | None
    decision: str


def quick_decision(
    numerators: Sequence[int], denominator: int, params: AnalysisParameters
) -> QuickDecision:
    """``decision.decide`` for the robustness scenarios: the same rule, the same interval."""
    n = len(numerators)
    if n < int(params.min_complete_cases) or n == 0:
        return QuickDecision(n, None, None, None, NOT_EVALUABLE)
    r = cluster_interval(numerators, denominator, params)
    verdict = SUPPORTED if meets_rule(r.estimate, r.lower, params) else NOT_SUPPORTED
    return QuickDecision(n, r.estimate, r.lower, r.upper, verdict)


@dataclass(frozen=True)
class SignFlipResult:
    """The sign-flip (randomisation) test of the case values' sum."""

    cases: int
    method: str
    patterns: int
    seed: int | None
    statistic: Fraction
    p_one_sided: Fraction
    p_two_sided: Fraction


def _signed_sum_counts(values: Sequence[int]) -> tuple[int, np.ndarray]:
    """How many of the 2^n sign patterns give each signed sum: (lowest sum, counts)."""
    span = sum(abs(v) for v in values)
    counts = np.zeros(2 * span + 1, dtype=np.int64)
    counts[span] = 1  # the empty sum, at offset ``span``
    for v in values:
        a = abs(v)
        if a == 0:
            counts = counts * 2  # a zero keeps the sum under both signs
            continue
        shifted = np.zeros_like(counts)
        shifted[a:] += counts[:-a]  # +|v|
        shifted[:-a] += counts[a:]  # -|v|
        counts = shifted
    return -span, counts


def sign_flip(
    numerators: Sequence[int], denominator: int, params: AnalysisParameters
) -> SignFlipResult:
    """One- and two-sided p of the sum of case values under random signs.

    Exact up to ``SIGN_FLIP_EXACT_MAX`` cases: every pattern counted once, p a fraction of
    2^n. Above, ``default_rng(bootstrap_seed)`` draws ``bootstrap_resamples`` patterns and
    p = (1 + hits) / (1 + draws), counting the observed pattern as one draw.
    """
    nums = [int(v) for v in numerators]
    n = len(nums)
    if n == 0:
        raise ValueError("the sign-flip test needs at least one case")
    observed = sum(nums)
    if n <= SIGN_FLIP_EXACT_MAX:
        lowest, counts = _signed_sum_counts(nums)
        sums = np.arange(lowest, lowest + counts.size)
        total = 2**n
        upper = int(counts[sums >= observed].sum())
        both = int(counts[np.abs(sums) >= abs(observed)].sum())
        return SignFlipResult(
            n,
            EXACT,
            total,
            None,
            Fraction(observed, n * denominator),
            Fraction(upper, total),
            Fraction(both, total),
        )
    draws, seed = int(params.bootstrap_resamples), int(params.bootstrap_seed)
    signs = np.random.default_rng(seed).integers(0, 2, (draws, n), dtype=np.int8) * 2 - 1
    stats = signs.astype(np.int64) @ np.array(nums, dtype=np.int64)
    upper = int((stats >= observed).sum())
    both = int((np.abs(stats) >= abs(observed)).sum())
    return SignFlipResult(
        n,
        MONTE_CARLO,
        draws,
        seed,
        Fraction(observed, n * denominator),
        Fraction(1 + upper, 1 + draws),
        Fraction(1 + both, 1 + draws),
    )


@dataclass(frozen=True)
class BcaResult:
    """The BCa interval (scipy) of the case values' mean, or why there is none."""

    lower: float | None
    upper: float | None
    resamples: int
    seed: int
    note: str


def bca_interval(
    numerators: Sequence[int], denominator: int, params: AnalysisParameters
) -> BcaResult:
    """``scipy.stats.bootstrap(method="BCa")`` on the case values, seeded with the protocol's
    bootstrap seed; None bounds (with the reason) where BCa is undefined."""
    import warnings

    from scipy import stats

    values = np.asarray(numerators, dtype=np.float64) / denominator
    draws, seed = int(params.bootstrap_resamples), int(params.bootstrap_seed)
    if values.size < 2 or np.all(values == values[0]):
        why = "fewer than two cases" if values.size < 2 else "every case has the same value"
        return BcaResult(None, None, draws, seed, f"undefined: {why}")
    with warnings.catch_warnings():
        # A degenerate jackknife or resample set gives NaN with a warning; NaN is reported.
        warnings.simplefilter("ignore")
        res = stats.bootstrap(
            (values,),
            np.mean,
            confidence_level=float(params.confidence),
            n_resamples=draws,
            method="BCa",
            rng=np.random.default_rng(seed),
        )
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return BcaResult(None, None, draws, seed, "undefined: the BCa correction is not finite")
    return BcaResult(lo, hi, draws, seed, "")
