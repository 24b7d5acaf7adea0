"""The preregistered primary analysis: completeness, the metric, the decision rule and caveats.

A block (case × length × similarity) is complete only when all its responses are protocol-valid,
a pair only when both similarity blocks are, and a case only when every planned length is. Only
complete cases enter the metric; everything else is listed, with its reason, as exploratory.
Missing cells are never read as zero.

This module holds the only metric and the only decision rule. ``numerators`` computes every
measure from cells (1 for a correct answer, 0 for a wrong one) as integer numerators over a
common denominator, for one run or, vectorised, for the power simulation's thousands;
``meets_rule`` states the preregistered rule and ``decide`` applies it. The robustness panel,
the effects, the power simulation and the comparisons call them. Arithmetic on 0/1 outcomes is
done in integers and exact fractions, so the decision never hinges on how 0.1 rounds in binary.
The result is a ``PrimaryResult``: the ``Primary``, ``Completeness``, exploratory rows,
exclusions and caveats that ``document.build_document`` places in the ``AnalysisDocument``.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from fractions import Fraction
from typing import Any

import numpy as np

from needlepoint.analysis.bootstrap import as_fraction, case_interval
from needlepoint.analysis.inputs import AnalysisInput, Outcome
from needlepoint.analysis.record import (
    AnalysisParameters,
    CaseResult,
    Completeness,
    Decision,
    Exclusion,
    ExploratoryRow,
    IncompleteCase,
    Interval,
    Mass,
    PairValues,
    Primary,
)
from needlepoint.design.schema import SIMILARITIES

SUPPORTED = "supported"
NOT_SUPPORTED = "not supported"
NOT_EVALUABLE = "not evaluable"
SIMULATION_BANNER = "SIMULATION — not a model result"

POSITIONS = ("B", "M", "E")  # the answer-present conditions, in the order cells hold them
DIFFERENCE = "high − low"
# measure -> (coefficients of B, M, E per block, denominator per block)
MEASURES: dict[str, tuple[tuple[int, int, int], int]] = {
    "middle loss": ((1, -2, 1), 2),  # (B + E)/2 − M
    "B − M": ((1, -1, 0), 1),
    "E − M": ((0, -1, 1), 1),
}
Cell = tuple[str, int, str, str]  # case, length, similarity, condition
Block = tuple[str, int, str]  # case, length, similarity


def fmt(x: Fraction | float) -> str:
    """A short, stable number for reasons and summaries."""
    return f"{float(x):.4g}"


def natural_key(label: str) -> tuple[Any, ...]:
    """Sort S2 before S10."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", label))


# --- the metric ----------------------------------------------------------------------------------


def scores(outcomes: Iterable[Outcome]) -> dict[Cell, int]:
    """1 for a correct answer, 0 for a wrong one; cells that are not protocol-valid are absent."""
    return {
        (o.case, o.length, o.similarity, o.condition): int(o.status == "correct")
        for o in outcomes
        if o.valid
    }


def block_value(b: Any, m: Any, e: Any, measure: str = "middle loss") -> Any:
    """A measure's integer numerator for a block from its B, M and E scores (elementwise on
    arrays): twice the middle loss ``B + E - 2M``, or ``B - M``, or ``E - M``."""
    (cb, cm, ce), _ = MEASURES[measure]
    return cb * b + cm * m + ce * e


def numerators(
    correct: np.ndarray, measure: str = "middle loss", similarity: str = DIFFERENCE
) -> tuple[np.ndarray, int]:
    """The metric from cells: each case's integer numerator and their common denominator.

    ``correct[..., length, similarity, position]`` holds the scores of complete cases, with the
    similarities in ``SIMILARITIES`` order and the positions in ``POSITIONS`` order. A case's
    value is its blocks' numerators under ``similarity`` (or high minus low, for
    ``DIFFERENCE``) summed over the lengths, over ``denominator``: the lengths averaged within
    the case. The preregistered metric is the default, the middle loss's ``DIFFERENCE``.
    """
    per_block = MEASURES[measure][1]
    block = block_value(correct[..., 0], correct[..., 1], correct[..., 2], measure)
    if similarity == DIFFERENCE:
        value = block[..., 1] - block[..., 0]
    else:
        value = block[..., SIMILARITIES.index(similarity)]
    return value.sum(axis=-1), per_block * correct.shape[-3]


def case_numerators(
    score: dict[Cell, int],
    cases: Sequence[str],
    lengths: Sequence[int],
    measure: str = "middle loss",
    similarity: str = DIFFERENCE,
) -> tuple[list[int], int]:
    """``numerators`` for the given complete cases and lengths of one run's scores."""
    correct = np.array(
        [
            [[[score[(c, n, sim, p)] for p in POSITIONS] for sim in SIMILARITIES] for n in lengths]
            for c in cases
        ],
        dtype=np.int64,
    ).reshape(len(cases), len(lengths), len(SIMILARITIES), len(POSITIONS))
    nums, denominator = numerators(correct, measure, similarity)
    return [int(v) for v in nums], denominator


def preregistered_numerators(outcomes: Sequence[Outcome]) -> tuple[list[str], list[int], int]:
    """Complete cases, their numerators of the preregistered difference, and the denominator:
    the numbers ``primary`` decides on."""
    cases = completeness(outcomes).complete_cases
    lengths = sorted({o.length for o in outcomes})
    nums, den = case_numerators(scores(outcomes), cases, lengths)
    return cases, nums, den


# --- the decision rule ---------------------------------------------------------------------------


def evaluable(cases: Any, params: AnalysisParameters) -> Any:
    """Enough complete cases for a decision (elementwise on an array of counts)."""
    return cases >= max(int(params.min_complete_cases), 1)


def meets_rule(total: Any, scale: Any, lower_above_zero: Any, params: AnalysisParameters) -> Any:
    """The preregistered rule: the estimate ``total / scale`` reaches the threshold and the
    interval's lower bound is above 0.

    Compared in exact integers (elementwise on arrays, as the power simulation decides), so a
    difference of exactly the threshold meets it however 0.1 rounds in binary.
    """
    threshold = as_fraction(float(params.threshold))
    reaches = total * threshold.denominator >= threshold.numerator * scale
    return reaches & lower_above_zero


def decide(numerators: Sequence[int], denominator: int, params: AnalysisParameters) -> Decision:
    """Estimate, interval and the preregistered decision from per-case integer numerators."""
    n, minimum = len(numerators), int(params.min_complete_cases)
    threshold = as_fraction(float(params.threshold))
    if not evaluable(n, params):
        return Decision(
            threshold=float(threshold),
            estimate=None,
            estimate_exact=None,
            interval=None,
            decision=NOT_EVALUABLE,
            reason=f"{n} complete case{'s' if n != 1 else ''}; the protocol requires at least "
            f"{minimum}",
        )
    total, scale = int(sum(numerators)), n * denominator
    estimate = Fraction(total, scale)
    boot = case_interval(numerators, denominator, params)
    lower, upper = boot.lower_exact, boot.upper_exact
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
    if meets_rule(total, scale, lower > 0, params):
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


# --- completeness and the primary analysis -------------------------------------------------------


def _problem(o: Outcome) -> str:
    return f"seq {o.seq} {o.category}" + (f" ({o.kind})" if o.kind else "")


@dataclass(frozen=True)
class BlockCheck:
    """Every block's outcomes and the problems that make blocks, pairs and cases incomplete."""

    blocks: dict[Block, list[Outcome]]
    block_problems: dict[Block, list[str]]
    pair_problems: dict[tuple[str, int], list[str]]
    case_problems: dict[str, list[str]]
    complete_cases: list[str]


@dataclass(frozen=True)
class PrimaryResult:
    """The primary analysis and everything it left out: the parts of analysis.json it fills."""

    primary: Primary
    completeness: Completeness
    exploratory: tuple[ExploratoryRow, ...]
    exclusions: tuple[Exclusion, ...]
    caveats: tuple[str, ...]


def completeness(outcomes: Sequence[Outcome]) -> BlockCheck:
    """Which blocks, pairs and cases are complete, and why the others are not."""
    blocks: dict[Block, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        blocks[(o.case, o.length, o.similarity)].append(o)
    sims_of: dict[tuple[str, int], set[str]] = defaultdict(set)
    lengths_of: dict[str, set[int]] = defaultdict(set)
    for case, length, sim in blocks:
        sims_of[(case, length)].add(sim)
        lengths_of[case].add(length)
    block_problems = {k: [_problem(o) for o in v if not o.valid] for k, v in blocks.items()}
    pair_problems: dict[tuple[str, int], list[str]] = {}
    for (case, length), sims in sims_of.items():
        pair_problems[(case, length)] = [
            f"{sim} block: {', '.join(block_problems[(case, length, sim)])}"
            if sim in sims
            else f"{sim} block not planned"
            for sim in ("low", "high")
            if sim not in sims or block_problems[(case, length, sim)]
        ]
    case_problems = {
        case: [
            f"length {length} pair incomplete ({'; '.join(pair_problems[(case, length)])})"
            for length in sorted(lengths)
            if pair_problems[(case, length)]
        ]
        for case, lengths in lengths_of.items()
    }
    return BlockCheck(
        blocks=blocks,
        block_problems=block_problems,
        pair_problems=pair_problems,
        case_problems=case_problems,
        complete_cases=sorted((c for c, p in case_problems.items() if not p), key=natural_key),
    )


def _pair_values(check: BlockCheck, score: dict[Cell, int], case: str, length: int) -> PairValues:
    """Middle losses and difference for one case × length (None where a block is incomplete)."""
    twice: dict[str, int | None] = {}
    for sim in SIMILARITIES:
        key = (case, length, sim)
        complete = key in check.blocks and not check.block_problems[key]
        twice[sim] = block_value(*(score[(*key, p)] for p in POSITIONS)) if complete else None
    low, high = twice["low"], twice["high"]
    return PairValues(
        case=case,
        length=length,
        loss_low=None if low is None else low / 2,
        loss_high=None if high is None else high / 2,
        difference=None if high is None or low is None else (high - low) / 2,
    )


def primary(inp: AnalysisInput) -> PrimaryResult:
    """Completeness, per-case differences, the bootstrap interval, decision and caveats."""
    params = AnalysisParameters.of(inp.protocol)
    check = completeness(inp.outcomes)
    lengths = sorted({o.length for o in inp.outcomes})
    score = scores(inp.outcomes)
    nums, denominator = case_numerators(score, check.complete_cases, lengths)
    cases = []
    for case, num in zip(check.complete_cases, nums, strict=True):
        value = Fraction(num, denominator)
        rows = tuple(_pair_values(check, score, case, length) for length in lengths)
        cases.append(CaseResult(case=case, lengths=rows, difference=float(value), exact=str(value)))
    exploratory = []
    for case in sorted(check.case_problems, key=natural_key):
        if check.case_problems[case]:
            for length in lengths:
                v = _pair_values(check, score, case, length)
                problems = check.pair_problems[(case, length)]
                reason = "; ".join(problems) or (
                    "pair complete, but the case has an incomplete length"
                )
                exploratory.append(
                    ExploratoryRow(v.case, v.length, v.loss_low, v.loss_high, v.difference, reason)
                )
    exclusions = tuple(
        Exclusion(
            seq=o.seq,
            case=o.case,
            length=o.length,
            similarity=o.similarity,
            condition=o.condition,
            category=o.category,
            kind=o.kind,
            excludes=f"case {o.case} (block {o.case}/{o.length}/{o.similarity})",
        )
        for o in inp.outcomes
        if not o.valid
    )
    decision = decide(nums, denominator, params)
    result = Primary(
        complete_cases=len(cases),
        planned_cases=len(check.case_problems),
        cases=tuple(cases),
        **{f.name: getattr(decision, f.name) for f in fields(Decision)},
    )
    return PrimaryResult(
        primary=result,
        completeness=Completeness(
            blocks_complete=sum(1 for p in check.block_problems.values() if not p),
            blocks_planned=len(check.block_problems),
            pairs_complete=sum(1 for p in check.pair_problems.values() if not p),
            pairs_planned=len(check.pair_problems),
            incomplete_cases=tuple(
                IncompleteCase(case=c, reason="; ".join(p))
                for c, p in sorted(check.case_problems.items(), key=lambda kv: natural_key(kv[0]))
                if p
            ),
        ),
        exploratory=tuple(exploratory),
        exclusions=exclusions,
        caveats=tuple(caveats(inp, check.complete_cases, result)),
    )


# --- caveats ------------------------------------------------------------------------------------


def position_bounds(by_sim: dict[str, list[Outcome]], floor: bool, scope: str = "") -> list[str]:
    """A caveat naming each position at 0% (floor) or 100% (ceiling) under one similarity.

    A rate there cannot move further that way, so a middle loss, or a difference, that involves
    it is bounded by the task rather than measured. B and E floors are left to the floor caveat.
    """
    bounded = []
    for sim, rows in by_sim.items():
        for cond in ("B", "M", "E"):
            cell = [o for o in rows if o.condition == cond]
            hits = sum(o.status == "correct" for o in cell)
            if cell and hits in (0, len(cell)) and not (floor and hits == 0 and cond != "M"):
                where = "floor" if hits == 0 else "ceiling"
                bounded.append(f"{cond} under {sim} similarity {hits}/{len(cell)} ({where})")
    if not bounded:
        return []
    return [
        f"Position at floor or ceiling: {'; '.join(bounded)}. A rate at 0 or 1 cannot move "
        "further that way, so a middle loss or a difference that involves it is bounded by the "
        f"task, not measured{scope}."
    ]


def caveats(inp: AnalysisInput, complete: Sequence[str], result: Primary) -> list[str]:
    """Conditions under which the number says less than it seems to."""
    notes = []
    if inp.simulation:
        notes.append(f"{SIMULATION_BANNER}: the outcomes come from a fake transport.")
    keep = set(complete)
    present = [o for o in inp.outcomes if o.case in keep and o.condition in ("B", "M", "E")]
    scope = ""
    if not present:
        # No complete case: still say whether the valid answers show a floor or a ceiling,
        # labelled exploratory, because "not evaluable" alone hides what the model did.
        present = [
            o
            for o in inp.outcomes
            if o.condition in ("B", "M", "E") and o.status in ("correct", "error")
        ]
        scope = " (exploratory: over all valid responses, as no case is complete)"
    if present:
        by_sim = {s: [o for o in present if o.similarity == s] for s in ("low", "high")}
        ceiling = all(by_sim.values()) and all(o.status == "correct" for o in present)
        if ceiling:
            notes.append(
                "Ceiling: every answer-present response in both similarity conditions is "
                "correct, so a zero difference cannot tell no effect from a task too easy to "
                f"show one{scope}."
            )
        ends = [o for o in present if o.condition in ("B", "E")]
        if ends and not any(o.status == "correct" for o in ends):
            notes.append(
                "Floor: no response at an end position (B or E) is correct in either "
                "similarity condition, so the middle loss cannot be positive and a zero "
                f"difference proves nothing{scope}."
            )
        if not ceiling:
            notes += position_bounds(by_sim, not any(o.status == "correct" for o in ends), scope)
    failed = Counter(o.kind for o in inp.outcomes if o.status == "protocol_failure")
    if failed:
        executed = sum(o.status != "unexecuted" for o in inp.outcomes)
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(failed.items()))
        notes.append(
            f"Failures: {sum(failed.values())} of {executed} executed requests are protocol "
            f"failures ({kinds}); they are listed with their reasons and never scored as wrong."
        )
    interval = result.interval
    if interval and interval.degenerate and result.estimate is not None:
        notes.append(
            f"Degenerate bootstrap: every complete case has the same difference "
            f"({fmt(result.estimate)}), so the interval has zero width; that reflects "
            "identical cases, not certainty."
        )
    missing = result.planned_cases - result.complete_cases
    if missing and result.decision != NOT_EVALUABLE:
        notes.append(
            f"{missing} of {result.planned_cases} planned cases are incomplete and excluded; "
            "the interval covers the complete cases only."
        )
    return notes
