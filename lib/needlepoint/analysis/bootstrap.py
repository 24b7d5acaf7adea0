"""Case-cluster percentile bootstrap of a mean, exact where it can be and seeded where it cannot.

With up to ``exact_max`` cases every multiset of resampled cases is enumerated with its
multinomial weight, so the interval involves no randomness at all. Above that, a Monte Carlo
bootstrap draws ``numpy.random.default_rng(seed).integers(0, n, (resamples, n))`` -- the same
draw that ``scipy.stats.bootstrap`` makes for the same generator -- and reports the seed.

Both use one quantile definition: ``Q(p)`` is the smallest resample mean whose cumulative
bootstrap probability is at least ``p`` (the inverse CDF). Probabilities are compared as exact
fractions, so ``1 - 0.95`` never turns 250 resamples into 251.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

EXACT = "exact"
MONTE_CARLO = "monte-carlo"
MAX_EXACT = 13


@dataclass(frozen=True)
class BootstrapResult:
    """A percentile interval with the bootstrap distribution it came from.

    ``values`` are the distinct resample means in increasing order and ``weights`` their
    integer multiplicities out of ``total`` (multinomial weights for the exact method, resample
    counts for Monte Carlo), so probabilities are exact fractions ``weights / total``.
    """

    method: str
    n: int
    confidence: Fraction
    lower: float
    upper: float
    estimate: float
    lower_exact: Fraction | None
    upper_exact: Fraction | None
    seed: int | None
    resamples: int
    values: np.ndarray
    weights: np.ndarray
    total: int
    degenerate: bool

    @property
    def probabilities(self) -> np.ndarray:
        """Probability of each distinct resample mean."""
        return self.weights / self.total

    def prob_at_most(self, x: float) -> Fraction:
        """Exact bootstrap probability that a resample mean is <= x."""
        k = int(np.searchsorted(self.values, x, side="right"))
        return Fraction(int(self.weights[:k].sum()), self.total)


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


def inverse_cdf_index(cum_weights: np.ndarray, total: int, p: Fraction) -> int:
    """Index of the first sorted value whose cumulative weight reaches ``p * total``."""
    need = math.ceil(p * total)
    # At least one unit of weight: Q(0) is the smallest value, not "before" it.
    return int(np.searchsorted(cum_weights, max(need, 1), side="left"))


def _binomials(n: int) -> np.ndarray:
    """Table C[r, c] of binomial coefficients for 0 <= c <= r <= n, as exact int64."""
    table = np.zeros((n + 1, n + 1), dtype=np.int64)
    for r in range(n + 1):
        for c in range(r + 1):
            table[r, c] = math.comb(r, c)
    return table


def _compositions(
    v: np.ndarray, draws: int, multiplicity: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Sums and weights of every way to split ``draws`` draws over the values ``v``.

    Each partial split with ``r`` draws left branches into ``r + 1`` children (0..r draws of
    the next value), so each value costs a few numpy calls. A value standing for ``h`` equal
    cases contributes ``h**c`` to the weight of taking it ``c`` times.
    """
    comb = _binomials(draws)
    remaining = np.array([draws], dtype=np.int64)
    sums = np.zeros(1, dtype=np.float64)
    weights = np.ones(1, dtype=np.int64)
    for j in range(v.size - 1):
        fan = remaining + 1
        parent = np.repeat(np.arange(remaining.size), fan)
        starts = np.cumsum(fan) - fan
        take = np.arange(parent.size, dtype=np.int64) - np.repeat(starts, fan)
        r = remaining[parent]
        weights = weights[parent] * comb[r, take]
        if multiplicity is not None:
            weights = weights * multiplicity[j] ** take
        sums = sums[parent] + take * v[j]
        remaining = r - take
    if multiplicity is not None:
        weights = weights * multiplicity[-1] ** remaining
    return sums + remaining * v[-1], weights


def _check_size(n: int) -> None:
    if n == 0:
        raise ValueError("the bootstrap needs at least one value")
    if n > MAX_EXACT:
        # n**n stops fitting in int64 and C(2n-1, n) multisets stop fitting in memory.
        raise ValueError(f"exact enumeration supports at most {MAX_EXACT} values, got {n}")


def exact_sums(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Enumerate every multiset of ``n`` cases drawn from ``n`` with replacement.

    Returns each multiset's resample sum, its multinomial weight ``n! / prod(c_i!)`` and the
    total weight ``n**n``.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    _check_size(v.size)
    sums, weights = _compositions(v, v.size)
    return sums, weights, v.size**v.size


def grouped_sums(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The same distribution as ``exact_sums``, enumerated over distinct values only.

    Cases with equal values are interchangeable, so splitting the draws over the distinct
    values with weight ``n! / prod(c!) * prod(h**c)`` loses nothing; with 0/1 outcomes there
    are only a handful of distinct values, which is what makes the power simulation fast.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    _check_size(v.size)
    uniq, mult = np.unique(v, return_counts=True)
    sums, weights = _compositions(uniq, v.size, mult.astype(np.int64))
    return sums, weights, v.size**v.size


def integer_sum_weights(values: np.ndarray) -> tuple[int, np.ndarray]:
    """Exact resample-sum distributions for many small sets of integers at once.

    ``values`` is (sets × n) integers. The number of ordered resamples of a set with sum
    ``lowest + j`` is the coefficient of ``x**j`` in ``(sum_i x**(v_i - min))**n`` -- the
    same distribution as enumerating multisets, computed by n - 1 exact integer polynomial
    products for all sets together. Returns ``lowest`` and the (sets × span) weights, each row
    summing to ``n**n``.
    """
    v = np.asarray(values, dtype=np.int64)
    if v.ndim != 2 or v.shape[1] == 0:
        raise ValueError("integer_sum_weights needs a (sets × n) array with n >= 1")
    _check_size(v.shape[1])
    sets, n = v.shape
    low, high = int(v.min()), int(v.max())
    base = np.zeros((sets, high - low + 1), dtype=np.int64)
    np.add.at(base, (np.repeat(np.arange(sets), n), (v - low).ravel()), 1)
    power = base
    for _ in range(n - 1):
        grown = np.zeros((sets, power.shape[1] + base.shape[1] - 1), dtype=np.int64)
        for shift in np.flatnonzero(base.any(axis=0)):
            grown[:, shift : shift + power.shape[1]] += base[:, shift, None] * power
        power = grown
    return low * n, power


def _collapse(means: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct means in increasing order with their summed integer weights."""
    uniq, inverse = np.unique(means, return_inverse=True)
    return uniq, np.bincount(inverse, weights=weights, minlength=uniq.size).astype(np.int64)


def percentile_interval(
    values: np.ndarray | list[float],
    confidence: float | Fraction | str = Fraction(19, 20),
    *,
    exact_max: int = 12,
    resamples: int = 10_000,
    seed: int | None = None,
    denominator: int = 1,
) -> BootstrapResult:
    """Percentile bootstrap interval of the mean of ``values / denominator``.

    Passing integer numerators with a common ``denominator`` keeps every resample sum exact, so
    ties and the sign of a bound never depend on floating-point rounding.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    n = v.size
    if n == 0:
        raise ValueError("the bootstrap needs at least one value")
    if not np.all(np.isfinite(v)):
        raise ValueError("bootstrap values must be finite")
    lo_p, hi_p = tail_probabilities(confidence)
    # Integer data: work with resample sums, which are exact, and divide once at the end.
    integral = bool(np.all(v == np.round(v))) and float(np.abs(v).sum()) * n < 2.0**53
    if n <= exact_max:
        sums, w, total = exact_sums(v)
        points, weights = _collapse(sums, w)
        method, used_seed, count, scale = EXACT, None, int(sums.size), n
    else:
        if seed is None:
            raise ValueError("a Monte Carlo bootstrap needs a seed")
        rng = np.random.default_rng(seed)
        # uint32 indices draw the same stream as scipy's int64 ones, in half the memory.
        drawn = v[rng.integers(0, n, (resamples, n), dtype=np.uint32)]
        # numpy's mean is this sum divided by n, so either way matches scipy's distribution.
        resampled, scale = (drawn.sum(axis=-1), n) if integral else (drawn.mean(axis=-1), 1)
        points, weights = _collapse(resampled, np.ones(resamples, dtype=np.int64))
        total, method, used_seed, count = int(resamples), MONTE_CARLO, int(seed), int(resamples)
    cum = np.cumsum(weights)
    lo_point = points[inverse_cdf_index(cum, total, lo_p)]
    hi_point = points[inverse_cdf_index(cum, total, hi_p)]
    div = scale * denominator
    lo_exact = Fraction(int(lo_point), div) if integral else None
    hi_exact = Fraction(int(hi_point), div) if integral else None
    return BootstrapResult(
        method=method,
        n=n,
        confidence=as_fraction(confidence),
        lower=float(lo_exact) if lo_exact is not None else float(lo_point) / div,
        upper=float(hi_exact) if hi_exact is not None else float(hi_point) / div,
        estimate=float(v.mean()) / denominator,
        lower_exact=lo_exact,
        upper_exact=hi_exact,
        seed=used_seed,
        resamples=count,
        values=points / div,
        weights=weights,
        total=total,
        degenerate=bool(np.all(v == v[0])),
    )
