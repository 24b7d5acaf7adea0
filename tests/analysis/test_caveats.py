"""Every caveat's trigger, at its edge, on small hand-built runs.

A caveat says when the number means less than it seems: a simulation, a ceiling, a floor,
protocol failures, a degenerate bootstrap, incomplete cases. Each test here builds the
smallest run that sits exactly on one side of one trigger, and pins the sentence a reader
gets, since the report prints it verbatim.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from support.analysis import outcome

from needlepoint.analysis.inputs import AnalysisInput, Outcome
from needlepoint.analysis.primary import primary
from needlepoint.design.protocol import reference_protocol

BANNER = "SIMULATION — not a model result: the outcomes come from a fake transport."
CEILING = (
    "Ceiling: every answer-present response in both similarity conditions is correct, so a "
    "zero difference cannot tell no effect from a task too easy to show one{}."
)
FLOOR = (
    "Floor: no response at an end position (B or E) is correct in either similarity "
    "condition, so the middle loss cannot be positive and a zero difference proves nothing{}."
)
EXPLORATORY = " (exploratory: over all valid responses, as no case is complete)"

Rule = Callable[[str, str, str], str]  # (case, similarity, condition) -> outcome spec


def run(
    rule: Rule, cases: int = 3, simulation: bool = False, rename: Callable = lambda o: o
) -> list[str]:
    """Caveats of a run over ``cases`` cases at one length; ``rule`` gives each outcome."""
    outcomes = []
    seq = 0
    for c in range(1, cases + 1):
        for sim in ("low", "high"):
            for cond in ("B", "M", "E", "A"):
                seq += 1
                status, _, kind = rule(f"S{c}", sim, cond).partition(":")
                outcomes.append(
                    outcome(
                        seq=seq, block=2 * c - (sim == "low"), pair=c, case=f"S{c}", length=60,
                        similarity=sim, condition=cond, order="B-M-A-E", status=status, kind=kind,
                    )
                )  # fmt: skip
    protocol = reference_protocol()
    outcomes = [rename(o) for o in outcomes]
    inp = AnalysisInput(protocol, "f" * 64, tuple(outcomes), simulation, None, "test")
    return list(primary(inp).caveats)


def correct(case: str, sim: str, cond: str) -> str:
    return "correct"


def test_a_perfect_run_shows_a_ceiling_and_a_degenerate_bootstrap() -> None:
    assert run(correct) == [
        CEILING.format(""),
        "Degenerate bootstrap: every complete case has the same difference (0), so the "
        "interval has zero width; that reflects identical cases, not certainty.",
    ]


def test_the_simulation_banner_comes_first() -> None:
    assert run(correct, simulation=True)[0] == BANNER
    assert BANNER not in run(correct, simulation=False)


def test_a_wrong_refusal_is_no_answer_present_so_the_ceiling_stays() -> None:
    notes = run(lambda c, s, cond: "error:false_unknown" if cond == "A" else "correct")
    assert CEILING.format("") in notes


@pytest.mark.parametrize("position", ["B", "M", "E"])
def test_one_wrong_answer_at_any_position_breaks_the_ceiling(position: str) -> None:
    wrong = ("S2", "low", position)
    notes = run(lambda c, s, cond: "error:bad_format" if (c, s, cond) == wrong else "correct")
    assert not any(n.startswith("Ceiling") for n in notes)


def test_an_incomplete_case_does_not_count_towards_the_ceiling() -> None:
    # S3 is out (a failed A); its wrong B must not hide the ceiling of the complete cases.
    def rule(c: str, s: str, cond: str) -> str:
        if c == "S3":
            return {"A": "protocol_failure:http_status", "B": "error:bad_format"}.get(
                cond, "correct"
            )
        return "correct"

    notes = run(rule)
    assert notes[0] == CEILING.format("")
    assert notes[-1] == (
        "1 of 3 planned cases are incomplete and excluded; the interval covers the complete "
        "cases only."
    )


def test_without_a_complete_case_the_ceiling_is_exploratory_and_ignores_failures() -> None:
    notes = run(lambda c, s, cond: "protocol_failure:finish_reason" if cond == "M" else "correct")
    assert notes[0] == CEILING.format(EXPLORATORY)
    # The run is not evaluable, so no "incomplete cases" note: there is no interval to qualify.
    assert not any("planned cases are incomplete" in n for n in notes)


def test_without_a_complete_case_a_wrong_middle_still_breaks_the_ceiling() -> None:
    # Every A failed, so nothing is complete; the valid B, M and E answers decide, M included.
    rule = {"A": "protocol_failure:http_status", "M": "error:near_distractor_code"}
    notes = run(lambda c, s, cond: rule.get(cond, "correct"))
    assert not any(n.startswith(("Ceiling", "Floor")) for n in notes)


def test_a_ceiling_needs_both_similarities() -> None:
    # Every high-similarity response failed: the perfect low answers alone show no ceiling.
    notes = run(lambda c, s, cond: "protocol_failure:role" if s == "high" else "correct")
    assert not any(n.startswith("Ceiling") for n in notes)


def test_no_end_answer_correct_is_a_floor() -> None:
    notes = run(lambda c, s, cond: "error:absent_code" if cond in "BE" else "correct")
    assert notes[0] == FLOOR.format("")


@pytest.mark.parametrize("position", ["B", "E"])
def test_one_correct_end_answer_lifts_the_floor(position: str) -> None:
    def rule(c: str, s: str, cond: str) -> str:
        if (c, s, cond) == ("S1", "high", position):
            return "correct"
        return "error:absent_code" if cond in "BE" else "correct"

    assert not any(n.startswith("Floor") for n in run(rule))


def test_without_a_complete_case_the_floor_is_exploratory() -> None:
    rule = {"M": "protocol_failure:finish_reason", "A": "correct"}
    notes = run(lambda c, s, cond: rule.get(cond, "error:bad_format"))
    assert notes[0] == FLOOR.format(EXPLORATORY)


def test_without_a_complete_case_a_correct_e_answer_lifts_the_floor() -> None:
    # Exploratory branch: M always fails, so no case is complete; B is wrong, E right. E is an
    # end position too, so there is no floor (a rule reading only B would claim one).
    rule = {"M": "protocol_failure:finish_reason", "B": "error:absent_code", "E": "correct"}
    notes = run(lambda c, s, cond: rule.get(cond, "correct"))
    assert not any(n.startswith("Floor") for n in notes)


def test_without_a_complete_case_a_correct_b_answer_lifts_the_floor() -> None:
    # The mirror image: E wrong, B right; B counts as an end position in the exploratory branch.
    rule = {"M": "protocol_failure:finish_reason", "B": "correct", "E": "error:absent_code"}
    notes = run(lambda c, s, cond: rule.get(cond, "correct"))
    assert not any(n.startswith("Floor") for n in notes)


def test_no_valid_end_answer_at_all_is_no_floor() -> None:
    # B and E all failed, M answered wrong: nothing at an end position to judge a floor by.
    rule = {"B": "protocol_failure:role", "E": "protocol_failure:role", "M": "error:bad_format"}
    notes = run(lambda c, s, cond: rule.get(cond, "correct"))
    assert not any(n.startswith(("Floor", "Ceiling")) for n in notes)


def test_failures_are_counted_by_kind_over_executed_requests() -> None:
    def rule(c: str, s: str, cond: str) -> str:
        if c == "S1":
            return {"B": "protocol_failure:http_status", "M": "unexecuted"}.get(cond, "correct")
        if (c, s, cond) == ("S2", "high", "E"):
            return "protocol_failure:indeterminate_timeout"
        if (c, s, cond) == ("S2", "low", "E"):
            return "protocol_failure:http_status"
        return "correct"

    notes = run(rule, cases=4)
    assert (
        "Failures: 4 of 30 executed requests are protocol failures (http_status 3, "
        "indeterminate_timeout 1); they are listed with their reasons and never scored as wrong."
    ) in notes
    assert notes[-1].startswith("2 of 4 planned cases are incomplete")


def test_no_failures_note_when_only_unexecuted() -> None:
    notes = run(lambda c, s, cond: "unexecuted" if c == "S1" else "correct")
    assert not any(n.startswith("Failures") for n in notes)


def test_differing_cases_have_no_degenerate_note() -> None:
    # S1 loses the middle under high similarity only: S1 = 1, S2 = S3 = 0.
    def rule(c: str, s: str, cond: str) -> str:
        return "error:near_distractor_code" if (c, s, cond) == ("S1", "high", "M") else "correct"

    notes = run(rule)
    assert not any(n.startswith(("Degenerate", "Ceiling")) for n in notes)


def test_identical_nonzero_cases_give_a_degenerate_note_with_the_value() -> None:
    notes = run(
        lambda c, s, cond: "error:near_distractor_code" if (s, cond) == ("high", "M") else "correct"
    )
    assert notes == [
        position_note(
            "B under low similarity 3/3 (ceiling); M under low similarity 3/3 (ceiling); "
            "E under low similarity 3/3 (ceiling); B under high similarity 3/3 (ceiling); "
            "M under high similarity 0/3 (floor); E under high similarity 3/3 (ceiling)"
        ),
        "Degenerate bootstrap: every complete case has the same difference (1), so the "
        "interval has zero width; that reflects identical cases, not certainty.",
    ]


def position_note(cells: str, scope: str = "") -> str:
    return (
        f"Position at floor or ceiling: {cells}. A rate at 0 or 1 cannot move further that way, "
        "so a middle loss or a difference that involves it is bounded by the task, not "
        f"measured{scope}."
    )


def test_a_run_with_every_b_wrong_names_the_floor_at_b() -> None:
    # Issue 21's example: B 0 of every answer, E and M mixed. No global floor (E is right
    # sometimes) and no ceiling, but the reader must not see "Caveats: (none)".
    wrong = {("S1", "high", "M"), ("S2", "low", "M"), ("S3", "low", "E"), ("S2", "high", "E")}

    def rule(c: str, s: str, cond: str) -> str:
        return "error:bad_format" if cond == "B" or (c, s, cond) in wrong else "correct"

    notes = run(rule)
    assert notes == [
        position_note("B under low similarity 0/3 (floor); B under high similarity 0/3 (floor)")
    ]


def test_one_right_answer_lifts_a_position_off_the_floor() -> None:
    # Exactly one correct B under low similarity: that cell is 1/3, off the floor; high stays.
    wrong = {("S1", "high", "M"), ("S2", "low", "M"), ("S3", "low", "E"), ("S2", "high", "E")}

    def rule(c: str, s: str, cond: str) -> str:
        b_wrong = cond == "B" and (c, s) != ("S2", "low")
        return "error:bad_format" if b_wrong or (c, s, cond) in wrong else "correct"

    assert run(rule) == [position_note("B under high similarity 0/3 (floor)")]


def test_one_wrong_answer_takes_a_position_off_the_ceiling() -> None:
    # M low all right but one: 2/3 is no ceiling; every other cell varies as well.
    def rule(c: str, s: str, cond: str) -> str:
        wrong = {("S1", "low", "M"), ("S1", "high", "B"), ("S2", "high", "M"), ("S3", "low", "B")}
        wrong |= {("S2", "low", "E"), ("S3", "high", "E")}
        return "error:bad_format" if (c, s, cond) in wrong else "correct"

    assert run(rule) == []


def test_the_global_floor_leaves_out_the_b_and_e_floors_but_names_m() -> None:
    # No B or E is ever right: the Floor caveat says so; M at 0 still gets its own line.
    notes = run(lambda c, s, cond: "correct" if cond == "A" else "error:bad_format")
    assert notes == [
        FLOOR.format(""),
        position_note("M under low similarity 0/3 (floor); M under high similarity 0/3 (floor)"),
        "Degenerate bootstrap: every complete case has the same difference (0), so the "
        "interval has zero width; that reflects identical cases, not certainty.",
    ]


def test_a_full_ceiling_gets_one_caveat_not_six() -> None:
    notes = run(lambda c, s, cond: "correct")
    assert [n for n in notes if n.startswith(("Position", "Ceiling"))] == [CEILING.format("")]


@pytest.mark.parametrize(("broken", "note"), [(1, True), (2, False)])
def test_the_incomplete_note_only_when_the_run_is_evaluable(broken: int, note: bool) -> None:
    # Three cases, minimum two: one broken case leaves an evaluable run, two do not.
    notes = run(
        lambda c, s, cond: "unexecuted" if int(c[1:]) <= broken and cond == "A" else "correct"
    )
    assert any("planned cases are incomplete" in n for n in notes) == note


def test_a_similarity_other_than_low_or_high_counts_as_neither_for_the_ceiling() -> None:
    # caveats reads the two similarity conditions by name: a row of any other similarity
    # (no results table passes one, but caveats itself takes any Outcome) is not a 'high' one.
    def medium(out: Outcome) -> Outcome:
        return dataclasses.replace(out, similarity="medium") if out.similarity == "high" else out

    notes = run(correct, rename=medium)
    assert not any(n.startswith("Ceiling") for n in notes)
