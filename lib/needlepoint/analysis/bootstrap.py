"""Case-cluster percentile bootstrap of a mean, exact where it can be and seeded where it cannot.

The values are integer numerators over one common denominator (the metric is computed that
way, ``primary.numerators``), so every resample sum is an exact integer and neither a tie nor
the sign of a bound depends on how a binary fraction rounds.

With up to ``exact_max`` cases every ordered resample is counted, so the interval involves no
randomness at all: the number of resamples whose sum is ``lowest + j`` is the coefficient of
``x**j`` in ``(sum_i x**(v_i - min))**n`` (``integer_sum_weights``, for many sets of cases at
once) -- the distribution that enumerating the multisets with their multinomial weights gives.
Above that, a Monte Carlo bootstrap draws ``numpy.random.default_rng(seed).integers(0, n,
(resamples, n))`` (``resample_indices``) -- the same draw that ``scipy.stats.bootstrap`` makes
for the same generator -- and reports the seed.

Both use one quantile definition: ``Q(p)`` is the smallest resample mean whose cumulative
bootstrap probability is at least ``p`` (the inverse CDF). Probabilities are compared as exact
fractions, so ``1 - 0.95`` never turns 250 resamples into 251.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from needlepoint.analysis.record import AnalysisParameters

EXACT = "exact"
MONTE_CARLO = "monte-carlo"
MAX_EXACT = 13
# How far apart a set's numerators may lie for the exact count: the polynomial holds one
# integer per reachable resample sum (n times that range), which must stay a small array.
MAX_EXACT_SPAN = 1 << 20


@dataclass(frozen=True)
class BootstrapResult:
    """A percentile interval with the bootstrap distribution it came from.

    ``values`` are the distinct resample means in increasing order and ``weights`` their
    integer multiplicities out of ``total`` (ordered resamples for the exact method, resample
    counts for Monte Carlo), so probabilities are exact fractions ``weights / total``.
    ``resamples`` counts the multisets of cases (exact) or the resamples drawn (Monte Carlo).
    """

    method: str
    n: int
    confidence: Fraction
    lower: float
    upper: float
    estimate: float
    lower_exact: Fraction
    upper_exact: Fraction
    seed: int | None
    resamples: int
    values: np.ndarray
    weights: np.ndarray
    total: int
    degenerate: bool


def as_fraction(p: float | Fraction | str) -> Fraction:
    """A probability as an exact fraction: 0.95 means 19/20, not the nearest binary double."""
    if isinstance(p, Fraction):
        return p
    if isinstance(p, float):
        return Fraction(repr(p))
    return Fraction(p)


def tail_probabilities(confidence: float | Fraction | str) -> tuple[Fraction, Fraction]:
    """The two percentile levels of a two-sided interval, e.g. 0.95 -> (1/40, 39/40)."""
    c = as_fraction(confidence)
    if not 0 < c < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    alpha = (1 - c) / 2
    return alpha, 1 - alpha


def quantile_need(total: int, p: Fraction) -> int:
    """The cumulative weight ``Q(p)`` must reach: ``ceil(p * total)``, and at least one unit,
    so that ``Q(0)`` is the smallest value, not "before" it."""
    return max(math.ceil(p * total), 1)


def inverse_cdf_index(cum_weights: np.ndarray, total: int, p: Fraction) -> int:
    """Index of the first sorted value whose cumulative weight reaches ``p * total``."""
    return int(np.searchsorted(cum_weights, quantile_need(total, p), side="left"))


def _check_size(n: int) -> None:
    if n == 0:
        raise ValueError("the bootstrap needs at least one value")
    if n > MAX_EXACT:
        # n**n ordered resamples stop fitting in int64.
        raise ValueError(f"exact enumeration supports at most {MAX_EXACT} values, got {n}")


def integer_sum_weights(values: np.ndarray) -> tuple[int, np.ndarray]:
    """Exact resample-sum distributions for many small sets of integers at once.

    ``values`` is (sets × n) integers. The number of ordered resamples of a set with sum
    ``lowest + j`` is the coefficient of ``x**j`` in ``(sum_i x**(v_i - min))**n``, computed by
    n - 1 exact integer polynomial products for all sets together. Returns ``lowest`` and the
    (sets × span) weights, each row summing to ``n**n``.
    """
    v = np.asarray(values, dtype=np.int64)
    if v.ndim != 2 or v.shape[1] == 0:
        raise ValueError("integer_sum_weights needs a (sets × n) array with n >= 1")
    _check_size(v.shape[1])
    sets, n = v.shape
    low, high = int(v.min()), int(v.max())
    if (high - low) * n >= MAX_EXACT_SPAN:
        raise ValueError(
            f"exact enumeration: numerators from {low} to {high} span too many resample sums"
        )
    base = np.zeros((sets, high - low + 1), dtype=np.int64)
    np.add.at(base, (np.repeat(np.arange(sets), n), (v - low).ravel()), 1)
    power = base
    for _ in range(n - 1):
        grown = np.zeros((sets, power.shape[1] + base.shape[1] - 1), dtype=np.int64)
        for shift in np.flatnonzero(base.any(axis=0)):
            grown[:, shift : shift + power.shape[1]] += base[:, shift, None] * power
        power = grown
    return low * n, power


def resample_indices(n: int, resamples: int, seed: int) -> np.ndarray:
    """The Monte Carlo bootstrap's draw: which of ``n`` cases each resample takes, seeded.

    uint32 indices draw the same stream as scipy's int64 ones, in half the memory.
    """
    return np.random.default_rng(seed).integers(0, n, (resamples, n), dtype=np.uint32)


def _numerators(values: np.ndarray | Sequence[float]) -> np.ndarray:
    """The values as int64 numerators, refusing what would not keep every sum exact."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        raise ValueError("the bootstrap needs at least one value")
    if not np.all(np.isfinite(v)):
        raise ValueError("bootstrap values must be finite")
    if not np.all(v == np.round(v)):
        raise ValueError("bootstrap values must be integer numerators over one denominator")
    # Below 2**53 every resample sum, and each mean's float, is exact.
    if float(np.abs(v).sum()) * v.size >= 2.0**53:
        raise ValueError("bootstrap numerators too large for exact resample sums")
    return v.astype(np.int64)


def percentile_interval(
    values: np.ndarray | Sequence[float],
    confidence: float | Fraction | str = Fraction(19, 20),
    *,
    exact_max: int = 12,
    resamples: int = 10_000,
    seed: int | None = None,
    denominator: int = 1,
) -> BootstrapResult:
    """Percentile bootstrap interval of the mean of ``values / denominator``.

    ``values`` are integer numerators with a common ``denominator``: every resample sum is
    exact, and the bounds are exact fractions.
    """
    nums = _numerators(values)
    n = nums.size
    lo_p, hi_p = tail_probabilities(confidence)
    if n <= exact_max:
        lowest, counts = integer_sum_weights(nums[None, :])
        reachable = np.flatnonzero(counts[0])
        sums, weights = lowest + reachable, counts[0][reachable]
        # Every multiset of n cases drawn from n, once each: C(2n - 1, n) of them.
        total, method, used_seed, count = n**n, EXACT, None, math.comb(2 * n - 1, n)
    else:
        if seed is None:
            raise ValueError("a Monte Carlo bootstrap needs a seed")
        drawn = nums[resample_indices(n, resamples, seed)].sum(axis=-1)
        sums, weights = np.unique(drawn, return_counts=True)
        total, method, used_seed, count = int(resamples), MONTE_CARLO, int(seed), int(resamples)
    cum = np.cumsum(weights)
    div = n * denominator
    lower = Fraction(int(sums[inverse_cdf_index(cum, total, lo_p)]), div)
    upper = Fraction(int(sums[inverse_cdf_index(cum, total, hi_p)]), div)
    return BootstrapResult(
        method=method,
        n=n,
        confidence=as_fraction(confidence),
        lower=float(lower),
        upper=float(upper),
        estimate=float(nums.mean()) / denominator,
        lower_exact=lower,
        upper_exact=upper,
        seed=used_seed,
        resamples=count,
        values=sums / div,
        weights=weights.astype(np.int64),
        total=total,
        degenerate=bool(np.all(nums == nums[0])),
    )


def case_interval(
    numerators: Sequence[int], denominator: int, params: AnalysisParameters
) -> BootstrapResult:
    """The preregistered interval of the mean of ``numerators / denominator``: the protocol's
    confidence, exact limit, resamples and seed."""
    return percentile_interval(
        numerators,
        float(params.confidence),
        exact_max=int(params.exact_bootstrap_max_cases),
        resamples=int(params.bootstrap_resamples),
        seed=int(params.bootstrap_seed),
        denominator=denominator,
    )
