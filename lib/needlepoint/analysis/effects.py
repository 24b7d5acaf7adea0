"""Q1 and where the effect is: descriptive case-cluster estimates beside the decision.

Every measure is taken over the complete cases of the primary analysis, per case first (the
lengths averaged, as the primary metric does) and then over cases with equal weight, so the
high − low row of the middle loss is the preregistered difference itself. Each has the
preregistered interval (``clustered.cluster_interval``). Accuracy by position uses every case
with a valid answer in that cell. Per case every value is an integer over a common denominator,
so estimates and bounds are exact fractions. None of this feeds the decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction

from needlepoint.analysis.clustered import cluster_interval
from needlepoint.analysis.inference import Effect, Effects
from needlepoint.analysis.inputs import Outcome
from needlepoint.analysis.primary import completeness, natural_key
from needlepoint.analysis.record import AnalysisParameters

Cell = tuple[str, int, str, str]  # case, length, similarity, condition
SIMILARITIES = ("low", "high")
DIFFERENCE = "high − low"
# measure -> (coefficients of B, M, E per block, denominator per block)
MEASURES: dict[str, tuple[tuple[int, int, int], int]] = {
    "middle loss": ((1, -2, 1), 2),  # (B + E)/2 − M
    "B − M": ((1, -1, 0), 1),
    "E − M": ((0, -1, 1), 1),
}


def scores(outcomes: Iterable[Outcome]) -> dict[Cell, int]:
    """1 for a correct answer, 0 for a wrong one; cells that are not protocol-valid are absent."""
    return {
        (o.case, o.length, o.similarity, o.condition): int(o.status == "correct")
        for o in outcomes
        if o.valid
    }


def block_value(score: dict[Cell, int], case: str, length: int, sim: str, measure: str) -> int:
    """A measure's integer numerator for one complete block."""
    (cb, cm, ce), _ = MEASURES[measure]
    at = (case, length, sim)
    return cb * score[(*at, "B")] + cm * score[(*at, "M")] + ce * score[(*at, "E")]


def case_numerators(
    score: dict[Cell, int],
    cases: Sequence[str],
    lengths: Sequence[int],
    measure: str,
    similarity: str,
) -> tuple[list[int], int]:
    """Per-case numerators of a measure under one similarity (or ``high − low``), summed over
    ``lengths``, and their common denominator."""
    _, per_block = MEASURES[measure]
    sims = (("high", 1), ("low", -1)) if similarity == DIFFERENCE else ((similarity, 1),)
    nums = [
        sum(sign * block_value(score, c, n, sim, measure) for n in lengths for sim, sign in sims)
        for c in cases
    ]
    return nums, per_block * len(lengths)


def preregistered_numerators(
    outcomes: Sequence[Outcome],
) -> tuple[list[str], list[int], int]:
    """Complete cases, their numerators of the preregistered difference, and the denominator:
    the same numbers ``primary.primary`` decides on."""
    check = completeness(outcomes)
    lengths = sorted({o.length for o in outcomes})
    cases = list(check.complete_cases)
    nums, den = case_numerators(scores(outcomes), cases, lengths, "middle loss", DIFFERENCE)
    return cases, nums, den


def _text(x: Fraction | None) -> str | None:
    return None if x is None else str(x)


def effect(
    measure: str,
    similarity: str,
    length: int | None,
    condition: str | None,
    numerators: Sequence[int],
    denominator: int,
    params: AnalysisParameters,
) -> Effect:
    """One row: the estimate from one case up, its interval from two cases up."""
    n = len(numerators)
    estimate = Fraction(sum(numerators), n * denominator) if n else None
    lower = upper = None
    if n >= 2:
        r = cluster_interval(numerators, denominator, params)
        lower, upper = r.lower, r.upper
    return Effect(
        measure=measure,
        similarity=similarity,
        length=length,
        condition=condition,
        cases=n,
        estimate=None if estimate is None else float(estimate),
        estimate_exact=_text(estimate),
        lower=None if lower is None else float(lower),
        upper=None if upper is None else float(upper),
        lower_exact=_text(lower),
        upper_exact=_text(upper),
    )


def effects(outcomes: Sequence[Outcome], params: AnalysisParameters) -> Effects:
    """Middle loss, B − M and E − M per similarity (per length too when there are several)
    and their high − low differences over the complete cases; accuracy by position per cell."""
    check = completeness(outcomes)
    cases = list(check.complete_cases)
    lengths = sorted({o.length for o in outcomes})
    score = scores(outcomes)
    per_length: list[tuple[int | None, list[int]]] = [(None, lengths)]
    if len(lengths) > 1:
        per_length += [(n, [n]) for n in lengths]
    measures = [
        effect(measure, sim, length, None, *case_numerators(score, cases, ns, measure, sim), params)
        for measure in MEASURES
        for sim in (*SIMILARITIES, DIFFERENCE)
        for length, ns in per_length
    ]
    all_cases = sorted({o.case for o in outcomes}, key=natural_key)
    conditions = [c for c in ("B", "M", "E", "A") if any(o.condition == c for o in outcomes)]
    positions = []
    for sim in SIMILARITIES:
        for n in lengths:
            for cond in conditions:
                values = [score[k] for c in all_cases if (k := (c, n, sim, cond)) in score]
                positions.append(effect("accuracy", sim, n, cond, values, 1, params))
    return Effects(cases=len(cases), measures=tuple(measures), positions=tuple(positions))


def find(rows: Iterable[Effect], measure: str, sim: str, length: int | None = None) -> Effect:
    """The row of one measure and similarity (averaged over lengths unless ``length``)."""
    return next(r for r in rows if (r.measure, r.similarity, r.length) == (measure, sim, length))
