"""The robustness panel at each function's own interface, on hand-built outcomes.

A case here is one length (60 records) with its low and high blocks (B, M, A, E); its
numerator of the preregistered difference is ``(B + E − 2M)`` under high minus the same under
low, over a denominator of 2. Every exact fraction asserted is worked out by hand in the
comment beside it: an interval of identical case values is that value, and two or three cases
put the exact percentile bounds at the smallest and largest value whenever one case alone
carries at least 1/40 of the resamples.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.analysis import analysis_params

from needlepoint.analysis.inference import Scenario, SecondInterval, SignFlip
from needlepoint.analysis.inputs import Outcome
from needlepoint.analysis.record import Primary
from needlepoint.analysis.robustness import (
    leave_one_out,
    missing_scenarios,
    raises_difference,
    robustness,
)

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
    return Primary(0, 0, (), 0.1, None, None, None, decision, "")


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


def test_leaving_out_the_only_case_leaves_nothing_to_decide() -> None:
    assert leave_one_out([], [], 2, analysis_params(), "supported") == ()
    [row] = leave_one_out(["S1"], [2], 2, analysis_params(min_complete_cases=0), "supported")
    assert (row.label, row.complete_cases, row.decision, row.changes) == (
        "without S1",
        0,
        "not evaluable",
        True,
    )


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
        "fragile: changes when seq 14 (S2, 60 records, high, M) is scored correct (not "
        "supported); when seq 14 (S2, 60 records, high, M) is scored wrong (supported)"
    )
    assert [s.label.split("; ")[1] for s in r.missing] == [
        "every missing cell is scored correct",
        "every missing cell is scored wrong",
    ]


def test_a_not_evaluable_run_with_nothing_missing_is_robust() -> None:
    r = robustness(cases(2), analysis_params(), prim("not evaluable"))
    assert (r.missing, r.changes, r.verdict) == ((), (), "robust")


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
    assert (r.missing, r.changes, r.verdict) == ((), (), "robust")


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
    assert r.verdict == "fragile: changes when " + "; when ".join(r.changes)
    assert r.verdict.startswith("fragile: changes when case S1 is left out (not supported); when ")


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
    assert (r.changes, r.verdict) == ((), "robust")


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
