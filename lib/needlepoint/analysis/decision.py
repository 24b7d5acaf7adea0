"""The preregistered decision from the complete cases' values: estimate, interval and verdict.

The arithmetic is done in exact fractions on integer per-case numerators, so the decision never
hinges on how 0.1 rounds in binary.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from needlepoint.analysis.bootstrap import as_fraction, percentile_interval
from needlepoint.analysis.record import AnalysisParameters, Decision, Interval, Mass

SUPPORTED = "supported"
NOT_SUPPORTED = "not supported"
NOT_EVALUABLE = "not evaluable"
SIMULATION_BANNER = "SIMULATION — not a model result"


def fmt(x: Fraction | float) -> str:
    """A short, stable number for reasons and summaries."""
    return f"{float(x):.4g}"


def meets_rule(estimate: Fraction, lower: Fraction, params: AnalysisParameters) -> bool:
    """The preregistered rule: the estimate reaches the threshold and the lower bound is above 0."""
    return estimate >= as_fraction(float(params.threshold)) and lower > 0


def decide(numerators: Sequence[int], denominator: int, params: AnalysisParameters) -> Decision:
    """Estimate, interval and the preregistered decision from per-case integer numerators."""
    n, minimum = len(numerators), int(params.min_complete_cases)
    threshold = as_fraction(float(params.threshold))
    if n < minimum:
        return Decision(
            threshold=float(threshold),
            estimate=None,
            estimate_exact=None,
            interval=None,
            decision=NOT_EVALUABLE,
            reason=f"{n} complete case{'s' if n != 1 else ''}; the protocol requires at least "
            f"{minimum}",
        )
    estimate = Fraction(sum(numerators), n * denominator)
    boot = percentile_interval(
        numerators,
        float(params.confidence),
        exact_max=int(params.exact_bootstrap_max_cases),
        resamples=int(params.bootstrap_resamples),
        seed=int(params.bootstrap_seed),
        denominator=denominator,
    )
    lower, upper = boot.lower_exact, boot.upper_exact
    assert lower is not None and upper is not None  # integer numerators are always exact
    interval = Interval(
        confidence=float(boot.confidence),
        lower=float(lower),
        upper=float(upper),
        lower_exact=str(lower),
        upper_exact=str(upper),
        method=boot.method,
        seed=boot.seed,
        resamples=boot.resamples,
        cases=boot.n,
        degenerate=boot.degenerate,
        quantile="inverse CDF: Q(p) = smallest resample mean with P(mean <= Q) >= p",
        distribution=tuple(
            Mass(value=float(v), weight=int(w))
            for v, w in zip(boot.values, boot.weights, strict=True)
        ),
        total_weight=int(boot.total),
    )
    pct = f"{fmt(100 * boot.confidence)}%"
    if meets_rule(estimate, lower, params):
        decision = SUPPORTED
        reason = (
            f"difference {fmt(estimate)} >= threshold {fmt(threshold)} and the {pct} "
            f"interval's lower bound {fmt(lower)} is above 0"
        )
    else:
        decision = NOT_SUPPORTED
        why = []
        if estimate < threshold:
            why.append(f"difference {fmt(estimate)} is below the threshold {fmt(threshold)}")
        if lower <= 0:
            why.append(f"the {pct} interval's lower bound {fmt(lower)} is not above 0")
        reason = " and ".join(why)
    return Decision(
        threshold=float(threshold),
        estimate=float(estimate),
        estimate_exact=str(estimate),
        interval=interval,
        decision=decision,
        reason=reason,
    )
