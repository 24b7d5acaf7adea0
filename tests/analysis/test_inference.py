"""Q1, where the effect is, and the robustness panel: each rule at its boundary.

The committed Gemma 3 270M run (evidence/20261201-local-compare, runs/gemma3) is the worked
example of the issue that asked for these: 5/14 with interval [0, 9/14], not supported; its
interrupted seq 19 scored correct gives 3/8 [1/16, 5/8], supported, scored wrong 1/4
[-1/8, 9/16]; leaving S6 out gives 1/2 [1/4, 3/4], supported; the sign-flip test of its seven
case differences gives one-sided p = 3/32 (0.094).
"""

from __future__ import annotations

import json
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest
from support.analysis import analysis_params
from support.results import make_input, make_prepared, middle_loss

from needlepoint.analysis.document import analyze_run, build_document
from needlepoint.analysis.effects import effect, effects, find, preregistered_numerators, scores
from needlepoint.analysis.inputs import Outcome, from_run
from needlepoint.analysis.model_check import LINEAR, LOGISTIC, model_fits
from needlepoint.analysis.primary import primary
from needlepoint.analysis.robustness import (
    leave_one_out,
    missing_scenarios,
    raises_difference,
    robustness,
)
from needlepoint.cli import main
from needlepoint.design.prepared import Prepared

GEMMA = Path(__file__).resolve().parents[2] / "evidence" / "20261201-local-compare" / "runs"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    return make_prepared(tmp_path_factory)


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("gemma") / "analysis"
    analyze_run(GEMMA / "gemma3", out)
    return json.loads((out / "analysis.json").read_text(encoding="utf-8"))


def test_gemma_numbers_are_exact_fractions_in_analysis_json(gemma: dict) -> None:
    p = gemma["primary"]
    assert (p["estimate_exact"], p["interval"]["lower_exact"], p["interval"]["upper_exact"]) == (
        "5/14",
        "0",
        "9/14",
    )
    assert p["decision"] == "not supported"
    r = gemma["robustness"]
    [correct, wrong] = r["missing"]
    assert correct["label"].startswith("seq 19 (S3, 12 records, low, M) is scored correct")
    assert (correct["estimate_exact"], correct["lower_exact"], correct["upper_exact"]) == (
        "3/8",
        "1/16",
        "5/8",
    )
    assert (correct["decision"], correct["changes"], correct["cells"]) == ("supported", True, [19])
    assert (wrong["estimate_exact"], wrong["lower_exact"], wrong["upper_exact"]) == (
        "1/4",
        "-1/8",
        "9/16",
    )
    assert (wrong["decision"], wrong["changes"]) == ("not supported", False)
    without = {s["label"]: s for s in r["leave_one_out"]}
    s6 = without["without S6"]
    assert (s6["estimate_exact"], s6["lower_exact"], s6["upper_exact"]) == ("1/2", "1/4", "3/4")
    assert s6["decision"] == "supported" and s6["changes"]
    assert [k for k, s in without.items() if s["changes"]] == ["without S6"]
    flip = r["sign_flip"]
    assert (flip["p_one_sided_exact"], flip["p_one_sided"], flip["patterns"]) == (
        "3/32",
        0.09375,
        128,
    )
    assert r["verdict"] == (
        "fragile: changes when seq 19 (S3, 12 records, low, M) is scored correct (supported); "
        "when case S6 is left out (supported)"
    )


def test_gemma_where_the_effect_is(gemma: dict) -> None:
    rows = {(e["measure"], e["similarity"]): e for e in gemma["effects"]["measures"]}
    # From low to high similarity B − M changes by 5/7 and E − M by exactly 0.
    assert rows[("B − M", "high − low")]["estimate_exact"] == "5/7"
    assert rows[("E − M", "high − low")]["estimate_exact"] == "0"
    assert rows[("middle loss", "high − low")]["estimate_exact"] == "5/14"
    assert rows[("middle loss", "high − low")]["lower_exact"] == "0"
    ctx = gemma["context"]
    assert (ctx["endpoint_host"], ctx["first_date"], ctx["sessions"]) == (
        "127.0.0.1",
        "2026-12-01",
        2,
    )
    assert ctx["lengths"][0]["unit"] == "tokens" and ctx["lengths"][0]["median"] == 316


def test_analysing_gemma_prints_q1_q2_and_the_robustness_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(GEMMA / "gemma3"), "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("model gemma3-270m-q4_k_m (completion profile), endpoint 127.0.0.1")
    assert any(line.startswith("Q1, is there a middle loss?") for line in out)
    assert any(line.startswith("Q2, does similarity add to it?") for line in out)
    robust = next(line for line in out if line.startswith("Robustness: "))
    assert "seq 19" in robust and "case S6" in robust


def test_the_middle_loss_difference_row_is_the_preregistered_one(prepared: Prepared) -> None:
    for spec in (None, middle_loss({"S1": ("high",), "S2": ("high", "low"), "S3/60": ("high",)})):
        inp = make_input(prepared, spec)
        pr = primary(inp).primary
        row = find(effects(inp.outcomes, analysis_params()).measures, "middle loss", "high − low")
        assert row.estimate_exact == pr.estimate_exact and row.cases == pr.complete_cases
        assert pr.interval is not None
        assert (row.lower_exact, row.upper_exact) == (
            pr.interval.lower_exact,
            pr.interval.upper_exact,
        )


def test_b_minus_m_and_e_minus_m_split_the_middle_loss(prepared: Prepared) -> None:
    spec = middle_loss({"S1": ("high",), "S4": ("low",)})
    b_or_e = [p.seq for p in prepared.plan if p.condition in ("B", "E")][::7]
    inp = make_input(prepared, lambda p: "error:absent_code" if p.seq in b_or_e else spec(p))
    rows = effects(inp.outcomes, analysis_params()).measures
    for sim in ("low", "high", "high − low"):
        for length in (None, 60, 240):
            b, e = find(rows, "B − M", sim, length), find(rows, "E − M", sim, length)
            ml = find(rows, "middle loss", sim, length)
            assert (
                Fraction(ml.estimate_exact)
                == (Fraction(b.estimate_exact) + Fraction(e.estimate_exact)) / 2
            )


def test_per_length_rows_only_with_several_lengths(prepared: Prepared) -> None:
    rows = effects(make_input(prepared).outcomes, analysis_params()).measures
    assert {r.length for r in rows} == {None, 60, 240}
    one = [o for o in make_input(prepared).outcomes if o.length == 60]
    assert {r.length for r in effects(one, analysis_params()).measures} == {None}


def test_an_estimate_from_one_case_an_interval_from_two() -> None:
    p = analysis_params()
    none = effect("accuracy", "low", 60, "B", [], 1, p)
    assert (none.cases, none.estimate, none.lower) == (0, None, None)
    one = effect("accuracy", "low", 60, "B", [1], 1, p)
    assert (one.estimate, one.lower, one.upper) == (1.0, None, None)
    two = effect("accuracy", "low", 60, "B", [1, 0], 1, p)
    assert (two.estimate_exact, two.lower_exact, two.upper_exact) == ("1/2", "0", "1")


def test_accuracy_by_position_counts_every_case_with_a_valid_answer(prepared: Prepared) -> None:
    first_m = next(p.seq for p in prepared.plan if (p.condition, p.similarity) == ("M", "low"))
    inp = make_input(prepared, {first_m: "failure:http_status"})
    cell = next(
        e
        for e in effects(inp.outcomes, analysis_params()).positions
        if (e.similarity, e.condition) == ("low", "M")
        and e.length == next(p.length for p in prepared.plan if p.seq == first_m)
    )
    assert (cell.cases, cell.estimate_exact) == (7, "1")  # 7 valid of 8, all correct


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
    assert r.changes == () and r.verdict == "robust"


def test_a_sign_flip_that_cannot_reject_makes_three_cases_fragile(prepared: Prepared) -> None:
    # Three identical positive cases: the percentile interval is [1, 1] (supported), but three
    # signs give p = 1/8, above 1/40: the method changes the verdict, and the panel says so.
    spec = middle_loss({f"S{i}": ("high",) for i in (1, 2, 3)})
    outcomes = [o for o in make_input(prepared, spec).outcomes if o.case in ("S1", "S2", "S3")]
    pr = replace(primary(make_input(prepared, spec)).primary, decision="supported")
    r = robustness(outcomes, analysis_params(), pr)
    assert r.sign_flip is not None and r.sign_flip.p_one_sided_exact == "1/8"
    assert not r.sign_flip.agrees
    assert "the sign-flip test decides instead (one-sided p 1/8)" in r.verdict


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


def test_the_summary_opens_with_the_headline_and_a_legend(prepared: Prepared) -> None:
    from needlepoint.analysis.summary import summary_markdown

    # Every B answer wrong (0 of 32), everything else right: no global floor or ceiling.
    doc = build_document(
        make_input(prepared, lambda p: "error:bad_format" if p.condition == "B" else "correct")
    )
    md = summary_markdown(doc)
    head = md.split("## Primary analysis (preregistered)")[0]
    assert head.index("**Q1, is there a middle loss?") < head.index("**Q2, does similarity")
    assert "**Robustness: " in head
    assert "`0 / -0.5, -0.5` reads: middle loss under low similarity 0, under high" in head
    assert "A: absent (an unrelated record of the same length in the middle" in head
    caveats = md.split("### Caveats\n\n")[1].split("\n\n")[0]
    assert caveats != "(none)"
    assert "Position at floor or ceiling: B under low similarity 0/16 (floor); " in caveats
    assert "B under high similarity 0/16 (floor)" in caveats


def test_the_model_checks_and_the_size_source_are_named_in_words(prepared: Prepared) -> None:
    """The names a reader sees in the panel and the lengths line, as literal text (a test
    comparing them with the module's own constants could not notice a changed name)."""
    from needlepoint.analysis.context import length_sizes

    inp = from_run(GEMMA / "gemma3")
    cases, _, _ = preregistered_numerators(inp.outcomes)
    logistic, linear = model_fits(scores(inp.outcomes), cases, [12], Fraction(5, 14),
                                  "not supported", analysis_params())  # fmt: skip
    assert logistic.model == "GEE, logistic (logit link)"
    assert linear.model == "GEE, linear probability (identity link)"
    sandwich = "bias-reduced sandwich (Mancl–DeRouen), t on cases − 1 df"
    assert logistic.covariance == linear.covariance == sandwich
    # No token_counts.json and no usage: the size is in characters, and says so.
    outcomes = [replace(o, prompt_tokens=None) for o in make_input(prepared).outcomes]
    sizes = length_sizes(prepared, outcomes)
    assert {s.source for s in sizes} == {"characters of the prompt text (no token count recorded)"}
    assert {s.unit for s in sizes} == {"characters"}


def test_accuracy_by_position_lists_only_the_conditions_that_ran(prepared: Prepared) -> None:
    # A design without the control condition A: no position row may claim a cell for it.
    inp = make_input(prepared, {})
    without_a = [o for o in inp.outcomes if o.condition != "A"]
    rows = effects(without_a, analysis_params()).positions
    assert {r.condition for r in rows} == {"B", "M", "E"}
