"""Where the effect is, and what a reviewer asks for: descriptive tables beside the decision.

**Effects.** Every measure is taken over the complete cases of the primary analysis, per case
first (the lengths averaged, as the primary metric does) and then over cases with equal weight,
so the high − low row of the middle loss is the preregistered difference itself. Each has the
preregistered interval (``bootstrap.case_interval``). Accuracy by position uses every case with
a valid answer in that cell. Per case every value is an integer over a common denominator
(``primary.numerators``), so estimates and bounds are exact fractions.

**Diagnostics.**

- Accuracy of the answer-present conditions (B, M, E) by the response's position within its
  block (1st to 4th in execution order), by execution half (seq up to half the plan, or after)
  and by session (from the journal; a results table has none).
- Wrong answers (B, M, E) by what they name: a near name's code, by that name's kind
  (``substitution``, ``swap``, ``qualifier``; ``unrelated`` for the names at the same slots under
  low similarity), another code of the request, a code that is not in it, or no code at all.
- High-similarity answers by how many near names precede the target in the request: none for B,
  all six for E, and for M those at slots ``floor((2k+1)·N/12)`` below ``N // 2``.

None of this feeds the decision.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

from needlepoint.analysis.bootstrap import case_interval
from needlepoint.analysis.inputs import Outcome
from needlepoint.analysis.primary import (
    DIFFERENCE,
    MEASURES,
    POSITIONS,
    SIMILARITIES,
    case_numerators,
    completeness,
    natural_key,
    scores,
)
from needlepoint.analysis.record import (
    AnalysisParameters,
    DiagnosticRow,
    Diagnostics,
    Effect,
    Effects,
    PrecedingRow,
    WrongKindRow,
)
from needlepoint.analysis.shape import shapes


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
        r = case_interval(numerators, denominator, params)
        lower, upper = r.lower_exact, r.upper_exact
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
    return Effects(
        cases=len(cases),
        measures=tuple(measures),
        positions=tuple(positions),
        shapes=shapes(outcomes, params),
    )


def find(rows: Iterable[Effect], measure: str, sim: str, length: int | None = None) -> Effect:
    """The row of one measure and similarity (averaged over lengths unless ``length``)."""
    return next(r for r in rows if (r.measure, r.similarity, r.length) == (measure, sim, length))


# --- diagnostics ---------------------------------------------------------------------------------


PRESENT = POSITIONS  # the answer-present conditions
NEAR_KINDS = ("substitution", "swap", "qualifier", "unrelated")
OTHER_KINDS = {
    "other_present_code": "another code of the request",
    "absent_code": "a code not in the request",
}
NO_CODE = "no code (unknown, extra text or bad format)"


def _row(group: str, level: str, rows: Sequence[Outcome]) -> DiagnosticRow:
    valid = [o for o in rows if o.valid]
    correct = sum(o.status == "correct" for o in valid)
    return DiagnosticRow(group, level, len(valid), correct, correct / len(valid) if valid else None)


def preceding_near_names(condition: str, length: int) -> int:
    """How many of the six near-name slots come before the inserted record."""
    if condition == "B":
        return 0
    if condition == "E":
        return 6
    if length < 0:  # the slot rule below holds for record counts, never for a negative one
        raise ValueError(f"length {length}: a background has at least 0 records")
    half = length // 2
    return sum(((2 * k + 1) * length) // 12 < half for k in range(6))


def accuracy_rows(
    outcomes: Sequence[Outcome], sessions: Mapping[int, int] | None
) -> tuple[DiagnosticRow, ...]:
    """B, M, E accuracy by position in block, by execution half and by session."""
    blocks: dict[int, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        blocks[o.block].append(o)
    position = {
        o.seq: i for b in blocks.values() for i, o in enumerate(sorted(b, key=lambda o: o.seq), 1)
    }
    present = [o for o in outcomes if o.condition in PRESENT]
    width = max((len(b) for b in blocks.values()), default=0)
    rows = [
        _row("position in block", str(k), [o for o in present if position[o.seq] == k])
        for k in range(1, width + 1)
    ]
    half = len(outcomes) // 2
    order = sorted(o.seq for o in outcomes)
    cut = order[half - 1] if half else 0
    rows.append(_row("execution half", "first", [o for o in present if o.seq <= cut]))
    rows.append(_row("execution half", "second", [o for o in present if o.seq > cut]))
    if sessions:
        sent = [o for o in present if o.seq in sessions]
        for s in sorted(set(sessions.values())):
            rows.append(_row("session", str(s), [o for o in sent if sessions[o.seq] == s]))
    return tuple(rows)


def _what_it_names(o: Outcome) -> str:
    if o.near_kind is not None:
        return o.near_kind
    return OTHER_KINDS.get(o.kind, NO_CODE)


def wrong_kind_rows(outcomes: Sequence[Outcome]) -> tuple[WrongKindRow, ...]:
    """Wrong B, M, E answers by what they name, per similarity, with their share."""
    rows = []
    order = (*NEAR_KINDS, *OTHER_KINDS.values(), NO_CODE)
    for sim in ("low", "high"):
        wrong = [
            o
            for o in outcomes
            if o.similarity == sim and o.condition in PRESENT and o.status == "error"
        ]
        counts = Counter(_what_it_names(o) for o in wrong)
        rows += [
            WrongKindRow(sim, kind, counts[kind], counts[kind] / len(wrong))
            for kind in order
            if counts[kind]
        ]
    return tuple(rows)


def preceding_rows(outcomes: Sequence[Outcome]) -> tuple[PrecedingRow, ...]:
    """High-similarity B, M, E answers by the number of near names before the target."""
    rows = []
    for length in sorted({o.length for o in outcomes}):
        for cond in PRESENT:
            cell = [
                o
                for o in outcomes
                if (o.length, o.condition, o.similarity) == (length, cond, "high") and o.valid
            ]
            wrong = [o for o in cell if o.status == "error"]
            rows.append(
                PrecedingRow(
                    length=length,
                    condition=cond,
                    preceding=preceding_near_names(cond, length),
                    valid=len(cell),
                    wrong=len(wrong),
                    near=sum(o.near_kind is not None for o in wrong),
                )
            )
    return tuple(rows)


def diagnostics(outcomes: Sequence[Outcome], sessions: Mapping[int, int] | None) -> Diagnostics:
    """Every diagnostic table, with a note for what the input cannot show."""
    notes = []
    if not sessions:
        notes.append("no sessions: a results table records none (analyse the run folder)")
    return Diagnostics(
        accuracy=accuracy_rows(outcomes, sessions),
        wrong_kinds=wrong_kind_rows(outcomes),
        preceding=preceding_rows(outcomes),
        notes=tuple(notes),
    )
