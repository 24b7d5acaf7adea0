"""The robustness panel at each function's own interface, on hand-built outcomes.

A case here is one length (60 records) with its low and high blocks (B, M, A, E); its
numerator of the preregistered difference is ``(B + E − 2M)`` under high minus the same under
low, over a denominator of 2. Every exact fraction asserted is worked out by hand in the
comment beside it: an interval of identical case values is that value, and two or three cases
put the exact percentile bounds at the smallest and largest value whenever one case alone
carries at least 1/40 of the resamples. The same panel on the reference set follows.

The model-based check at its own functions: design, separation, each fit and its fallbacks.
The sign-flip test counts every one of the 2^n sign patterns (brute force below), exact up to
20 cases and seeded Monte Carlo from 21, with p = (1 + hits) / (1 + draws); the BCa interval is
scipy's with the protocol's seed, or a reason when it is undefined. Each is pinned where it
turns: ties with the observed sum, zeros among the sign-flipped values, and the words a reader
sees when an interval is undefined.

The fits are saturated (one indicator per cell) with an independence working correlation, so
their numbers have closed forms that the tests state in words: with n cases and per-case
contrast values d_i, the linear fit's estimate is the mean of d_i and its bias-reduced sandwich
standard error is sqrt(sum (d_i - mean)^2) / (n - 1); the logistic fit's estimate is the contrast
of the cells' logits, and its standard error is sqrt(sum u_i^2) / (n - 1) with
u_i = sum_j c_j (y_ij - p_j) / (p_j (1 - p_j)). The names a reader sees are literal text.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from support.analysis import analysis_params
from support.results import make_input, middle_loss

from needlepoint.analysis.document import build_document
from needlepoint.analysis.inputs import Outcome, from_run
from needlepoint.analysis.primary import preregistered_numerators, primary, scores
from needlepoint.analysis.record import ModelFit, Primary, Scenario, SecondInterval, SignFlip
from needlepoint.analysis.robustness import (
    BCA,
    SIGN_FLIP_EXACT_MAX,
    _design,
    _fit,
    _signed_sum_counts,
    bca_interval,
    leave_one_out,
    missing_scenarios,
    model_fits,
    raises_difference,
    robustness,
    separated_cell,
    sign_flip,
    verdict_text,
)
from needlepoint.design.prepared import Prepared

# === each function on hand-built outcomes ===


LINEAR = "GEE, linear probability (identity link)"
Values = tuple[int, int, int]  # B, M, E: 1 correct, 0 wrong


def cell(seq: int, case: str, sim: str, cond: str, status: str = "correct") -> Outcome:
    return Outcome(seq, 1, 1, case, 60, sim, cond, "B-M-A-E", status, "", None, None, None,
                   None, None, None)  # fmt: skip


def case_cells(
    case: str, start: int, high: Values = (1, 1, 1), low: Values = (1, 1, 1)
) -> list[Outcome]:
    """Eight cells, seq ``start`` on: low B, M, A, E, then high B, M, A, E."""
    out = []
    for sim, (b, m, e) in (("low", low), ("high", high)):
        for cond, right in (("B", b), ("M", m), ("A", 1), ("E", e)):
            out.append(cell(start + len(out), case, sim, cond, "correct" if right else "error"))
    return out


def cases(*numerators: int) -> list[Outcome]:
    """Cases S1, S2, … with the given numerators (over 2), each from 2 down to −2."""
    shapes = {2: ((1, 0, 1), (1, 1, 1)), 1: ((1, 0, 0), (1, 1, 1)), 0: ((1, 1, 1), (1, 1, 1)),
              -1: ((1, 1, 1), (1, 0, 0)), -2: ((1, 1, 1), (1, 0, 1))}  # fmt: skip
    out: list[Outcome] = []
    for i, v in enumerate(numerators):
        high, low = shapes[v]
        out += case_cells(f"S{i + 1}", 8 * i + 1, high, low)
    return out


def missing(outcomes: list[Outcome], seq: int, status: str = "unexecuted") -> list[Outcome]:
    return [replace(o, status=status) if o.seq == seq else o for o in outcomes]


def prim(decision: str) -> Primary:
    return Primary(
        threshold=0.1, estimate=None, estimate_exact=None, interval=None, decision=decision,
        reason="", complete_cases=0, planned_cases=0, cases=(),
    )  # fmt: skip


# raises_difference -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("similarity", "condition", "raises"),
    [
        ("high", "B", True),
        ("high", "M", False),
        ("high", "E", True),
        ("high", "A", True),
        ("low", "B", False),
        ("low", "M", True),
        ("low", "E", False),
        ("low", "A", True),
    ],
)
def test_a_correct_b_or_e_raises_the_difference_under_high_similarity_and_m_under_low(
    similarity: str, condition: str, raises: bool
) -> None:
    assert raises_difference(cell(1, "S1", similarity, condition)) is raises


# missing_scenarios -----------------------------------------------------------------------------


def test_no_missing_cell_gives_no_scenario() -> None:
    assert missing_scenarios(cases(2, 2), analysis_params(), "supported") == ()


def test_a_cases_only_missing_cell_is_scored_both_ways_and_merged_with_the_extremes() -> None:
    # S3's high M (seq 22) is unexecuted. Correct: S3 is 0, [2, 2, 0]/2 = 2/3 in [0, 1] (one S3
    # alone is 1/27 of the resamples, above 1/40), not supported. Wrong: [2, 2, 2]/2, [1, 1].
    # A correct high M lowers the difference, so the lower bound scores it correct.
    outcomes = missing(cases(2, 2, 0), 22)
    rows = missing_scenarios(outcomes, analysis_params(), "supported")
    name = "seq 22 (S3, 60 records, high, M)"
    assert rows == (
        Scenario(
            kind="one cell",
            label=f"{name} is scored correct; every missing cell is scored correct; every "
            "missing cell is set to lower the difference (lower bound)",
            cells=(22,),
            complete_cases=3,
            estimate=2 / 3,
            estimate_exact="2/3",
            lower_exact="0",
            upper_exact="1",
            decision="not supported",
            changes=True,
        ),
        Scenario(
            kind="one cell",
            label=f"{name} is scored wrong; every missing cell is scored wrong; every missing "
            "cell is set to raise the difference (upper bound)",
            cells=(22,),
            complete_cases=3,
            estimate=1.0,
            estimate_exact="1",
            lower_exact="1",
            upper_exact="1",
            decision="supported",
            changes=False,
        ),
    )


def test_a_missing_a_cell_is_scored_correct_at_both_bounds() -> None:
    # A does not enter the metric: scored correct or wrong, S2 is complete with 0 either way.
    outcomes = missing(cases(2, 0), 11, "protocol_failure")
    rows = missing_scenarios(outcomes, analysis_params(), "not evaluable")
    name = "seq 11 (S2, 60 records, low, A)"
    assert [r.label for r in rows] == [
        f"{name} is scored correct; every missing cell is scored correct; every missing cell is "
        "set to lower the difference (lower bound); every missing cell is set to raise the "
        "difference (upper bound)",
        f"{name} is scored wrong; every missing cell is scored wrong",
    ]
    assert [(r.estimate_exact, r.lower_exact, r.upper_exact) for r in rows] == [
        ("1/2", "0", "1")
    ] * 2
    assert [(r.decision, r.changes) for r in rows] == [("not supported", True)] * 2


def test_two_missing_cells_of_one_case_are_scored_only_together() -> None:
    # S2's high B (seq 13) and high M (seq 14) are missing; S1 is 2. Listed in reverse, so the
    # cells come back sorted. Both correct: S2 is 0; both wrong: 1; lower (B wrong, M right):
    # −1; upper (B right, M wrong): 2.
    outcomes = missing(missing(cases(2, 0), 13), 14)[::-1]
    rows = missing_scenarios(outcomes, analysis_params(), "not evaluable")
    assert [r.kind for r in rows] == ["all cells"] * 4
    assert [r.cells for r in rows] == [(13, 14)] * 4
    assert [r.label for r in rows] == [
        "every missing cell is scored correct",
        "every missing cell is scored wrong",
        "every missing cell is set to lower the difference (lower bound)",
        "every missing cell is set to raise the difference (upper bound)",
    ]
    assert [r.estimate_exact for r in rows] == ["1/2", "3/4", "1/4", "1"]
    assert [r.complete_cases for r in rows] == [2] * 4
    assert [r.decision for r in rows] == [
        "not supported",
        "supported",
        "not supported",
        "supported",
    ]


def test_a_case_with_two_missing_cells_stays_incomplete_when_another_case_is_scored() -> None:
    # S2 misses seq 13 and 14 (no one-cell rows); S3 misses only seq 22, scored alone: S2 stays
    # out, so two complete cases remain, [2, 0] or [2, 2].
    outcomes = missing(missing(missing(cases(2, 0, 0), 13), 14), 22)
    rows = missing_scenarios(outcomes, analysis_params(), "not evaluable")
    one = [r for r in rows if r.kind == "one cell"]
    assert [r.label for r in one] == [
        "seq 22 (S3, 60 records, high, M) is scored correct",
        "seq 22 (S3, 60 records, high, M) is scored wrong",
    ]
    assert [(r.cells, r.complete_cases, r.estimate_exact) for r in one] == [
        ((22,), 2, "1/2"),
        ((22,), 2, "1"),
    ]
    assert [r.cells for r in rows if r.kind == "all cells"] == [(13, 14, 22)] * 4


def test_a_scenario_below_the_minimum_is_not_evaluable_with_no_numbers() -> None:
    outcomes = missing(cases(2, 2), 6)
    [right, wrong] = missing_scenarios(outcomes, analysis_params(min_complete_cases=3), "x")
    assert right == replace(wrong, label=right.label)
    assert (right.complete_cases, right.decision, right.changes) == (2, "not evaluable", True)
    assert (right.estimate, right.estimate_exact, right.lower_exact, right.upper_exact) == (
        None,
        None,
        None,
        None,
    )


# leave_one_out ---------------------------------------------------------------------------------


def test_leaving_each_case_out_in_turn() -> None:
    # [0, 2, 4]/2: without S1 [1, 2], without S2 [0, 2], without S3 [0, 1].
    rows = leave_one_out(["S1", "S2", "S3"], [0, 2, 4], 2, analysis_params(), "not supported")
    assert rows == (
        Scenario("leave one out", "without S1", (), 2, 1.5, "3/2", "1", "2", "supported", True),
        Scenario("leave one out", "without S2", (), 2, 1.0, "1", "0", "2", "not supported", False),
        Scenario(
            "leave one out", "without S3", (), 2, 0.5, "1/2", "0", "1", "not supported", False
        ),
    )


def test_leaving_one_out_from_a_shared_draw_refuses_cases_and_numerators_that_differ() -> None:
    # Above the exact limit the bounds come from one shared draw, one per numerator: a case
    # list of another length would name them wrongly, so it is refused, not cut short.
    params = analysis_params(exact_bootstrap_max_cases=2, bootstrap_resamples=200)
    nums = [2, 0, 2, 2, 1]
    assert len(leave_one_out(["S1", "S2", "S3", "S4", "S5"], nums, 2, params, "supported")) == 5
    for cases in (["S1", "S2", "S3", "S4"], ["S1", "S2", "S3", "S4", "S5", "S6"]):
        with pytest.raises(ValueError, match="zip"):
            leave_one_out(cases, nums, 2, params, "supported")


def test_leaving_out_the_only_case_leaves_nothing_to_decide() -> None:
    assert leave_one_out([], [], 2, analysis_params(), "supported") == ()
    [row] = leave_one_out(["S1"], [2], 2, analysis_params(min_complete_cases=0), "supported")
    assert (row.label, row.complete_cases, row.decision, row.changes) == (
        "without S1",
        0,
        "not evaluable",
        True,
    )


def test_any_one_other_method_that_agrees_is_named_in_a_robust_verdict() -> None:
    agreeing = SecondInterval(BCA, 0.95, 0.1, 0.4, 1000, 1, "", True)
    fit = ModelFit(LINEAR, SANDWICH, 4, 0.2, 0.05, 3, 0.1, 0.3, 0.01, "", True)
    for flip, second, models in ((None, agreeing, ()), (None, None, (fit,))):
        assert verdict_text((), (), flip, second, models) == (
            "robust: no missing cell and no other method changes it"
        )
    assert verdict_text((), (), None, None, ()) == "robust: no missing cell changes it"


# robustness ------------------------------------------------------------------------------------


def test_a_run_that_is_not_evaluable_gets_only_the_missing_cell_scenarios() -> None:
    # One complete case of two: only scoring S2's missing high M decides anything.
    outcomes = missing(cases(2, 2), 14)
    r = robustness(outcomes, analysis_params(), prim("not evaluable"))
    assert (r.leave_one_out, r.sign_flip, r.second_interval, r.models) == ((), None, None, ())
    assert r.changes == (
        "seq 14 (S2, 60 records, high, M) is scored correct (not supported)",
        "seq 14 (S2, 60 records, high, M) is scored wrong (supported)",
    )
    assert r.verdict == (
        "fragile: it flips when seq 14 (S2, 60 records, high, M) is scored correct (not "
        "supported); when seq 14 (S2, 60 records, high, M) is scored wrong (supported)"
    )
    assert [s.label.split("; ")[1] for s in r.missing] == [
        "every missing cell is scored correct",
        "every missing cell is scored wrong",
    ]


def test_a_not_evaluable_run_with_nothing_missing_is_robust() -> None:
    r = robustness(cases(2), analysis_params(), prim("not evaluable"))
    assert (r.missing, r.changes, r.verdict) == ((), (), "robust: no missing cell changes it")


def test_a_run_every_check_agrees_with_is_robust() -> None:
    # Six cases of [2, 2, 2, 2, 1, 1]/2: 5/6, supported; six positive signs give p = 1/64 < 1/40.
    r = robustness(cases(2, 2, 2, 2, 1, 1), analysis_params(), prim("supported"))
    assert [(s.label, s.decision, s.changes) for s in r.leave_one_out] == [
        (f"without S{i}", "supported", False) for i in range(1, 7)
    ]
    assert r.sign_flip == SignFlip(
        6, "exact", 64, None, "5/6", 1 / 64, "1/64", 1 / 32, "1/32", True
    )
    assert r.second_interval is not None and r.second_interval.agrees is True
    assert [m.agrees for m in r.models if m.model == LINEAR] == [True]
    assert (r.missing, r.changes) == ((), ())
    assert r.verdict == (
        "robust: no missing cell, no single case and no other method changes it; sign-flip p 1/64"
    )


def test_a_run_every_check_contradicts_names_each_change_in_order() -> None:
    # [2, −2, 2, −2, 1]/2 = 1/10 with an interval around 0 (half the signs give a positive sum:
    # p = 1/2), read against a "supported" primary.
    r = robustness(cases(2, -2, 2, -2, 1), analysis_params(), prim("supported"))
    assert r.second_interval is not None and r.second_interval.lower is not None
    bca = f"{r.second_interval.lower:.4g}"
    assert r.sign_flip is not None and r.sign_flip.p_one_sided_exact == "1/2"
    assert r.changes == (
        "case S1 is left out (not supported)",
        "case S2 is left out (not supported)",
        "case S3 is left out (not supported)",
        "case S4 is left out (not supported)",
        "case S5 is left out (not supported)",
        f"the BCa interval decides instead (lower bound {bca})",
        "the sign-flip test decides instead (one-sided p 1/2)",
        f"the {LINEAR} decides instead",
    )
    assert r.verdict == (
        "fragile: leaving out S1, S2, S3, S4 or S5 flips it (5 of 5 cases); the BCa interval "
        f"disagrees (lower bound {bca}); the sign-flip test disagrees (p 1/2); the {LINEAR} "
        "disagrees"
    )


def test_the_sign_flip_passes_only_with_p_below_the_intervals_tail() -> None:
    # At 75 % confidence the tail is 1/8: three positive cases give p = 1/8 exactly (fails),
    # four give 1/16 (passes). A "supported" primary agrees only with the passing test.
    p = analysis_params(confidence=0.75)
    three = robustness(cases(2, 2, 2), p, prim("supported")).sign_flip
    assert three == SignFlip(3, "exact", 8, None, "1", 0.125, "1/8", 0.25, "1/4", False)
    four = robustness(cases(2, 2, 2, 2), p, prim("supported")).sign_flip
    assert four is not None and (four.p_one_sided_exact, four.agrees) == ("1/16", True)
    assert robustness(cases(2, 2, 2, 2), p, prim("not supported")).sign_flip.agrees is False


def test_the_sign_flip_also_needs_the_estimate_at_the_threshold() -> None:
    # Four cases of 1/2 give p = 1/16 below the tail 1/8, but 1/2 is under a threshold of 0.6.
    p = analysis_params(confidence=0.75, threshold=0.6)
    flip = robustness(cases(1, 1, 1, 1), p, prim("not supported")).sign_flip
    assert flip is not None and (flip.p_one_sided_exact, flip.agrees) == ("1/16", True)
    at = analysis_params(confidence=0.75, threshold=0.5)
    assert robustness(cases(1, 1, 1, 1), at, prim("supported")).sign_flip.agrees is True


def test_the_second_interval_is_scipys_bca_with_the_protocols_seed() -> None:
    p = analysis_params(bootstrap_resamples=500, bootstrap_seed=3)
    r = robustness(cases(2, 2, 1, 2, 1), p, prim("supported")).second_interval
    assert r is not None and r.lower is not None and r.upper is not None
    assert r == SecondInterval(
        "BCa (scipy.stats.bootstrap)", 0.95, r.lower, r.upper, 500, 3, "", True
    )
    assert 0 < r.lower < 0.8 < r.upper <= 1


def test_the_second_interval_agrees_only_where_its_lower_bound_meets_the_rule() -> None:
    # [2, 2, 1, 2, 1]/2 = 4/5: the BCa lower bound is above 0, so the rule is met at a
    # threshold of 0.8 and not at 0.85.
    at = robustness(cases(2, 2, 1, 2, 1), analysis_params(threshold=0.8), prim("supported"))
    assert at.second_interval is not None and at.second_interval.agrees is True
    above = analysis_params(threshold=0.85)
    over = robustness(cases(2, 2, 1, 2, 1), above, prim("not supported")).second_interval
    assert over is not None and over.agrees is True
    wrong = robustness(cases(2, 2, 1, 2, 1), above, prim("supported")).second_interval
    assert wrong is not None and wrong.agrees is False


def test_an_undefined_second_interval_neither_agrees_nor_disagrees() -> None:
    r = robustness(cases(2, 2, 2, 2, 2, 2), analysis_params(), prim("supported"))
    assert r.second_interval == SecondInterval(
        "BCa (scipy.stats.bootstrap)",
        0.95,
        None,
        None,
        2000,
        20260930,
        "undefined: every case has the same value",
        None,
    )
    assert not any("BCa" in c for c in r.changes)


def test_a_missing_cell_whose_scoring_changes_nothing_leaves_the_run_robust() -> None:
    # S1's low A (seq 3) is missing; A does not enter the metric, so both scorings give
    # [2, 2, 2, 2, 2, 1, 1]/2, supported as the observed run's six complete cases are.
    outcomes = missing(cases(2, 2, 2, 2, 2, 1, 1), 3)
    r = robustness(outcomes, analysis_params(), prim("supported"))
    assert [(s.decision, s.changes) for s in r.missing] == [("supported", False)] * 2
    assert (r.changes, r.verdict) == (
        (),
        "robust: no way of scoring its 1 missing cell, no single case and no other method "
        f"changes it; sign-flip p {r.sign_flip.p_one_sided_exact}",
    )


def test_the_models_read_the_threshold_against_the_mean_of_the_cases() -> None:
    # [1, 1, 1, 1, 1, 2]/2 = 7/12, under a threshold of 0.6 (and its sum 7 over it): the linear
    # fit's interval is above 0, but the rule is not met, as a "not supported" primary says.
    r = robustness(cases(1, 1, 1, 1, 1, 2), analysis_params(threshold=0.6), prim("not supported"))
    [linear] = [m for m in r.models if m.model == LINEAR]
    assert linear.lower is not None and linear.lower > 0
    assert linear.agrees is True
    assert not any("GEE" in c for c in r.changes)


def test_a_bca_lower_bound_of_0_is_named_as_0() -> None:
    # [2, 0]/2: the BCa interval is [0, 1]; its lower bound 0 fails the rule.
    r = robustness(cases(2, 0), analysis_params(), prim("supported"))
    assert r.second_interval is not None and r.second_interval.lower == 0
    assert "the BCa interval decides instead (lower bound 0)" in r.changes


def test_above_twenty_cases_the_sign_flip_is_seeded_monte_carlo() -> None:
    p = analysis_params(bootstrap_resamples=20, bootstrap_seed=5, exact_bootstrap_max_cases=3)
    flip = robustness(cases(*[2] * 21), p, prim("supported")).sign_flip
    # No draw of 20 reaches all 21 plus signs: p = 1/21 on both sides, above the tail 1/40.
    assert flip == SignFlip(21, "monte-carlo", 20, 5, "1", 1 / 21, "1/21", 1 / 21, "1/21", False)


# === the panel on the reference set ===


GEMMA = Path(__file__).resolve().parents[2] / "evidence" / "20261201-local-compare" / "runs"


@pytest.mark.parametrize(
    ("similarity", "condition", "raises"),
    [
        ("high", "B", True),
        ("high", "E", True),
        ("high", "M", False),
        ("low", "B", False),
        ("low", "E", False),
        ("low", "M", True),
        ("low", "A", True),
        ("high", "A", True),
    ],
)
def test_which_correct_answer_raises_the_difference(
    similarity: str, condition: str, raises: bool
) -> None:
    o = Outcome(1, 1, 1, "S1", 60, similarity, condition, "B-M-A-E", "unexecuted", "",
                None, None, None, None, None, None)  # fmt: skip
    assert raises_difference(o) is raises


def test_one_cell_scenarios_only_for_a_cases_only_missing_cell(prepared: Prepared) -> None:
    s1 = [p.seq for p in prepared.plan if p.case == "S1" and p.condition == "M"][:2]
    s2 = next(p.seq for p in prepared.plan if p.case == "S2" and p.condition == "A")
    spec = {s1[0]: "unexecuted", s1[1]: "failure:http_status", s2: "unexecuted"}
    inp = make_input(prepared, spec)
    observed = primary(inp).primary.decision
    rows = missing_scenarios(inp.outcomes, analysis_params(), observed)
    one = [r for r in rows if r.kind == "one cell"]
    assert [r.cells for r in one] == [(s2,), (s2,)]  # S1 has two missing cells: none alone
    assert [r.label.split(" is scored ")[1].split(";")[0] for r in one] == ["correct", "wrong"]
    every = [r for r in rows if r.kind == "all cells"]
    assert all(r.cells == tuple(sorted((*s1, s2))) for r in every)
    assert {r.complete_cases for r in every} == {8}
    # The A cell scored either way changes nothing but completeness: both one-cell rows agree.
    assert one[0].estimate_exact == one[1].estimate_exact


def test_identical_assignments_are_reported_once_with_every_name(prepared: Prepared) -> None:
    seq = next(
        p.seq for p in prepared.plan if (p.case, p.condition, p.similarity) == ("S1", "M", "low")
    )
    inp = make_input(prepared, {seq: "failure:http_status"})
    rows = missing_scenarios(inp.outcomes, analysis_params(), "not supported")
    assert len(rows) == 2
    assert rows[0].label == (
        f"seq {seq} (S1, {rows[0].label.split(', ')[1]}, low, M) is scored correct; every "
        "missing cell is scored correct; every missing cell is set to raise the difference "
        "(upper bound)"
    )
    assert rows[1].label.endswith("every missing cell is set to lower the difference (lower bound)")


def test_no_missing_cell_no_scenario(prepared: Prepared) -> None:
    assert missing_scenarios(make_input(prepared).outcomes, analysis_params(), "x") == ()


def test_leaving_a_case_out_at_the_minimum_makes_it_not_evaluable() -> None:
    rows = leave_one_out(["S1", "S2"], [2, 2], 4, analysis_params(), "supported")
    assert [r.decision for r in rows] == ["not evaluable", "not evaluable"]
    assert all(r.changes and r.estimate is None for r in rows)
    three = leave_one_out(["S1", "S2", "S3"], [2, 2, 2], 4, analysis_params(), "supported")
    assert [r.decision for r in three] == ["supported"] * 3 and not any(r.changes for r in three)


def test_a_run_that_nothing_changes_is_robust(prepared: Prepared) -> None:
    # Every case loses the whole middle under high similarity only: 1 everywhere.
    spec = middle_loss({f"S{i}": ("high",) for i in range(1, 9)})
    doc = build_document(make_input(prepared, spec))
    r = doc.robustness
    assert doc.primary.decision == "supported" and r.missing == ()
    assert r.sign_flip is not None and r.sign_flip.agrees
    assert r.second_interval is not None and r.second_interval.agrees is None  # BCa undefined
    assert r.changes == () and r.verdict == (
        "robust: no missing cell, no single case and no other method changes it; sign-flip p 1/256"
    )


def test_a_sign_flip_that_cannot_reject_makes_three_cases_fragile(prepared: Prepared) -> None:
    # Three identical positive cases: the percentile interval is [1, 1] (supported), but three
    # signs give p = 1/8, above 1/40: the method changes the verdict, and the panel says so.
    spec = middle_loss({f"S{i}": ("high",) for i in (1, 2, 3)})
    outcomes = [o for o in make_input(prepared, spec).outcomes if o.case in ("S1", "S2", "S3")]
    pr = replace(primary(make_input(prepared, spec)).primary, decision="supported")
    r = robustness(outcomes, analysis_params(), pr)
    assert r.sign_flip is not None and r.sign_flip.p_one_sided_exact == "1/8"
    assert not r.sign_flip.agrees
    assert r.verdict == "fragile: the sign-flip test disagrees (p 1/8)"


def test_the_linear_model_reproduces_the_estimate_and_the_logistic_names_separation() -> None:
    inp = from_run(GEMMA / "gemma3")
    cases, _, _ = preregistered_numerators(inp.outcomes)

    fits = model_fits(scores(inp.outcomes), cases, [12], Fraction(5, 14), "not supported",
                      analysis_params())  # fmt: skip
    logistic, linear = fits
    assert logistic.model == LOGISTIC and logistic.estimate is None
    assert logistic.note.startswith("not estimable: B under low similarity at 12 records is all")
    assert linear.model == LINEAR and linear.estimate == pytest.approx(5 / 14)
    assert linear.df == 6 and linear.lower is not None and linear.lower < 0 < linear.upper
    assert linear.agrees is True


def test_the_logistic_fit_runs_when_no_cell_is_all_one_way(prepared: Prepared) -> None:
    wrong = {("S1", "high", "M"), ("S2", "low", "B"), ("S3", "high", "E"), ("S4", "low", "M")}
    wrong |= {("S5", "high", "B"), ("S6", "low", "E"), ("S7", "high", "M"), ("S8", "low", "M")}

    def spec(p) -> str:
        return "error:absent_code" if (p.case, p.similarity, p.condition) in wrong else "correct"

    outcomes = [o for o in make_input(prepared, spec).outcomes if o.length == 60]
    cases, nums, den = preregistered_numerators(outcomes)
    est = Fraction(sum(nums), len(nums) * den)
    logistic, linear = model_fits(scores(outcomes), cases, [60], est, "not supported",
                                  analysis_params())  # fmt: skip
    assert logistic.note == "" and logistic.estimate is not None and logistic.se
    assert linear.estimate == pytest.approx(float(est))


# === the model-based check ===


LOGISTIC = "GEE, logistic (logit link)"
SANDWICH = "bias-reduced sandwich (Mancl–DeRouen), t on cases − 1 df"
ORDER = [(sim, pos) for sim in ("low", "high") for pos in ("B", "M", "E")]
# The middle-loss contrast for one length: (B + E)/2 − M, high minus low.
CONTRAST = np.array([-0.5, 1.0, -0.5, 0.5, -1.0, 0.5])
# Four cases whose every cell has both a right and a wrong answer (no separation); the answers
# in ORDER: low B, M, E, high B, M, E.
VARIED = {
    "S1": (1, 1, 0, 0, 0, 1),
    "S2": (0, 1, 1, 1, 0, 0),
    "S3": (1, 0, 1, 1, 1, 0),
    "S4": (0, 1, 1, 0, 1, 1),
}


def score_of(answers: dict[str, tuple[int, ...]], length: int = 60) -> dict:
    return {
        (case, length, sim, pos): a
        for case, row in answers.items()
        for (sim, pos), a in zip(ORDER, row, strict=True)
    }


def design_of(answers: dict[str, tuple[int, ...]]):
    return _design(score_of(answers), list(answers), [60])


def unfit(model: str, cases: int, note: str) -> ModelFit:
    return ModelFit(model, SANDWICH, cases, None, None, cases - 1, None, None, None, note, None)


# _design


def test_the_design_has_a_row_per_case_and_cell_low_before_high_then_length_position() -> None:
    answers = {
        ("S1", 12, "low", "B"): 1, ("S1", 12, "low", "M"): 0, ("S1", 12, "low", "E"): 1,
        ("S1", 12, "high", "B"): 0, ("S1", 12, "high", "M"): 1, ("S1", 12, "high", "E"): 1,
        ("S1", 60, "low", "B"): 1, ("S1", 60, "low", "M"): 1, ("S1", 60, "low", "E"): 0,
        ("S1", 60, "high", "B"): 1, ("S1", 60, "high", "M"): 0, ("S1", 60, "high", "E"): 0,
    }  # fmt: skip
    score = answers | {("S2", n, s, p): 1 - a for (_, n, s, p), a in answers.items()}
    y, x, groups, contrast, cells = _design(score, ["S1", "S2"], [12, 60])
    assert cells == [
        ("low", 12, "B"), ("low", 12, "M"), ("low", 12, "E"),
        ("low", 60, "B"), ("low", 60, "M"), ("low", 60, "E"),
        ("high", 12, "B"), ("high", 12, "M"), ("high", 12, "E"),
        ("high", 60, "B"), ("high", 60, "M"), ("high", 60, "E"),
    ]  # fmt: skip
    s1 = [1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0]
    assert y.dtype == np.float64
    assert y.tolist() == s1 + [1 - a for a in s1]
    assert x.shape == (24, 12)
    assert (x == np.vstack([np.eye(12), np.eye(12)])).all()
    assert groups.tolist() == [0] * 12 + [1] * 12
    # Averaged over the two lengths: each weight is halved.
    quarter = [-0.25, 0.5, -0.25]
    assert contrast.tolist() == quarter * 2 + [-w for w in quarter] * 2


def test_the_contrast_of_one_length_is_the_middle_loss_high_minus_low() -> None:
    y, x, groups, contrast, cells = _design(score_of({"S1": (1,) * 6}), ["S1"], [60])
    assert contrast.tolist() == CONTRAST.tolist()
    assert cells == [(s, 60, p) for s, p in ORDER]
    assert groups.tolist() == [0] * 6 and y.tolist() == [1.0] * 6
    assert x.tolist() == np.eye(6).tolist()


# separated_cell


def test_no_cell_all_one_way_no_separated_cell() -> None:
    y, x, _, _, cells = design_of(VARIED)
    assert separated_cell(y, x, cells) is None


def test_the_first_cell_all_wrong_is_named_in_words() -> None:
    answers = dict(VARIED) | {"S2": (0, 1, 1, 0, 0, 0), "S3": (1, 0, 1, 0, 1, 0)}  # high B
    y, x, _, _, cells = design_of(answers)
    assert separated_cell(y, x, cells) == "B under high similarity at 60 records is all wrong"


def test_the_first_cell_all_correct_is_named_in_words() -> None:
    answers = {"S1": (1, 1, 1, 1, 1, 1), "S2": (0, 1, 0, 1, 1, 1)}  # low M first, all correct
    y, x, _, _, cells = design_of(answers)
    assert separated_cell(y, x, cells) == "M under low similarity at 60 records is all correct"


def test_a_cell_of_one_answer_is_all_one_way() -> None:
    y = np.array([0.0, 1.0])
    x = np.array([[1.0, 0.0], [0.0, 1.0]])
    cells = [("high", 12, "E"), ("low", 240, "B")]
    assert separated_cell(y, x, cells) == "E under high similarity at 12 records is all wrong"
    assert separated_cell(y[::-1].copy(), x, cells) == (
        "E under high similarity at 12 records is all correct"
    )


def test_a_cell_without_answers_is_skipped() -> None:
    y = np.array([0.0, 1.0, 1.0])
    x = np.array([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    cells = [("low", 12, "B"), ("low", 12, "M"), ("high", 60, "M")]
    assert separated_cell(y, x, cells) == "M under high similarity at 60 records is all correct"
    assert separated_cell(y[:2], x[:2, :2], cells[:2]) is None


# _fit


def test_the_linear_fit_is_the_mean_case_contrast_with_the_bias_reduced_sandwich() -> None:
    y, x, groups, contrast, _ = design_of(VARIED)
    fit = _fit(LINEAR, y, x, groups, contrast, Fraction(1, 8), "not supported", analysis_params())
    d = np.array([np.dot(CONTRAST, row) for row in VARIED.values()])
    assert d.tolist() == [1.0, 1.0, -1.5, 0.0]
    se = np.sqrt(np.sum((d - d.mean()) ** 2)) / 3
    tq = stats.t.ppf(0.975, 3)
    assert (fit.model, fit.covariance, fit.cases, fit.df, fit.note) == (LINEAR, SANDWICH, 4, 3, "")
    assert fit.estimate == pytest.approx(0.125, rel=1e-12)
    assert fit.se == pytest.approx(se, rel=1e-9)
    assert fit.lower == pytest.approx(0.125 - tq * se, rel=1e-9)
    assert fit.upper == pytest.approx(0.125 + tq * se, rel=1e-9)
    assert fit.p_one_sided == pytest.approx(stats.t.sf(0.125 / se, 3), rel=1e-9)
    assert fit.agrees is True  # the interval includes 0: not supported, as decided


def test_the_logistic_fit_is_the_contrast_of_the_cells_logits() -> None:
    y, x, groups, contrast, _ = design_of(VARIED)
    fit = _fit(LOGISTIC, y, x, groups, contrast, Fraction(1, 8), "supported", analysis_params())
    answers = np.array(list(VARIED.values()), dtype=float)
    p = answers.mean(axis=0)
    assert p.tolist() == [0.5, 0.75, 0.75, 0.5, 0.5, 0.5]
    estimate = float(CONTRAST @ np.log(p / (1 - p)))
    u = ((answers - p) / (p * (1 - p))) @ CONTRAST
    se = np.sqrt(np.sum(u**2)) / 3
    tq = stats.t.ppf(0.975, 3)
    assert (fit.model, fit.covariance, fit.cases, fit.df, fit.note) == (
        LOGISTIC, SANDWICH, 4, 3, ""
    )  # fmt: skip
    assert fit.estimate == pytest.approx(estimate, rel=1e-9)
    assert fit.se == pytest.approx(se, rel=1e-9)
    assert fit.lower == pytest.approx(estimate - tq * se, rel=1e-9)
    assert fit.upper == pytest.approx(estimate + tq * se, rel=1e-9)
    assert fit.p_one_sided == pytest.approx(stats.t.sf(estimate / se, 3), rel=1e-9)
    assert fit.agrees is False  # the interval includes 0, but the decision says supported


@pytest.mark.parametrize(
    ("estimate_pp", "decision", "agrees"),
    [
        (Fraction(7, 6), "supported", True),
        (Fraction(7, 6), "not supported", False),
        (Fraction(1, 10), "supported", True),  # the threshold itself is reached
        (Fraction(1, 20), "supported", False),  # below it: the preregistered estimate decides
        (Fraction(1, 20), "not supported", True),
        (Fraction(1, 20), "not evaluable", True),
    ],
)
def test_a_fit_agrees_when_the_rule_on_its_lower_bound_gives_the_decision(
    estimate_pp: Fraction, decision: str, agrees: bool
) -> None:
    # d = 1, 1.5, 1: the lower bound 7/6 − t · sqrt(1/6)/2 is above 0.
    answers = {"S1": (1, 1, 1, 1, 0, 1), "S2": (0, 1, 1, 1, 0, 1), "S3": (1, 1, 1, 1, 0, 1)}
    y, x, groups, contrast, _ = design_of(answers)
    fit = _fit(LINEAR, y, x, groups, contrast, estimate_pp, decision, analysis_params())
    assert fit.estimate == pytest.approx(7 / 6, rel=1e-12)
    se = np.sqrt(1 / 6) / 2
    assert fit.se == pytest.approx(se, rel=1e-9)
    assert fit.lower == pytest.approx(7 / 6 - stats.t.ppf(0.975, 2) * se, rel=1e-9)
    assert fit.lower > 0
    assert fit.agrees is agrees


def test_a_fit_whose_lower_bound_is_exactly_0_does_not_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The rule needs the lower bound above 0. Contrasts +1 and −1 give an estimate of exactly 0,
    # and a t quantile of 0 makes the interval that one point, so the bound is 0 itself.
    answers = {"S1": (1, 1, 1, 1, 0, 1), "S2": (1, 0, 1, 1, 1, 1)}
    y, x, groups, contrast, _ = design_of(answers)
    monkeypatch.setattr(stats.t, "ppf", lambda q, df: 0.0)
    fit = _fit(LINEAR, y, x, groups, contrast, Fraction(7, 6), "not supported", analysis_params())
    assert (fit.estimate, fit.lower, fit.upper) == (0.0, 0.0, 0.0) and fit.se > 0
    assert fit.agrees is True  # not passed, as decided


def test_the_interval_follows_the_confidence_level() -> None:
    y, x, groups, contrast, _ = design_of(VARIED)
    params = analysis_params(confidence=0.8)
    fit = _fit(LINEAR, y, x, groups, contrast, Fraction(1, 8), "supported", params)
    assert fit.upper - fit.estimate == pytest.approx(stats.t.ppf(0.9, 3) * fit.se, rel=1e-9)


def test_one_varying_cell_is_enough_for_a_fit_of_two_cases() -> None:
    answers = {"S1": (1, 1, 1, 1, 0, 1), "S2": (1, 1, 1, 1, 1, 1)}  # only high M varies
    y, x, groups, contrast, _ = design_of(answers)
    fit = _fit(LINEAR, y, x, groups, contrast, Fraction(1, 2), "supported", analysis_params())
    assert (fit.cases, fit.df, fit.note) == (2, 1, "")
    assert fit.estimate == pytest.approx(0.5, rel=1e-12)
    assert fit.se == pytest.approx(np.sqrt(0.5), rel=1e-9)  # sqrt(0.5² + 0.5²) / (2 − 1)
    assert fit.lower == pytest.approx(0.5 - stats.t.ppf(0.975, 1) * np.sqrt(0.5), rel=1e-9)


def test_every_cell_all_one_way_gives_no_interval() -> None:
    # Every case misses high M and nothing else: each cell is the same in every case.
    answers = {"S1": (1, 1, 1, 1, 0, 1), "S2": (1, 1, 1, 1, 0, 1)}
    y, x, groups, contrast, _ = design_of(answers)
    note = "no interval: every cell is all correct or all wrong (no variation)"
    for model in (LINEAR, LOGISTIC):
        fit = _fit(model, y, x, groups, contrast, Fraction(1), "supported", analysis_params())
        assert fit == unfit(model, 2, note)


def test_cases_with_the_same_contrast_give_no_interval() -> None:
    # S1 misses high B, S2 high E: both cells vary, but each case's middle loss is 0.5.
    answers = {"S1": (1, 1, 1, 0, 1, 1), "S2": (1, 1, 1, 1, 1, 0)}
    y, x, groups, contrast, _ = design_of(answers)
    fit = _fit(LINEAR, y, x, groups, contrast, Fraction(1, 2), "supported", analysis_params())
    assert fit == unfit(LINEAR, 2, "no interval: every case has the same value")


@pytest.mark.parametrize("scale", [1e200, np.inf])
def test_a_fit_that_is_not_finite_gives_no_interval(scale: float) -> None:
    y, x, groups, contrast, _ = design_of(VARIED)
    with np.errstate(all="ignore"):
        fit = _fit(LINEAR, y, x, groups, contrast * scale, Fraction(1), "supported",
                   analysis_params())  # fmt: skip
    assert fit == unfit(LINEAR, 4, "no interval: the fit is not finite")


def test_a_fit_that_fails_gives_the_first_line_of_its_error() -> None:
    y, x, groups, contrast, _ = design_of(VARIED)
    fit = _fit(LINEAR, y, x, groups[:-1], contrast, Fraction(1), "supported", analysis_params())
    assert fit == unfit(LINEAR, 4, "the fit failed: 'groups' and 'endog' should have the same size")


@pytest.mark.parametrize(
    ("error", "note"),
    [
        (np.linalg.LinAlgError(), "the fit failed: LinAlgError"),
        (ZeroDivisionError(), "the fit failed: ZeroDivisionError"),
        (ValueError("first line\nsecond line"), "the fit failed: first line"),
    ],
)
def test_a_fit_that_fails_without_a_message_is_named_by_its_error(
    monkeypatch: pytest.MonkeyPatch, error: Exception, note: str
) -> None:
    from statsmodels.genmod.generalized_estimating_equations import GEE

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(GEE, "fit", fail)
    y, x, groups, contrast, _ = design_of(VARIED)
    fit = _fit(LOGISTIC, y, x, groups, contrast, Fraction(1), "supported", analysis_params())
    assert fit == unfit(LOGISTIC, 4, note)


# model_fits


def test_model_fits_gives_the_logistic_then_the_linear_fit() -> None:
    cases = tuple(VARIED)
    logistic, linear = model_fits(score_of(VARIED), cases, [60], Fraction(1, 8), "supported",
                                  analysis_params())  # fmt: skip
    y, x, groups, contrast, _ = design_of(VARIED)
    assert logistic == _fit(LOGISTIC, y, x, groups, contrast, Fraction(1, 8), "supported",
                            analysis_params())  # fmt: skip
    assert linear == _fit(LINEAR, y, x, groups, contrast, Fraction(1, 8), "supported",
                          analysis_params())  # fmt: skip
    assert logistic.estimate == pytest.approx(0.5493061443340549, rel=1e-9)
    assert linear.estimate == pytest.approx(0.125, rel=1e-12)
    assert (logistic.agrees, linear.agrees) == (False, False)  # both intervals include 0


def test_model_fits_names_the_separated_cell_and_still_fits_the_linear_model() -> None:
    answers = {"S1": (1, 1, 1, 1, 0, 1), "S2": (0, 1, 1, 1, 0, 1), "S3": (1, 1, 1, 1, 0, 1)}
    logistic, linear = model_fits(score_of(answers), ["S1", "S2", "S3"], [60], Fraction(7, 6),
                                  "supported", analysis_params())  # fmt: skip
    assert logistic == unfit(
        LOGISTIC,
        3,
        "not estimable: M under low similarity at 60 records is all correct "
        "(separation: its logit is infinite)",
    )
    assert linear.model == LINEAR and linear.cases == 3 and linear.df == 2
    assert linear.estimate == pytest.approx(7 / 6, rel=1e-12)
    assert linear.agrees is True


# === the sign-flip test and the BCa interval ===


FUZZ = settings(derandomize=True, max_examples=80, deadline=None)


class Flip(NamedTuple):
    """A sign-flip test's numbers, as exact fractions."""

    cases: int
    method: str
    patterns: int
    seed: int | None
    statistic: Fraction
    p_one_sided: Fraction
    p_two_sided: Fraction


def flip(values: list[int], denominator: int, params) -> Flip:
    r = sign_flip(values, denominator, params, supported=False)
    assert (r.p_one_sided, r.p_two_sided) == (
        float(Fraction(r.p_one_sided_exact)),
        float(Fraction(r.p_two_sided_exact)),
    )
    return Flip(
        r.cases, r.method, r.patterns, r.seed, Fraction(r.statistic_exact),
        Fraction(r.p_one_sided_exact), Fraction(r.p_two_sided_exact),
    )  # fmt: skip


def bca(values: list[int], denominator: int, params) -> tuple:
    """(lower, upper, resamples, seed, note) of the BCa interval."""
    r = bca_interval(values, denominator, params, supported=False)
    return (r.lower, r.upper, r.resamples, r.seed, r.note)


def brute_force(values: list[int]) -> tuple[Fraction, Fraction]:
    observed = sum(values)
    sums = [sum(s * v for s, v in zip(signs, values, strict=True))
            for signs in itertools.product((1, -1), repeat=len(values))]  # fmt: skip
    total = len(sums)
    return (
        Fraction(sum(x >= observed for x in sums), total),
        Fraction(sum(abs(x) >= abs(observed) for x in sums), total),
    )


@FUZZ
@given(st.lists(st.integers(-4, 4), min_size=1, max_size=9))
def test_the_exact_sign_flip_counts_every_pattern(values: list[int]) -> None:
    r = flip(values, 4, analysis_params())
    assert (r.p_one_sided, r.p_two_sided) == brute_force(values)
    assert r.method == "exact" and r.patterns == 2 ** len(values) and r.seed is None
    assert r.statistic == Fraction(sum(values), 4 * len(values))


def test_the_gemma_case_differences_give_3_32() -> None:
    # The committed Gemma run's seven case differences, in halves: 1/2, 1, 1/2, 1/2, -1/2, 1/2, 0.
    r = flip([1, 2, 1, 1, -1, 1, 0], 2, analysis_params())
    assert (r.p_one_sided, r.p_two_sided) == (Fraction(3, 32), Fraction(3, 16))
    assert r.statistic == Fraction(5, 14) and r.patterns == 128


def test_exact_up_to_twenty_cases_then_seeded_monte_carlo() -> None:
    p = analysis_params(bootstrap_resamples=500, bootstrap_seed=7)
    exact = flip([1] * SIGN_FLIP_EXACT_MAX, 1, p)
    assert exact.method == "exact" and exact.patterns == 2**20
    assert exact.p_one_sided == Fraction(1, 2**20)  # only the observed pattern reaches 20
    values = [1, -1, 1, 0, 1] * 4 + [1]  # 21 cases, sum 9 of 17
    mc = flip(values, 1, p)
    assert (mc.method, mc.patterns, mc.seed) == ("monte-carlo", 500, 7)
    signs = np.random.default_rng(7).integers(0, 2, (500, 21), dtype=np.int8) * 2 - 1
    sums = signs.astype(int) @ np.array(values)
    hits, both = int((sums >= sum(values)).sum()), int((abs(sums) >= sum(values)).sum())
    assert 0 < hits < both < 500, (hits, both)
    # The observed pattern counts as one draw: p = (1 + hits) / (1 + draws).
    assert (mc.p_one_sided, mc.p_two_sided) == (Fraction(1 + hits, 501), Fraction(1 + both, 501))
    assert mc == flip(values, 1, p)
    assert flip(values, 1, analysis_params(bootstrap_resamples=500, bootstrap_seed=8)) != mc


def test_bca_is_scipys_with_the_protocols_seed() -> None:
    p = analysis_params(bootstrap_resamples=3000, bootstrap_seed=11)
    values = [2, 3, 2, -3, 4, 4, 3, 4]
    r = bca(values, 4, p)
    want = stats.bootstrap(
        (np.array(values) / 4,), np.mean, method="BCa", n_resamples=3000,
        rng=np.random.default_rng(11),
    ).confidence_interval  # fmt: skip
    assert r == (want.low, want.high, 3000, 11, "")


@pytest.mark.parametrize(
    ("values", "note"),
    [
        ([3], "undefined: fewer than two cases"),
        ([2, 2, 2], "undefined: every case has the same value"),
    ],
)
def test_bca_says_why_it_has_no_interval(values: list[int], note: str) -> None:
    r = bca(values, 4, analysis_params())
    assert (r[0], r[1], r[4]) == (None, None, note)


@pytest.mark.parametrize("bounds", [(float("nan"), 0.5), (0.1, float("inf")), (np.nan, np.nan)])
def test_bca_with_either_bound_not_finite_has_no_interval(
    bounds: tuple[float, float], monkeypatch: pytest.MonkeyPatch
) -> None:
    # scipy gives NaN (with a warning) when the jackknife's acceleration degenerates; one bare
    # bound is as undefined as two.
    interval = NamedTuple("CI", [("low", float), ("high", float)])(*bounds)
    result = NamedTuple("Res", [("confidence_interval", tuple)])(interval)
    monkeypatch.setattr(stats, "bootstrap", lambda *a, **k: result)
    p = analysis_params(bootstrap_resamples=500, bootstrap_seed=3)
    assert bca_interval([1, 2, 3], 4, p, supported=True) == SecondInterval(
        BCA, float(p.confidence), None, None, 500, 3,
        "undefined: the BCa correction is not finite", None,
    )  # fmt: skip


def test_the_signed_sums_are_counted_from_the_lowest() -> None:
    lowest, counts = _signed_sum_counts([1, 2])  # ±1 ± 2: −3, −1, 1, 3
    assert (lowest, counts.tolist()) == (-3, [1, 0, 1, 0, 1, 0, 1])
    assert counts.dtype.kind == "i"  # counted in integers
    lowest, counts = _signed_sum_counts([2, -2])  # 0 twice, ±4 once each
    assert (lowest, counts.tolist()) == (-4, [1, 0, 0, 0, 2, 0, 0, 0, 1])


def test_a_zero_keeps_the_sum_under_both_signs() -> None:
    lowest, counts = _signed_sum_counts([0, 1, 0])
    assert (lowest, counts.tolist()) == (-1, [4, 0, 4])
    assert _signed_sum_counts([0])[1].tolist() == [2]
    assert _signed_sum_counts([])[1].tolist() == [1]


def test_a_sign_flip_of_no_case_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"^the sign-flip test needs at least one case$"):
        flip([], 2, analysis_params())


def test_the_observed_sum_counts_among_the_patterns_that_reach_it() -> None:
    # One case of 1: the signs give −1 and 1; p one-sided 1/2, two-sided 1.
    assert flip([1], 2, analysis_params()) == Flip(
        1, "exact", 2, None, Fraction(1, 2), Fraction(1, 2), Fraction(1)
    )
    # [2, −1, 0]: sums ±2 ± 1 (each twice, for the zero): 3, 1, −1, −3. Observed 1: 4 of 8 reach
    # it, and |sum| ≥ 1 always.
    r = flip([2, -1, 0], 4, analysis_params())
    assert r == Flip(3, "exact", 8, None, Fraction(1, 12), Fraction(1, 2), Fraction(1))


def test_the_two_sided_p_counts_sums_as_far_from_0_on_either_side() -> None:
    # [3, 1]: sums 4, 2, −2, −4. Observed 4: one-sided 1/4; |sum| ≥ 4 twice, 2/4.
    r = flip([3, 1], 1, analysis_params())
    assert (r.p_one_sided, r.p_two_sided, r.statistic) == (
        Fraction(1, 4),
        Fraction(1, 2),
        Fraction(2),
    )
    # A negative observed sum −4: every pattern reaches it one-sided, 2 of 4 two-sided.
    r = flip([-3, -1], 1, analysis_params())
    assert (r.p_one_sided, r.p_two_sided) == (Fraction(1), Fraction(1, 2))


def test_twenty_cases_are_exact_and_twenty_one_monte_carlo() -> None:
    assert SIGN_FLIP_EXACT_MAX == 20
    p = analysis_params(bootstrap_resamples=300, bootstrap_seed=2)
    twenty = flip([1] * 20, 1, p)
    assert (twenty.method, twenty.patterns, twenty.seed) == ("exact", 2**20, None)
    assert (twenty.p_one_sided, twenty.p_two_sided) == (Fraction(1, 2**20), Fraction(2, 2**20))
    mc = flip([1] * 21, 1, p)
    # Each sign is + or − with even odds: no draw of 300 has all 21 plus (nor all minus).
    assert mc == Flip(21, "monte-carlo", 300, 2, Fraction(1), Fraction(1, 301), Fraction(1, 301))


def test_the_monte_carlo_sign_flip_draws_from_the_protocols_seed() -> None:
    # 21 cases of [1, −1, …, 1] (sum 1): a drawn sum is odd, so never 0; 24 of 50 reach 1.
    values = [(-1) ** i for i in range(21)]
    p = analysis_params(bootstrap_resamples=50, bootstrap_seed=4)
    signs = np.random.default_rng(4).integers(0, 2, (50, 21), dtype=np.int8) * 2 - 1
    sums = signs.astype(np.int64) @ np.array(values)
    hits, both = int((sums >= 1).sum()), int((abs(sums) >= 1).sum())
    assert (hits, both) == (24, 50)
    assert flip(values, 3, p) == Flip(
        21, "monte-carlo", 50, 4, Fraction(1, 63), Fraction(25, 51), Fraction(1)
    )


def test_a_monte_carlo_draw_equal_to_the_observed_sum_counts_as_reaching_it() -> None:
    # 21 cases: twenty zeros and a 2. Every draw is ±2: the plus draws tie the observed sum.
    values = [0] * 20 + [2]
    p = analysis_params(bootstrap_resamples=10, bootstrap_seed=1)
    signs = np.random.default_rng(1).integers(0, 2, (10, 21), dtype=np.int8) * 2 - 1
    plus = int((signs[:, 20] == 1).sum())
    assert 0 < plus < 10
    assert flip(values, 1, p) == Flip(
        21, "monte-carlo", 10, 1, Fraction(2, 21), Fraction(1 + plus, 11), Fraction(1)
    )


def test_the_monte_carlo_sums_are_exact_integers_beyond_float_precision() -> None:
    # [2^54, 1, 0, …]: in floats 2^54 − 1 rounds up to 2^54 and would tie the observed 2^54 + 1;
    # in integers only the draws with both leading signs plus reach it.
    values = [2**54, 1] + [0] * 19
    p = analysis_params(bootstrap_resamples=40, bootstrap_seed=3)
    signs = np.random.default_rng(3).integers(0, 2, (40, 21), dtype=np.int8) * 2 - 1
    first, both = signs[:, 0] == 1, (signs[:, 0] == 1) & (signs[:, 1] == 1)
    same = (signs[:, 0] == signs[:, 1]).sum()
    assert 0 < both.sum() < first.sum() and same < 40
    r = flip(values, 1, p)
    assert (r.p_one_sided, r.p_two_sided) == (Fraction(1 + both.sum(), 41), Fraction(1 + same, 41))


# bca_interval ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "note"),
    [
        ([], "undefined: fewer than two cases"),
        ([3], "undefined: fewer than two cases"),
        ([1, 1], "undefined: every case has the same value"),
    ],
)
def test_bca_is_undefined_below_two_cases_and_without_spread(values: list[int], note: str) -> None:
    p = analysis_params(bootstrap_resamples=7, bootstrap_seed=5)
    assert bca(values, 2, p) == (None, None, 7, 5, note)


def test_bca_of_two_different_cases_is_scipys() -> None:
    r = bca([1, 2], 2, analysis_params())
    assert r == (0.5, 1.0, 2000, 20260930, "")


def test_bca_needs_only_one_case_to_differ_from_the_first() -> None:
    p = analysis_params(bootstrap_resamples=300, bootstrap_seed=6, confidence=0.5)
    r = bca([1, 1, 3, 1], 2, p)
    want = stats.bootstrap(
        (np.array([1, 1, 3, 1]) / 2,), np.mean, confidence_level=0.5, n_resamples=300,
        method="BCa", rng=np.random.default_rng(6),
    ).confidence_interval  # fmt: skip
    assert r == (float(want.low), float(want.high), 300, 6, "")
    assert 0.5 <= r[0] < r[1] <= 1.5


def test_a_bca_correction_that_is_not_finite_is_named() -> None:
    # [0, 4]/2 with the one resample seed 0 draws: scipy's bias correction is infinite.
    p = analysis_params(bootstrap_resamples=1, bootstrap_seed=0)
    assert bca([0, 4], 2, p) == (None, None, 1, 0, "undefined: the BCa correction is not finite")
    assert bca([0, 4], 2, analysis_params(bootstrap_resamples=1, bootstrap_seed=1)) == (
        (1.0, 1.0, 1, 1, "")
    )


def test_a_bca_correction_that_is_not_finite_is_reported_without_a_warning() -> None:
    p = analysis_params(bootstrap_resamples=1, bootstrap_seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bca([0, 4], 2, p)[4] == "undefined: the BCa correction is not finite"


def test_a_leave_one_out_decision_needs_a_lower_bound_strictly_above_zero() -> None:
    from needlepoint.analysis.primary import NOT_SUPPORTED, SUPPORTED
    from needlepoint.analysis.robustness import decision_of

    params = analysis_params()
    # an estimate of 1/2, far past the threshold: only the bound's sign decides
    assert decision_of(4, 8, Fraction(1, 8), params) == SUPPORTED
    assert decision_of(4, 8, Fraction(0), params) == NOT_SUPPORTED
    assert decision_of(4, 8, Fraction(-1, 8), params) == NOT_SUPPORTED
