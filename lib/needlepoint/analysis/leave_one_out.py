"""The robustness panel's leave-one-out bounds, exact and in time linear in the cases.

Leaving case ``i`` out of ``n`` and deciding again (``primary.decide``) draws the Monte Carlo
bootstrap of the ``m = n - 1`` remaining cases: ``resample_indices(m, R, seed)``. That draw is
the **same** for every ``i`` (same ``m``, same protocol seed); only which case each index names
changes: index ``k`` names case ``k`` when ``k < i`` and case ``k + 1`` otherwise. So with
``c[k, r]``, how often resample ``r`` draws index ``k``, the resample sums without case ``i``
are

    S_i[r] = sum_k c[k, r] * v[k + (k >= i)],   and   S_{i+1} = S_i + c[i] * (v[i] - v[i + 1]),

one vector update per case. Each bound is one order statistic of ``S_i`` (``np.partition``,
linear in R): the ``quantile_need``-th smallest sum, the inverse-CDF quantile that
``bootstrap.percentile_interval`` takes. The result is the one that deciding afresh for each
``i`` gives, bit for bit (a test checks it), in O(n * R) time instead of O(n^2 * R): 3.7 s of
CPU at 200 cases and 226 s at 2,000 before, see ``benchmarks/bench_leave_one_out.py``.

Memory: the draw (4 bytes per resample and case) and the counts (2), below the 12 bytes per
resample and case that the primary analysis's own bootstrap needs (PROTOCOL.md, *Limits*).
With at most ``exact_bootstrap_max_cases`` remaining cases the exact bootstrap is cheap and
``decide`` is called as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from fractions import Fraction

import numpy as np

from needlepoint.analysis.bootstrap import (
    _numerators,
    quantile_need,
    resample_indices,
    tail_probabilities,
)
from needlepoint.analysis.primary import (
    NOT_SUPPORTED,
    SUPPORTED,
    evaluable,
    meets_rule,
)
from needlepoint.analysis.record import AnalysisParameters

# Resamples handled at once while the draw becomes counts: bounds the temporary arrays.
_ROWS = 256


def shared_bounds(
    numerators: Sequence[int], params: AnalysisParameters
) -> Iterator[tuple[int, int, int]] | None:
    """``(total, lower sum, upper sum)`` of the resample sums without each case in turn, from
    one shared draw; None when the remaining cases take the exact bootstrap (or too few remain
    to decide), where ``decide`` is cheap and used instead."""
    m = len(numerators) - 1
    if m <= int(params.exact_bootstrap_max_cases) or not evaluable(m, params):
        return None
    v = _numerators(numerators)
    resamples, seed = int(params.bootstrap_resamples), int(params.bootstrap_seed)
    lo_p, hi_p = tail_probabilities(float(params.confidence))
    k_lo = quantile_need(resamples, lo_p) - 1
    k_hi = quantile_need(resamples, hi_p) - 1
    return _walk(v, m, resamples, seed, (k_lo, k_hi))


def _walk(
    v: np.ndarray, m: int, resamples: int, seed: int, ranks: tuple[int, int]
) -> Iterator[tuple[int, int, int]]:
    drawn = resample_indices(m, resamples, seed)
    counts = np.empty((m, resamples), dtype=np.uint16)  # m <= 10,000 cases: a count fits
    sums = np.empty(resamples, dtype=np.int64)
    rest = v[1:]  # leaving out case 0: index k names case k + 1
    for start in range(0, resamples, _ROWS):
        block = drawn[start : start + _ROWS].astype(np.int64)
        rows = block.shape[0]
        sums[start : start + rows] = rest[block].sum(axis=1)
        flat = (block + (np.arange(rows, dtype=np.int64) * m)[:, None]).ravel()
        per_row = np.bincount(flat, minlength=rows * m).reshape(rows, m)
        counts[:, start : start + rows] = per_row.T
    del drawn
    total = int(v.sum())
    k_lo, k_hi = ranks
    for i in range(m + 1):
        if i > 0:
            # index i - 1 named case i; now it names case i - 1
            sums += counts[i - 1].astype(np.int64) * int(v[i - 1] - v[i])
        part = np.partition(sums, (k_lo, k_hi))
        yield total - int(v[i]), int(part[k_lo]), int(part[k_hi])


def decision_of(total: int, scale: int, lower: Fraction, params: AnalysisParameters) -> str:
    """The preregistered rule on one leave-one-out estimate and lower bound."""
    return SUPPORTED if meets_rule(total, scale, lower > 0, params) else NOT_SUPPORTED
