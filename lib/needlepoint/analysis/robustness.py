"""The robustness panel: how much the preregistered verdict depends on what.

- **Missing cells.** Every response that is not protocol-valid (failed, indeterminate or
  unexecuted) blocks its case. Each is scored correct and wrong: one at a time where it is the
  only missing cell of its case (otherwise that case stays incomplete and nothing changes), and
  all together at four extremes: all correct, all wrong, each at the value that lowers the
  difference (the lower bound) and each at the value that raises it (the upper bound). Identical
  assignments are reported once, with every name they go by.
- **Leave one case out.** The decision without each complete case.
- **Method.** An exact sign-flip test, a BCa interval and two GEE fits, each compared with the
  preregistered decision.

The panel ends in one line: ``robust``, or ``fragile: changes when …`` naming each change. The
preregistered decision itself never changes: these are what-ifs, reported beside it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction

from needlepoint.analysis.bootstrap import tail_probabilities
from needlepoint.analysis.clustered import bca_interval, quick_decision, sign_flip
from needlepoint.analysis.decision import NOT_EVALUABLE, SUPPORTED, fmt, meets_rule
from needlepoint.analysis.effects import preregistered_numerators, scores
from needlepoint.analysis.inference import Robustness, Scenario, SecondInterval, SignFlip
from needlepoint.analysis.inputs import Outcome
from needlepoint.analysis.record import AnalysisParameters, Primary

BCA = "BCa (scipy.stats.bootstrap)"


def raises_difference(o: Outcome) -> bool:
    """Whether a correct answer in this cell raises the similarity difference in middle loss.

    B and E raise the middle loss, M lowers it; high similarity counts plus, low minus. A does
    not enter the metric, so either value serves; it is scored correct.
    """
    if o.condition not in ("B", "M", "E"):
        return True
    return (o.similarity == "high") == (o.condition in ("B", "E"))


def _cell_name(o: Outcome) -> str:
    return f"seq {o.seq} ({o.case}, {o.length} records, {o.similarity}, {o.condition})"


def _scenario(
    kind: str,
    label: str,
    outcomes: Sequence[Outcome],
    assignment: dict[int, bool],
    params: AnalysisParameters,
    observed: str,
) -> Scenario:
    def scored(o: Outcome) -> Outcome:
        if o.seq not in assignment:
            return o
        # The numerators read the status alone: a scored cell is valid whatever kind it had.
        return replace(o, status="correct" if assignment[o.seq] else "error")

    _, nums, den = preregistered_numerators([scored(o) for o in outcomes])
    return _from_decision(kind, label, tuple(sorted(assignment)), nums, den, params, observed)


def _from_decision(
    kind: str,
    label: str,
    cells: tuple[int, ...],
    nums: Sequence[int],
    den: int,
    params: AnalysisParameters,
    observed: str,
) -> Scenario:
    d = quick_decision(nums, den, params)
    text = lambda x: None if x is None else str(x)  # noqa: E731
    return Scenario(
        kind=kind,
        label=label,
        cells=cells,
        complete_cases=d.cases,
        estimate=None if d.estimate is None else float(d.estimate),
        estimate_exact=text(d.estimate),
        lower_exact=text(d.lower),
        upper_exact=text(d.upper),
        decision=d.decision,
        changes=d.decision != observed,
    )


def missing_scenarios(
    outcomes: Sequence[Outcome], params: AnalysisParameters, observed: str
) -> tuple[Scenario, ...]:
    """The decision with the missing cells scored: one at a time, then at the four extremes."""
    missing = [o for o in outcomes if not o.valid]
    if not missing:
        return ()
    per_case = Counter(o.case for o in missing)
    plans: list[tuple[str, str, dict[int, bool]]] = []
    for o in missing:
        if per_case[o.case] == 1:
            for right in (True, False):
                label = f"{_cell_name(o)} is scored {'correct' if right else 'wrong'}"
                plans.append(("one cell", label, {o.seq: right}))
    every = {
        "every missing cell is scored correct": {o.seq: True for o in missing},
        "every missing cell is scored wrong": {o.seq: False for o in missing},
        "every missing cell is set to lower the difference (lower bound)": {
            o.seq: not raises_difference(o) if o.condition != "A" else True for o in missing
        },
        "every missing cell is set to raise the difference (upper bound)": {
            o.seq: raises_difference(o) for o in missing
        },
    }
    plans += [("all cells", label, a) for label, a in every.items()]
    merged: dict[frozenset[tuple[int, bool]], tuple[str, list[str], dict[int, bool]]] = {}
    for kind, label, assignment in plans:
        key = frozenset(assignment.items())
        if key in merged:
            merged[key][1].append(label)
        else:
            merged[key] = (kind, [label], assignment)
    return tuple(
        _scenario(kind, "; ".join(labels), outcomes, assignment, params, observed)
        for kind, labels, assignment in merged.values()
    )


def leave_one_out(
    cases: Sequence[str], nums: Sequence[int], den: int, params: AnalysisParameters, observed: str
) -> tuple[Scenario, ...]:
    """The decision without each complete case in turn."""
    return tuple(
        _from_decision(
            "leave one out",
            f"without {case}",
            (),
            [*nums[:i], *nums[i + 1 :]],
            den,
            params,
            observed,
        )
        for i, case in enumerate(cases)
    )


def _sign_flip(
    nums: Sequence[int], den: int, params: AnalysisParameters, primary: Primary
) -> SignFlip:
    r = sign_flip(nums, den, params)
    alpha, _ = tail_probabilities(float(params.confidence))
    # The test's counterpart of "the lower bound is above 0": p below the interval's tail α.
    passes = meets_rule(Fraction(sum(nums), len(nums) * den), alpha - r.p_one_sided, params)
    return SignFlip(
        cases=r.cases,
        method=r.method,
        patterns=r.patterns,
        seed=r.seed,
        statistic_exact=str(r.statistic),
        p_one_sided=float(r.p_one_sided),
        p_one_sided_exact=str(r.p_one_sided),
        p_two_sided=float(r.p_two_sided),
        p_two_sided_exact=str(r.p_two_sided),
        agrees=passes == (primary.decision == SUPPORTED),
    )


def _second_interval(
    nums: Sequence[int], den: int, params: AnalysisParameters, primary: Primary
) -> SecondInterval:
    r = bca_interval(nums, den, params)
    agrees = None
    if r.lower is not None:
        passes = meets_rule(Fraction(sum(nums), len(nums) * den), Fraction(r.lower), params)
        agrees = passes == (primary.decision == SUPPORTED)
    return SecondInterval(
        BCA, float(params.confidence), r.lower, r.upper, r.resamples, r.seed, r.note, agrees
    )


def robustness(
    outcomes: Sequence[Outcome], params: AnalysisParameters, primary: Primary
) -> Robustness:
    """The whole panel for one run, ending in its one-line verdict."""
    from needlepoint.analysis.model_check import model_fits

    observed = primary.decision
    cases, nums, den = preregistered_numerators(outcomes)
    missing = missing_scenarios(outcomes, params, observed)
    evaluable = observed != NOT_EVALUABLE
    loo = leave_one_out(cases, nums, den, params, observed) if evaluable else ()
    flip = _sign_flip(nums, den, params, primary) if evaluable else None
    second = _second_interval(nums, den, params, primary) if evaluable else None
    models = ()
    if evaluable:
        lengths = sorted({o.length for o in outcomes})
        estimate = Fraction(sum(nums), len(nums) * den)
        models = model_fits(scores(outcomes), cases, lengths, estimate, observed, params)
    changes = [f"{s.label.split('; ')[0]} ({s.decision})" for s in missing if s.changes]
    changes += [f"case {s.label.removeprefix('without ')} is left out ({s.decision})"
                for s in loo if s.changes]  # fmt: skip
    if second is not None and second.agrees is False:
        changes.append(f"the BCa interval decides instead (lower bound {fmt(second.lower or 0)})")
    if flip is not None and not flip.agrees:
        changes.append(f"the sign-flip test decides instead (one-sided p {flip.p_one_sided_exact})")
    changes += [f"the {m.model} decides instead" for m in models if m.agrees is False]
    verdict = "robust" if not changes else "fragile: changes when " + "; when ".join(changes)
    return Robustness(
        missing=missing,
        leave_one_out=loo,
        sign_flip=flip,
        second_interval=second,
        models=models,
        changes=tuple(changes),
        verdict=verdict,
    )
