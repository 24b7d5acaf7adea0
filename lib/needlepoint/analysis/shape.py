"""The shape of the position curve: a verdict from both ends, never from the composite alone.

The composite middle loss, (B + E)/2 − M, is positive whenever one end sits far enough above
the middle, so a steady decline with B at the ceiling reads as "a middle loss". The shape is
read from two contrasts instead, each over the complete cases with its case-cluster interval:
*first end minus interior* (B − M) and *last end minus interior* (E − M).

**Multiplicity.** Every contrast of a family (all the rows a headline prints) gets a two-sided
bootstrap p-value from the same case-cluster bootstrap distribution as its interval
(``bootstrap_p``), and Holm's step-down adjustment (statsmodels ``multipletests``) controls the
family-wise error across them. A contrast counts as above 0 (+1) or below 0 (−1) only when its
Holm-adjusted p is at most alpha; otherwise it is 0.

**The rule** (``classify``; an intersection-union test for the U-shape: both ends must be shown
above the middle, each on its own):

- *middle loss (U-shape)*: B − M is +1 **and** E − M is +1;
- *decline with position*: B − M is +1 and E − M is not, or B − M is 0 and E − M is −1;
- *rise with position*: E − M is +1 and B − M is not, or E − M is 0 and B − M is −1;
- *flat*: both are 0: neither end differs clearly from the middle (no difference shown, which
  is not a proof of equality);
- *unclear*: a contrast has no interval (fewer than two cases), or both are −1 (the middle
  beats both ends, a shape the question does not name).

``classify`` and ``holm`` take plain numbers, so another design (a depth grid, say) reads its own
curves with the same rule: build each contrast with ``contrast`` (or by hand), adjust the family
with ``adjust``, and classify each pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from fractions import Fraction

import numpy as np

from needlepoint.analysis.bootstrap import case_interval
from needlepoint.analysis.inputs import Outcome
from needlepoint.analysis.primary import (
    POSITIONS,
    SIMILARITIES,
    case_numerators,
    completeness,
    fmt,
    scores,
)
from needlepoint.analysis.record import AnalysisParameters, Contrast, ShapeRow, Shapes

U_SHAPE = "middle loss (U-shape)"
DECLINE = "decline with position"
RISE = "rise with position"
FLAT = "flat"
UNCLEAR = "unclear"
FIRST, LAST = "B − M", "E − M"
HOLM = "Holm"


def bootstrap_p(values: np.ndarray, weights: np.ndarray, total: int) -> Fraction:
    """Two-sided bootstrap p of "the mean is 0": twice the smaller tail mass at or beyond 0,
    capped at 1, as an exact fraction of the bootstrap's integer weights.

    The same distribution gives the percentile interval, so a p below ``1 − confidence``
    goes with an interval that excludes 0 (up to the tie at 0 itself).
    """
    at_or_below = int(weights[values <= 0].sum())
    at_or_above = int(weights[values >= 0].sum())
    return min(Fraction(1), Fraction(2 * min(at_or_below, at_or_above), total))


def contrast(
    name: str, numerators: Sequence[int], denominator: int, params: AnalysisParameters
) -> Contrast:
    """One contrast's estimate, preregistered-method interval and unadjusted bootstrap p.

    From one case up the estimate; from two cases up the interval and p (as ``effects`` does),
    so the interval equals the effects table's row of the same numerators. ``direction`` is
    left 0 until ``adjust`` sets it.
    """
    n = len(numerators)
    if n == 0:
        return Contrast(name, 0, None, None, None, None, None, None, None, 0)
    estimate = Fraction(sum(numerators), n * denominator)
    if n < 2:
        return Contrast(name, n, float(estimate), str(estimate), None, None, None, None, None, 0)
    r = case_interval(numerators, denominator, params)
    p = bootstrap_p(r.values, r.weights, r.total)
    return Contrast(
        name=name,
        cases=n,
        estimate=float(estimate),
        estimate_exact=str(estimate),
        lower=float(r.lower_exact),
        upper=float(r.upper_exact),
        p=float(p),
        p_exact=str(p),
        p_adjusted=None,
        direction=0,
    )


def holm(ps: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given (statsmodels ``multipletests``)."""
    if not ps:
        return []
    from statsmodels.stats.multitest import multipletests

    return [float(p) for p in multipletests(list(ps), method="holm")[1]]


def adjust(family: Sequence[Contrast], alpha: float) -> list[Contrast]:
    """The family's contrasts with their Holm-adjusted p and direction (+1, −1 or 0).

    Contrasts without a p (fewer than two cases) stay out of the family and keep direction 0.
    """
    tested = [i for i, c in enumerate(family) if c.p is not None]
    adjusted = dict(zip(tested, holm([family[i].p or 0.0 for i in tested]), strict=True))
    out = []
    for i, c in enumerate(family):
        if i not in adjusted:
            out.append(c)
            continue
        p = adjusted[i]
        side = 0
        if p <= alpha and c.estimate is not None and c.estimate != 0:
            side = 1 if c.estimate > 0 else -1
        out.append(replace(c, p_adjusted=p, direction=side))
    return out


def classify(first: Contrast, last: Contrast) -> tuple[str, str]:
    """The verdict from first-end-minus-interior and last-end-minus-interior, and why.

    Both contrasts must already carry their ``direction`` (``adjust``).
    """
    if first.p is None or last.p is None:
        return UNCLEAR, "too few complete cases for an interval"
    f, e = first.direction, last.direction
    if f == 1 and e == 1:
        return U_SHAPE, "both ends are above the middle"
    if f == -1 and e == -1:
        return UNCLEAR, "the middle is above both ends (no U-shape, no steady trend)"
    if f == 1 or (f == 0 and e == -1):
        return DECLINE, "the first end is above the middle, the last end is not"
    if e == 1 or (e == 0 and f == -1):
        return RISE, "the last end is above the middle, the first end is not"
    return FLAT, "neither end differs clearly from the middle"


def _counts(outcomes: Sequence[Outcome], similarity: str, length: int | None) -> dict[str, str]:
    """B, M and E as correct / valid over every case with a valid answer (all lengths or one)."""
    out = {}
    for cond in POSITIONS:
        cell = [
            o
            for o in outcomes
            if o.valid
            and (o.similarity, o.condition) == (similarity, cond)
            and (length is None or o.length == length)
        ]
        out[cond] = f"{sum(o.status == 'correct' for o in cell)}/{len(cell)}"
    return out


def _position_change(
    score: Mapping[tuple[str, int, str, str], int],
    cases: Sequence[str],
    lengths: Sequence[int],
    position: str,
    params: AnalysisParameters,
) -> Contrast:
    """A position's accuracy high − low per complete case (lengths averaged), over cases."""
    nums = [
        sum(score[(c, n, "high", position)] - score[(c, n, "low", position)] for n in lengths)
        for c in cases
    ]
    return contrast(position, nums, len(lengths), params)


def change_sits(changes: Sequence[Contrast]) -> str:
    """Where similarity's change of the curve sits: at M, at E, at both, or elsewhere."""
    moved = [c.name for c in changes if c.direction != 0]
    if not changes or any(c.p is None for c in changes):
        return "too few complete cases to say where the change sits"
    if not moved:
        return "no position's accuracy changes clearly with similarity"
    at = {"M", "E"} & set(moved)
    words = {
        frozenset({"M"}): "at M",
        frozenset({"E"}): "at E",
        frozenset({"M", "E"}): "at both M and E",
    }
    if not at:
        return "at B only, not at M or E"
    also = " (B changes too)" if "B" in moved else ""
    return f"{words[frozenset(at)]}{also}"


def shapes(outcomes: Sequence[Outcome], params: AnalysisParameters) -> Shapes:
    """Every similarity's verdict (all lengths, and each length where there are several),
    Holm across all their contrasts; and the high − low change at B, M and E, Holm across 3."""
    alpha = float(1 - Fraction(repr(float(params.confidence))))
    cases = list(completeness(outcomes).complete_cases)
    lengths = sorted({o.length for o in outcomes})
    score = scores(outcomes)
    per_length: list[tuple[int | None, list[int]]] = [(None, lengths)]
    if len(lengths) > 1:
        per_length += [(n, [n]) for n in lengths]
    rows = [(sim, at, ns) for sim in SIMILARITIES for at, ns in per_length]
    family = []
    for sim, _, ns in rows:
        for name in (FIRST, LAST):
            family.append(contrast(name, *case_numerators(score, cases, ns, name, sim), params))
    family = adjust(family, alpha)
    out = []
    for i, (sim, at, _) in enumerate(rows):
        first, last = family[2 * i], family[2 * i + 1]
        verdict, reason = classify(first, last)
        counts = _counts(outcomes, sim, at)
        out.append(ShapeRow(sim, at, first, last, counts, verdict, reason))
    changes = adjust([_position_change(score, cases, lengths, p, params) for p in POSITIONS], alpha)
    n = sum(c.p is not None for c in family)
    return Shapes(
        method=f"{HOLM} across the {n} contrasts of the rows (two-sided case-cluster bootstrap "
        f"p-values, statsmodels multipletests), alpha {fmt(alpha)}",
        alpha=alpha,
        rows=tuple(out),
        disagreements=tuple(disagreements(out)),
        changes=tuple(changes),
        change_method=f"{HOLM} across B, M and E, alpha {fmt(alpha)}",
        change_sits=change_sits(changes),
    )


def disagreements(rows: Sequence[ShapeRow]) -> list[str]:
    """One sentence per similarity whose pooled verdict differs from a per-length one."""
    out = []
    for sim in SIMILARITIES:
        mine = [r for r in rows if r.similarity == sim]
        pooled = next((r for r in mine if r.length is None), None)
        others = [r for r in mine if r.length is not None]
        if pooled is None or all(r.verdict == pooled.verdict for r in others):
            continue
        each = "; ".join(f"{r.length} records: {r.verdict}" for r in others)
        out.append(
            f"under {sim} similarity the pooled row ({pooled.verdict}) and the per-length rows "
            f"({each}) disagree: read the per-length rows before the pooled one"
        )
    return out


def shape_words(found: Shapes | None) -> str | None:
    """Each similarity's verdict over all lengths in one line ("low: flat; high: decline with
    position"), as a comparison or a results grid names a run's Q1; None without a verdict."""
    if found is None:
        return None
    rows = [r for r in found.rows if r.length is None]
    return "; ".join(f"{r.similarity}: {r.verdict}" for r in rows) or None
