"""The preregistered primary analysis: completeness, middle loss, caveats; ``decision`` decides.

A block (case × length × similarity) is complete only when all its responses are protocol-valid,
a pair only when both similarity blocks are, and a case only when every planned length is. Only
complete cases enter the metric; everything else is listed, with its reason, as exploratory.
Missing cells are never read as zero. Arithmetic on 0/1 outcomes is done in integers and exact
fractions, so the decision never hinges on how 0.1 rounds in binary. The result is a
``PrimaryResult``: the ``Primary``, ``Completeness``, exploratory rows, exclusions and caveats
that ``document.build_document`` places in the ``AnalysisDocument``.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from needlepoint.analysis.decision import (
    NOT_EVALUABLE,
    NOT_SUPPORTED,
    SIMULATION_BANNER,
    SUPPORTED,
    decide,
    fmt,
)
from needlepoint.analysis.inputs import AnalysisInput, Outcome
from needlepoint.analysis.record import (
    AnalysisParameters,
    CaseResult,
    Completeness,
    Decision,
    Exclusion,
    ExploratoryRow,
    IncompleteCase,
    PairValues,
    Primary,
)

__all__ = [
    "NOT_EVALUABLE",
    "NOT_SUPPORTED",
    "SIMULATION_BANNER",
    "SUPPORTED",
    "BlockCheck",
    "PrimaryResult",
    "caveats",
    "completeness",
    "decide",
    "natural_key",
    "primary",
]


def natural_key(label: str) -> tuple[Any, ...]:
    """Sort S2 before S10."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", label))


def _problem(o: Outcome) -> str:
    return f"seq {o.seq} {o.category}" + (f" ({o.kind})" if o.kind else "")


Block = tuple[str, int, str]  # case, length, similarity


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


def _loss2(block: Sequence[Outcome]) -> int:
    """Twice the middle loss, ``B + E - 2M``, from a complete block (an integer)."""
    score = {o.condition: int(o.status == "correct") for o in block}
    return score["B"] + score["E"] - 2 * score["M"]


def _pair_values(check: BlockCheck, case: str, length: int) -> tuple[PairValues, int | None]:
    """Middle losses and difference for one case × length (None where a block is incomplete),
    with twice the difference as an integer for the exact metric."""
    twice: dict[str, int | None] = {}
    for sim in ("low", "high"):
        key = (case, length, sim)
        ok = key in check.blocks and not check.block_problems[key]
        twice[sim] = _loss2(check.blocks[key]) if ok else None
    low, high = twice["low"], twice["high"]
    diff2 = high - low if high is not None and low is not None else None
    values = PairValues(
        case=case,
        length=length,
        loss_low=None if low is None else low / 2,
        loss_high=None if high is None else high / 2,
        difference=None if diff2 is None else diff2 / 2,
    )
    return values, diff2


def primary(inp: AnalysisInput) -> PrimaryResult:
    """Completeness, per-case differences, the bootstrap interval, decision and caveats."""
    params = AnalysisParameters.of(inp.protocol)
    check = completeness(inp.outcomes)
    lengths = sorted({o.length for o in inp.outcomes})
    denominator = 2 * len(lengths)  # case value = sum of twice-differences / (2 * lengths)
    cases, numerators = [], []
    for case in check.complete_cases:
        pairs = [_pair_values(check, case, length) for length in lengths]
        num = sum(diff2 for _, diff2 in pairs if diff2 is not None)
        numerators.append(num)
        value = Fraction(num, denominator)
        rows = tuple(values for values, _ in pairs)
        cases.append(CaseResult(case=case, lengths=rows, difference=float(value), exact=str(value)))
    exploratory = []
    for case in sorted(check.case_problems, key=natural_key):
        if check.case_problems[case]:
            for length in lengths:
                v, _ = _pair_values(check, case, length)
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
    decision = decide(numerators, denominator, params)
    result = Primary(
        complete_cases=len(cases),
        planned_cases=len(check.case_problems),
        cases=tuple(cases),
        **{name: getattr(decision, name) for name in Decision.__dataclass_fields__},
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
