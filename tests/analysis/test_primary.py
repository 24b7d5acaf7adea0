"""The preregistered analysis: completeness, the metric, the decision rule and the caveats.

- On the reference set (eight cases, every block planned): completeness branches, decisions,
  caveats, validation and pooling.
- At the building blocks' interface: natural order past S9, the exact wording of each
  completeness reason, a design whose outcomes lack a similarity block, position bounds.
- Every caveat's trigger at its edge: each test builds the smallest run that sits exactly on
  one side of one trigger and pins the sentence a reader gets, since the report prints it
  verbatim.
- The decision rule (PROTOCOL.md): with fewer than ``min_complete_cases`` complete cases the
  run is not evaluable; otherwise it is supported exactly when the mean difference is at least
  the threshold and the percentile interval's lower bound is above 0. The reference below
  states that rule over every ordered resample (n**n of them), sharing no code with the
  analysis; ``decide`` is also pinned at its turning points with numbers worked out by hand.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.analysis import analysis_params, outcome
from support.analysis import outcome as support_outcome
from support.results import make_input, make_prepared, make_rows, middle_loss, write_csv

from needlepoint import cli
from needlepoint.analysis.document import analyze, analyze_results, build_document
from needlepoint.analysis.inputs import (
    RESULT_COLUMNS,
    AnalysisInput,
    Outcome,
    from_results_csv,
    refuse_pooling,
)
from needlepoint.analysis.primary import (
    NOT_EVALUABLE,
    NOT_SUPPORTED,
    SUPPORTED,
    PrimaryResult,
    completeness,
    decide,
    fmt,
    natural_key,
    position_bounds,
    primary,
)
from needlepoint.analysis.record import AnalysisParameters, Mass
from needlepoint.design.prepared import PlanRow, Prepared
from needlepoint.design.protocol import reference_protocol
from needlepoint.errors import NeedlepointError

# === the reference set ===


CASES = [f"S{i}" for i in range(1, 9)]
ALL_HIGH_M_WRONG = middle_loss({c: ("high",) for c in CASES})


def seq_of(prepared: Prepared, case: str, length: int, sim: str, cond: str) -> int:
    return next(
        p.seq
        for p in prepared.plan
        if (p.case, p.length, p.similarity, p.condition) == (case, length, sim, cond)
    )


def run(prepared: Prepared, spec=None, simulation: bool = True) -> PrimaryResult:
    return primary(make_input(prepared, spec, simulation))


# --- completeness branches ------------------------------------------------------------------------


def test_every_block_valid_gives_every_case(prepared: Prepared) -> None:
    r = run(prepared)
    assert r.primary.complete_cases == 8 and r.primary.planned_cases == 8
    assert r.completeness.blocks_complete == 32 and r.completeness.pairs_complete == 16
    assert r.exploratory == () and r.exclusions == ()


def test_a_wrong_answer_is_valid_and_keeps_the_case(prepared: Prepared) -> None:
    seq = seq_of(prepared, "S3", 60, "high", "A")
    r = run(prepared, {seq: "error:code_when_absent:near_distractor_code"})
    assert r.primary.complete_cases == 8 and r.exclusions == ()


@pytest.mark.parametrize(
    "spec,category",
    [
        ("failure:http_status", "protocol_failure"),
        ("failure:indeterminate_timeout", "indeterminate"),
        ("unexecuted", "unexecuted"),
    ],
)
@pytest.mark.parametrize("condition", ["B", "M", "E", "A"])
def test_one_invalid_response_drops_block_pair_and_case(
    prepared: Prepared, spec: str, category: str, condition: str
) -> None:
    seq = seq_of(prepared, "S2", 240, "low", condition)
    r = run(prepared, {seq: spec})
    assert r.primary.complete_cases == 7
    assert [c.case for c in r.primary.cases] == [c for c in CASES if c != "S2"]
    assert r.completeness.blocks_complete == 31 and r.completeness.pairs_complete == 15
    (excl,) = r.exclusions
    assert (excl.seq, excl.category, excl.condition) == (seq, category, condition)
    assert excl.kind == spec.partition(":")[2]
    rows = {row.length: row for row in r.exploratory if row.case == "S2"}
    # The broken pair: its low loss is missing (None), never zero; the other pair is listed too.
    assert rows[240].loss_low is None and rows[240].difference is None
    assert rows[240].loss_high == 0
    assert f"seq {seq} {category}" in rows[240].reason
    assert rows[60].difference == 0
    assert rows[60].reason == "pair complete, but the case has an incomplete length"
    assert "S2" in {c.case for c in r.completeness.incomplete_cases}


def test_missing_is_never_zero(prepared: Prepared) -> None:
    """A failed M in high similarity would look like a middle loss of 1 if read as wrong."""
    seq = seq_of(prepared, "S5", 60, "high", "M")
    failed = run(prepared, {seq: "failure:finish_reason"})
    assert failed.primary.estimate == 0 and failed.primary.complete_cases == 7
    wrong = run(prepared, {seq: "error:near_distractor_code"})
    assert wrong.primary.estimate == pytest.approx(1 / 16) and wrong.primary.complete_cases == 8


def test_both_blocks_of_a_pair_broken_lists_both(prepared: Prepared) -> None:
    s1 = seq_of(prepared, "S1", 60, "low", "B")
    s2 = seq_of(prepared, "S1", 60, "high", "E")
    r = run(prepared, {s1: "failure:content_empty", s2: "unexecuted"})
    row = next(x for x in r.exploratory if (x.case, x.length) == ("S1", 60))
    assert row.loss_low is None and row.loss_high is None
    assert row.reason.startswith("low block: ") and "high block: " in row.reason


def test_case_incomplete_at_every_length(prepared: Prepared) -> None:
    spec = {seq_of(prepared, "S4", n, "high", "B"): "unexecuted" for n in (60, 240)}
    r = run(prepared, spec)
    (case,) = r.completeness.incomplete_cases
    assert case.case == "S4" and "length 60" in case.reason and "length 240" in case.reason


# --- the metric and the three decisions -----------------------------------------------------------


def test_supported_when_every_case_loses_the_middle(prepared: Prepared) -> None:
    r = run(prepared, ALL_HIGH_M_WRONG)
    assert r.primary.decision == SUPPORTED and r.primary.estimate == 1.0
    assert r.primary.interval.lower == r.primary.interval.upper == 1.0
    assert any(c.startswith("Degenerate bootstrap") for c in r.caveats)


def test_supported_with_a_nondegenerate_interval(prepared: Prepared) -> None:
    r = run(prepared, middle_loss({c: ("high",) for c in CASES[:6]}))
    assert r.primary.decision == SUPPORTED
    assert r.primary.estimate_exact == "3/4"
    assert r.primary.interval.method == "exact" and r.primary.interval.seed is None
    assert r.primary.interval.resamples == 6435 and 0 < r.primary.interval.lower < 0.75
    assert "above 0" in r.primary.reason


def test_metric_averages_lengths_then_cases(prepared: Prepared) -> None:
    # S1 loses the middle at 60 only (case value 1/2); S2 at both lengths (1); others 0.
    r = run(prepared, middle_loss({"S1/60": ("high",), "S2": ("high",)}))
    values = {c.case: c.difference for c in r.primary.cases}
    assert values["S1"] == 0.5 and values["S2"] == 1.0
    assert Fraction(r.primary.estimate_exact) == Fraction(3, 16)
    s1 = next(c for c in r.primary.cases if c.case == "S1").lengths
    assert [(x.length, x.loss_low, x.loss_high) for x in s1] == [(60, 0, 1), (240, 0, 0)]


def test_low_similarity_loss_counts_against_the_effect(prepared: Prepared) -> None:
    r = run(prepared, middle_loss({"S1": ("low",)}))
    assert r.primary.estimate == -1 / 8 and r.primary.decision == NOT_SUPPORTED


def test_not_supported_below_threshold(prepared: Prepared) -> None:
    r = run(prepared, middle_loss({"S1/60": ("high",)}))
    assert r.primary.estimate == 1 / 16 and r.primary.decision == NOT_SUPPORTED
    assert "below the threshold" in r.primary.reason


def test_not_supported_when_lower_bound_is_not_above_zero(prepared: Prepared) -> None:
    # Two strong cases and one reversed case: the mean clears 0.10, the interval does not.
    r = run(prepared, middle_loss({"S1": ("high",), "S2": ("high",), "S3": ("low",)}))
    assert r.primary.estimate == pytest.approx(1 / 8)
    assert r.primary.decision == NOT_SUPPORTED
    assert "below the threshold" not in r.primary.reason and "lower bound" in r.primary.reason
    assert r.primary.interval.lower <= 0


def test_threshold_comparison_is_exact() -> None:
    """Ten cases of exactly 0.1: float summation gives 0.0999..., exact arithmetic gives 1/10."""
    assert sum([0.1] * 10) / 10 < 0.1
    params = analysis_params(bootstrap_resamples=1000, bootstrap_seed=1)
    out = decide([1] * 10, 10, params)
    assert out.decision == SUPPORTED and out.estimate_exact == "1/10"


def test_monte_carlo_above_the_exact_limit_reports_its_seed() -> None:
    params = analysis_params()
    out = decide([4, 0, 2, 4, -2] * 3, 4, params)
    assert out.interval.method == "monte-carlo"
    assert out.interval.seed == 20260930 and out.interval.resamples == 2000
    assert out == decide([4, 0, 2, 4, -2] * 3, 4, params)


@pytest.mark.parametrize("broken", [7, 8])
def test_not_evaluable_below_the_minimum(prepared: Prepared, broken: int) -> None:
    spec = {seq_of(prepared, c, 60, "high", "M"): "failure:role" for c in CASES[:broken]}
    r = run(prepared, spec)
    assert (
        r.primary.decision == NOT_EVALUABLE
        and r.primary.interval is None
        and r.primary.estimate is None
    )
    assert r.primary.reason.endswith("the protocol requires at least 2")
    assert r.primary.reason.startswith(f"{8 - broken} complete case")


# --- caveats --------------------------------------------------------------------------------------


def test_ceiling_caveat_when_both_similarities_are_perfect(prepared: Prepared) -> None:
    r = run(prepared)
    assert r.primary.decision == NOT_SUPPORTED and r.primary.estimate == 0
    assert any(c.startswith("Ceiling") for c in r.caveats)
    assert not any(c.startswith("Floor") for c in r.caveats)


def test_no_ceiling_once_one_answer_is_wrong(prepared: Prepared) -> None:
    r = run(prepared, middle_loss({"S1/60": ("high",)}))
    assert not any(c.startswith("Ceiling") for c in r.caveats)


def test_floor_caveat_when_no_end_position_is_ever_correct(prepared: Prepared) -> None:
    def spec(p: PlanRow) -> str:
        return "error:absent_code" if p.condition in ("B", "E") else "correct"

    r = run(prepared, spec)
    assert any(c.startswith("Floor") for c in r.caveats)
    assert not any(c.startswith("Ceiling") for c in r.caveats)


def test_floor_is_stated_even_when_nothing_is_evaluable(prepared: Prepared) -> None:
    # The local-model shape: every M fails, every valid answer is wrong.
    def spec(p: PlanRow) -> str:
        return "failure:finish_reason" if p.condition == "M" else "error:bad_format"

    r = run(prepared, spec)
    assert r.primary.decision == NOT_EVALUABLE
    floor = [c for c in r.caveats if c.startswith("Floor")]
    assert floor and "exploratory" in floor[0]
    failures = [c for c in r.caveats if c.startswith("Failures")]
    assert failures == [
        "Failures: 32 of 128 executed requests are protocol failures (finish_reason 32); "
        "they are listed with their reasons and never scored as wrong."
    ]


def test_no_failures_caveat_without_failures(prepared: Prepared) -> None:
    assert not any(c.startswith("Failures") for c in run(prepared).caveats)


def test_incomplete_cases_caveat(prepared: Prepared) -> None:
    r = run(prepared, {seq_of(prepared, "S8", 60, "low", "A"): "unexecuted"})
    assert any(c.startswith("1 of 8 planned cases are incomplete") for c in r.caveats)


def test_simulation_caveat_only_for_simulations(prepared: Prepared) -> None:
    assert any("SIMULATION" in c for c in run(prepared, simulation=True).caveats)
    assert not any("SIMULATION" in c for c in run(prepared, simulation=False).caveats)


# --- secondary tables -----------------------------------------------------------------------------


def test_secondary_tables(prepared: Prepared) -> None:
    s_m = seq_of(prepared, "S1", 60, "high", "M")
    s_a = seq_of(prepared, "S2", 60, "low", "A")
    s_f = seq_of(prepared, "S3", 240, "high", "B")
    spec = {
        s_m: "error:near_distractor_code",
        s_a: "error:code_when_absent:other_present_code",
        s_f: "failure:indeterminate_dropped",
        seq_of(prepared, "S4", 60, "low", "E"): "unexecuted",
    }
    doc = build_document(make_input(prepared, spec))
    sec = doc.secondary
    overall = sec.refusal[0]
    assert (overall.valid, overall.correct) == (32, 31)
    low = next(r for r in sec.refusal if r.level == "low")
    assert (low.valid, low.correct) == (16, 15)
    m_high = next(r for r in sec.errors if (r.condition, r.similarity) == ("M", "high"))
    assert m_high.near_distractor == 1 and m_high.near_distractor_share == 1.0
    a_low = next(r for r in sec.errors if (r.condition, r.similarity) == ("A", "low"))
    assert a_low.wrong_code == 1 and a_low.near_distractor_share == 0.0
    assert {r.kind: r.count for r in sec.protocol_failures} == {
        "indeterminate_dropped": 1,
        "unexecuted": 1,
    }
    luc = sec.latency_usage_cost
    assert luc.executed == 127 and luc.latency_s.unknown == 1
    assert luc.cost.total is None and luc.cost.unknown == 1
    assert luc.cost.known == 126
    cell = next(
        c for c in sec.accuracy if (c.similarity, c.length, c.condition) == ("high", 240, "B")
    )
    assert (cell.valid, cell.not_valid, cell.accuracy) == (7, 1, 1.0)
    strata = sec.order_balance.strata
    assert all(s.orders[o].planned == 2 for s in strata for o in sec.order_balance.orders)
    assert sum(s.orders[o].complete for s in strata for o in sec.order_balance.orders) == 30


def test_cost_total_is_known_only_when_every_cost_is(prepared: Prepared) -> None:
    doc = build_document(make_input(prepared))
    cost = doc.secondary.latency_usage_cost.cost
    assert cost.unknown == 0 and cost.total == pytest.approx(cost.known_sum)


# --- validation of results tables -----------------------------------------------------------------


def _csv(tmp_path: Path, prepared: Prepared, edit=None, columns=RESULT_COLUMNS) -> Path:
    rows = make_rows(prepared)
    if edit:
        edit(rows)
    return write_csv(tmp_path / "results.csv", rows, columns)


@pytest.mark.parametrize(
    "edit,expected",
    [
        (lambda r: r[4].update(status="maybe"), r"results\.csv:6: field status: 'maybe'"),
        (
            lambda r: r[2].update(seq="999"),
            r"results\.csv:4: field seq: 999 is not in the",
        ),
        (lambda r: r[9].update(seq="abc"), r"results\.csv:11: field seq: not an integer"),
        (lambda r: r[3].update(seq="1"), r"results\.csv:5: field seq: 1 repeats line 2"),
        (lambda r: r.pop(10), r"field seq: planned seq 11 has no row"),
        (
            lambda r: r[0].update(request_sha256="0" * 64),
            r"results\.csv:2: field request_sha256: .* does not match the prepared plan",
        ),
        (lambda r: r[1].update(case="S9"), r"results\.csv:3: field case: .*prepared plan"),
        (
            lambda r: r[5].update(kind="near_distractor_code"),
            r"results\.csv:7: field kind: 'near_distractor_code' is not allowed with status",
        ),
        (
            lambda r: r[6].update(status="error", kind="absent_code"),
            r"results\.csv:8: field status: recorded error/absent_code but the response text "
            r"scores as correct",
        ),
        (lambda r: r[7].update(latency_s="-1"), r"results\.csv:9: field latency_s: must be"),
        (lambda r: r[7].update(cost="nan"), r"results\.csv:9: field cost: must be finite"),
        (lambda r: r[7].update(prompt_tokens="1.5"), r"results\.csv:9: field prompt_tokens"),
        (
            lambda r: r[8].update(status="unexecuted", kind=""),
            r"results\.csv:10: field status: unexecuted but a response is recorded",
        ),
        (lambda r: r[2].update(simulation="yes"), r"results\.csv:4: field simulation"),
        (
            lambda r: r[12].update(simulation="false"),
            r"results\.csv:14: field simulation: false but line 2 says true; simulated and live",
        ),
        (
            lambda r: r[12].update(journal_sha256="cd" * 32),
            r"results\.csv:14: field journal_sha256: differs from line 2",
        ),
        (lambda r: r[0].update(journal_sha256="xyz"), r"field journal_sha256: not a SHA-256"),
    ],
)
def test_results_table_errors_name_file_line_and_field(
    tmp_path: Path, prepared: Prepared, edit, expected: str
) -> None:
    path = _csv(tmp_path, prepared, edit)
    with pytest.raises(NeedlepointError, match=expected) as info:
        from_results_csv(path, prepared.root)
    assert "\n" not in str(info.value)


def test_line_numbers_count_multi_line_responses(tmp_path: Path, prepared: Prepared) -> None:
    def edit(rows: list[dict[str, str]]) -> None:
        rows[0]["response_text"] = " " + rows[0]["response_text"].strip() + "\n\n"
        rows[1]["status"] = "bogus"

    with pytest.raises(NeedlepointError, match=r"results\.csv:5: field status: 'bogus'"):
        from_results_csv(_csv(tmp_path, prepared, edit), prepared.root)


def test_missing_column_is_named(tmp_path: Path, prepared: Prepared) -> None:
    cols = tuple(c for c in RESULT_COLUMNS if c != "status")
    path = _csv(tmp_path, prepared, columns=cols)
    with pytest.raises(NeedlepointError, match=r"results\.csv:1: field status: missing column"):
        from_results_csv(path, prepared.root)


def test_extra_column_and_ragged_row_are_refused(tmp_path: Path, prepared: Prepared) -> None:
    path = _csv(tmp_path, prepared, columns=(*RESULT_COLUMNS, "note"))
    with pytest.raises(NeedlepointError, match=r":1: field note: unexpected"):
        from_results_csv(path, prepared.root)
    path = _csv(tmp_path, prepared)
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[3] += ",extra"
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(NeedlepointError, match=r"results\.csv:4: .*row has 21 fields"):
        from_results_csv(path, prepared.root)


def test_a_tampered_prepared_folder_is_refused(tmp_path: Path, prepared: Prepared) -> None:
    import shutil

    copy = tmp_path / "prep"
    shutil.copytree(prepared.root, copy)
    key = copy / "answer_key.jsonl"
    key.write_bytes(key.read_bytes().replace(b'"expected":"', b'"expected":"X', 1))
    with pytest.raises(NeedlepointError, match="fails verify"):
        from_results_csv(_csv(tmp_path, prepared), copy)


# --- pooling --------------------------------------------------------------------------------------


def test_pooling_is_refused_with_a_reason(prepared: Prepared) -> None:
    sim = make_input(prepared, simulation=True)
    live = make_input(prepared, simulation=False)
    other = dataclasses.replace(sim, fingerprint="f" * 64)
    with pytest.raises(
        NeedlepointError, match=r"b\.csv: protocol fingerprint ffffffffffff differs"
    ):
        refuse_pooling([sim, other], ["a.csv", "b.csv"])
    with pytest.raises(NeedlepointError, match="simulated and live runs are never pooled"):
        refuse_pooling([live, sim], ["a.csv", "b.csv"])
    with pytest.raises(NeedlepointError, match="covers one run"):
        refuse_pooling([sim, sim], ["a.csv", "b.csv"])
    refuse_pooling([sim], ["a.csv"])


def test_cli_refuses_pooling_in_one_line(
    tmp_path: Path, prepared: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write_csv(tmp_path / "a.csv", make_rows(prepared, simulation=True))
    b = write_csv(tmp_path / "b.csv", make_rows(prepared, simulation=False))
    argv = ["analyze", "--results", str(a), "--results", str(b), "--prepared", str(prepared.root)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "simulated and live runs are never pooled" in err


# --- end to end -----------------------------------------------------------------------------------


def test_cli_analyze_results_writes_everything_deterministically(
    tmp_path: Path, prepared: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    csv_path = write_csv(tmp_path / "results.csv", make_rows(prepared, ALL_HIGH_M_WRONG))
    outputs = []
    for name in ("one", "two"):
        argv = ["analyze", "--results", str(csv_path), "--prepared", str(prepared.root)]
        if name == "two":
            argv.append("--no-figures")  # figure bytes are compared in test_figures
        assert cli.main([*argv, "--out", str(tmp_path / name)]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0].replace("two", "one") == outputs[1].replace("two", "one").replace(
        "and 0 figures", "and 5 figures"
    )
    assert str(tmp_path) not in outputs[0]
    printed = outputs[0].splitlines()
    assert printed[0] == "SIMULATION — not a model result"
    # The headline first (facts, Q1, Q2, robustness), then the preregistered decision line.
    assert printed[1].startswith(
        "model agnes-3.0-flash (chat profile), endpoint none: simulated, "
        "run dates unknown (no journal)"
    )
    assert [line.split(",")[0] for line in printed if line.startswith("Q")] == ["Q1", "Q2"]
    assert next(line for line in printed if line.startswith("decision:")) == (
        "decision: supported (difference 1 >= threshold 0.1 and the 95% interval's lower bound"
        " 1 is above 0); not verified: its rows and simulation flag come from a results table"
        " and were not verified against a run journal"
    )
    files = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert files == [
        "accuracy_by_position.png",
        "accuracy_by_position_lines.png",
        "analysis.json",
        "bootstrap_distribution.png",
        "completeness.png",
        "forest_difference.png",
        "summary.md",
    ]
    one = json.loads((tmp_path / "one" / "analysis.json").read_text(encoding="utf-8"))
    two = json.loads((tmp_path / "two" / "analysis.json").read_text(encoding="utf-8"))
    assert one == {**two, "figures": one["figures"]} and two["figures"] == {}
    summaries = [(tmp_path / d / "summary.md").read_text(encoding="utf-8") for d in ("one", "two")]
    assert summaries[1].rstrip() == summaries[0].split("## Figures")[0].rstrip()
    doc = json.loads((tmp_path / "one" / "analysis.json").read_text(encoding="utf-8"))
    assert (doc["format"], doc["version"]) == ("needlepoint-analysis", 2)
    assert doc["protocol"]["fingerprint"] == prepared.fingerprint
    assert doc["run"]["journal_sha256"] == "ab" * 32
    assert "not verified against a run journal" in doc["run"]["unverified"]
    summary = (tmp_path / "one" / "summary.md").read_text(encoding="utf-8")
    assert summary.startswith("# SIMULATION — not a model result\n")
    decision = next(line for line in summary.splitlines() if line.startswith("The rule, applied"))
    assert decision.endswith("were not verified against a run journal.")
    assert str(tmp_path) not in summary and str(tmp_path) not in json.dumps(doc)


def test_live_summary_has_no_banner(tmp_path: Path, prepared: Prepared) -> None:
    csv_path = write_csv(tmp_path / "results.csv", make_rows(prepared, simulation=False))
    result = analyze_results(csv_path, prepared.root, tmp_path / "out", figures=False)
    summary = (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")
    assert "SIMULATION" not in summary and result.document.label is None
    assert result.decision == NOT_SUPPORTED and not result.simulation


def test_not_evaluable_run_still_writes_its_report(tmp_path: Path, prepared: Prepared) -> None:
    result = analyze(make_input(prepared, lambda p: "unexecuted"), tmp_path / "out")
    assert result.decision == NOT_EVALUABLE
    assert set(result.figures()) == {"accuracy", "forest", "bootstrap", "completeness", "positions"}
    assert all(p.exists() for p in result.figures().values())
    assert "no valid response" in (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")


def test_tables_for_notebooks(prepared: Prepared) -> None:
    result = analyze(make_input(prepared, ALL_HIGH_M_WRONG), None)
    cases = result.table("cases")
    assert list(cases.columns) == ["case", "difference_60", "difference_240", "difference"]
    assert len(cases) == 8 and result.table("errors")["near_distractor_code"].sum() == 16
    shapes = result.table("shapes")
    assert len(shapes) == 6 and list(shapes.columns)[:5] == [
        "similarity", "length", "B correct/valid", "M correct/valid", "E correct/valid"
    ]  # fmt: skip
    assert {"B − M p_adjusted", "E − M estimate", "verdict"} <= set(shapes.columns)
    with pytest.raises(KeyError):
        result.table("nope")


def test_analyze_run_from_a_simulated_journal(tmp_path: Path, prepared: Prepared) -> None:
    run_dir = tmp_path / "run"
    argv = ["run", str(prepared.root), "--allow", "128", "--run-dir", str(run_dir)]
    assert cli.main([*argv, "--simulate", "perfect", "--no-progress"]) == 0
    assert cli.main(["results", str(run_dir)]) == 0
    assert cli.main(["analyze", str(run_dir), "--no-figures"]) == 0
    doc = json.loads((run_dir / "analysis" / "analysis.json").read_text(encoding="utf-8"))
    assert doc["simulation"] is True and doc["run"]["source"] == "run journal"
    assert doc["primary"]["complete_cases"] == 8
    assert any(c.startswith("Ceiling") for c in doc["caveats"])
    # Editing a score in results.csv is refused: the analysis re-derives from the journal.
    path = run_dir / "results.csv"
    path.write_text(path.read_text(encoding="utf-8").replace(",correct,", ",error,", 1), "utf-8")
    assert cli.main(["analyze", str(run_dir), "--no-figures"]) == 2


def test_the_lenient_flag_is_carried_but_never_decides(prepared: Prepared) -> None:
    """Rows are flagged leniently correct by the rule, and the primary analysis ignores it."""
    from dataclasses import replace

    def spec(p: PlanRow) -> str:
        if p.condition == "M" and p.similarity == "high":
            return "error:extra_text" if p.case in ("S1", "S2") else "error:near_distractor_code"
        return "failure:finish_reason" if (p.case, p.condition) == ("S3", "A") else "correct"

    inp = make_input(prepared, spec)
    flagged = {o.seq for o in inp.outcomes if o.lenient}
    assert flagged == {
        o.seq for o in inp.outcomes if o.status == "correct" or o.kind == "extra_text"
    }
    assert not any(o.lenient for o in inp.outcomes if not o.valid)
    flipped = replace(inp, outcomes=tuple(replace(o, lenient=not o.lenient) for o in inp.outcomes))
    assert primary(flipped) == primary(inp)


# === the building blocks ===


def interface_outcome(
    seq: int,
    case: str = "S1",
    length: int = 1000,
    similarity: str = "low",
    condition: str = "B",
    status: str = "correct",
    kind: str = "",
) -> Outcome:
    """One results row with only the fields the analysis reads set."""
    return support_outcome(
        seq=seq, block=0, pair=0, case=case, length=length, similarity=similarity,
        condition=condition, order="BME", status=status, kind=kind,
    )  # fmt: skip


def full_case(case: str, lengths: tuple[int, ...], start: int) -> list[Outcome]:
    """Every block of a case (each length, both similarities, B/M/E), all correct."""
    rows, seq = [], start
    for length in lengths:
        for sim in ("low", "high"):
            for cond in ("B", "M", "E"):
                rows.append(interface_outcome(seq, case, length, sim, cond))
                seq += 1
    return rows


def test_natural_key_splits_digits_into_integers() -> None:
    """Labels split into text and integer runs, so S2 sorts before S10."""
    assert natural_key("S10") == ("S", 10, "")
    assert natural_key("a2b3") == ("a", 2, "b", 3, "")
    assert natural_key("x") == ("x",)
    assert sorted(["S10", "S2", "S1", "S9"], key=natural_key) == ["S1", "S2", "S9", "S10"]


def test_completeness_of_valid_blocks_lists_no_problems() -> None:
    """Right and wrong answers are both valid: every block, pair and case is complete."""
    rows = full_case("S10", (1000,), 1) + full_case("S2", (2000, 1000), 20)
    rows[0] = interface_outcome(1, "S10", 1000, "low", "B", status="error")
    check = completeness(rows)
    assert check.complete_cases == ["S2", "S10"]
    assert len(check.block_problems) == 6
    assert all(p == [] for p in check.block_problems.values())
    assert check.pair_problems == {("S10", 1000): [], ("S2", 2000): [], ("S2", 1000): []}
    assert check.case_problems == {"S10": [], "S2": []}
    assert len(check.blocks[("S2", 2000, "high")]) == 3


def test_completeness_names_each_invalid_response_and_its_kind() -> None:
    """An invalid response is named by seq, category and kind, up to block, pair and case."""
    rows = full_case("S1", (2000, 1000), 1)
    rows[7] = interface_outcome(
        8, "S1", 1000, "low", "M", status="protocol_failure", kind="timeout"
    )
    rows[8] = interface_outcome(9, "S1", 1000, "low", "E", status="unexecuted")
    rows[1] = interface_outcome(
        2, "S1", 2000, "low", "M", status="protocol_failure", kind="indeterminate_x"
    )
    rows[4] = interface_outcome(5, "S1", 2000, "high", "M", status="unexecuted")
    check = completeness(rows)
    assert check.block_problems[("S1", 1000, "low")] == [
        "seq 8 protocol_failure (timeout)",
        "seq 9 unexecuted",
    ]
    assert check.block_problems[("S1", 1000, "high")] == []
    assert check.pair_problems[("S1", 1000)] == [
        "low block: seq 8 protocol_failure (timeout), seq 9 unexecuted"
    ]
    assert check.pair_problems[("S1", 2000)] == [
        "low block: seq 2 indeterminate (indeterminate_x)",
        "high block: seq 5 unexecuted",
    ]
    assert check.case_problems["S1"] == [
        "length 1000 pair incomplete (low block: seq 8 protocol_failure (timeout), seq 9 "
        "unexecuted)",
        "length 2000 pair incomplete (low block: seq 2 indeterminate (indeterminate_x); "
        "high block: seq 5 unexecuted)",
    ]
    assert check.complete_cases == []


def test_completeness_names_a_similarity_that_was_never_planned() -> None:
    """A pair with only one similarity block is incomplete: the other was not planned."""
    rows = [interface_outcome(i + 1, "S3", 1000, "high", c) for i, c in enumerate("BME")]
    rows += [interface_outcome(i + 4, "S3", 2000, "low", c) for i, c in enumerate("BME")]
    check = completeness(rows)
    assert check.pair_problems[("S3", 1000)] == ["low block not planned"]
    assert check.pair_problems[("S3", 2000)] == ["high block not planned"]
    assert check.case_problems["S3"] == [
        "length 1000 pair incomplete (low block not planned)",
        "length 2000 pair incomplete (high block not planned)",
    ]
    assert check.complete_cases == []


def by_sim(low: dict[str, str], high: dict[str, str]) -> dict[str, list[Outcome]]:
    """Outcomes per similarity from a status string per position ('c' correct, 'e' error)."""
    status = {"c": "correct", "e": "error"}
    out: dict[str, list[Outcome]] = {}
    seq = 1
    for sim, cells in (("low", low), ("high", high)):
        out[sim] = []
        for cond, marks in cells.items():
            for m in marks:
                out[sim].append(
                    interface_outcome(seq, similarity=sim, condition=cond, status=status[m])
                )
                seq += 1
    return out


def caveat(bounded: str, scope: str = "") -> list[str]:
    """The position-bounds caveat as it reads with the given list of bounded cells."""
    return [
        f"Position at floor or ceiling: {bounded}. A rate at 0 or 1 cannot move further that "
        "way, so a middle loss or a difference that involves it is bounded by the task, not "
        f"measured{scope}."
    ]


def test_position_bounds_names_every_floor_and_ceiling() -> None:
    """Each position at 0/n or n/n is named with its similarity, count and which bound."""
    cells = by_sim({"B": "cc", "M": "ee", "E": "ce"}, {"B": "ce", "M": "c", "E": "ee"})
    assert position_bounds(cells, False, " (scope)") == caveat(
        "B under low similarity 2/2 (ceiling); M under low similarity 0/2 (floor); "
        "M under high similarity 1/1 (ceiling); E under high similarity 0/2 (floor)",
        " (scope)",
    )


def test_position_bounds_with_floor_leaves_end_floors_to_the_floor_caveat() -> None:
    """With the floor caveat stated, B and E at zero are left out, M at zero is kept."""
    cells = by_sim({"B": "ee", "M": "ee", "E": "e"}, {"B": "e", "M": "cc", "E": "ee"})
    assert position_bounds(cells, True) == caveat(
        "M under low similarity 0/2 (floor); M under high similarity 2/2 (ceiling)"
    )


def test_position_bounds_is_empty_when_no_position_is_bounded() -> None:
    """Mixed rates everywhere, or no rows for a position, give no caveat."""
    cells = by_sim({"B": "ce", "M": "ec"}, {"E": "cce"})
    assert position_bounds(cells, False) == []
    assert position_bounds({"low": [], "high": []}, True) == []


def test_pair_values_are_halved_twice_losses(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each length's losses and difference are B + E - 2M halved: 1 per lost middle."""
    prepared = make_prepared(tmp_path_factory)
    spec = middle_loss({"S1/60": ("low", "high"), "S1/240": ("high",)})
    result = primary(make_input(prepared, spec))
    s1 = next(c for c in result.primary.cases if c.case == "S1").lengths
    assert [(x.length, x.loss_low, x.loss_high, x.difference) for x in s1] == [
        (60, 1.0, 1.0, 0.0),
        (240, 0.0, 1.0, 1.0),
    ]


# === completeness on hand-built runs ===


def outcomes(cases: int, rule=lambda c, n, s, cond: "correct", sims=("low", "high")) -> tuple:
    rows, seq = [], 0
    for c in range(1, cases + 1):
        for length in (60, 240):
            for sim in sims:
                for cond in ("B", "M", "E", "A"):
                    seq += 1
                    status, _, kind = rule(f"S{c}", length, sim, cond).partition(":")
                    rows.append(
                        outcome(
                        seq=seq, block=seq, pair=seq, case=f"S{c}", length=length,
                        similarity=sim, condition=cond, order="B-M-A-E", status=status, kind=kind,
                    )
                    )  # fmt: skip
    return tuple(rows)


def analyse(rows: tuple):
    return primary(AnalysisInput(reference_protocol(), "f" * 64, rows, False, None, "test"))


def test_natural_key_sorts_numbers_by_value() -> None:
    labels = ["S10", "S2", "S1", "S9", "S11", "T1"]
    assert sorted(labels, key=natural_key) == ["S1", "S2", "S9", "S10", "S11", "T1"]
    assert natural_key("S10") == ("S", 10, "")


def test_cases_exploratory_rows_and_incomplete_cases_follow_case_numbers() -> None:
    def rule(c: str, n: int, s: str, cond: str) -> str:
        return (
            "unexecuted" if c in ("S2", "S10") and (n, s, cond) == (60, "low", "A") else "correct"
        )

    r = analyse(outcomes(11, rule))
    assert [c.case for c in r.primary.cases] == [
        "S1",
        "S3",
        "S4",
        "S5",
        "S6",
        "S7",
        "S8",
        "S9",
        "S11",
    ]
    assert [(x.case, x.length) for x in r.exploratory] == [
        ("S2", 60),
        ("S2", 240),
        ("S10", 60),
        ("S10", 240),
    ]
    assert [x.case for x in r.completeness.incomplete_cases] == ["S2", "S10"]


def test_each_reason_names_the_request_and_only_a_kind_when_there_is_one() -> None:
    def rule(c: str, n: int, s: str, cond: str) -> str:
        if (c, n, s, cond) == ("S1", 60, "low", "A"):
            return "unexecuted"
        if (c, n, s, cond) == ("S1", 60, "high", "M"):
            return "protocol_failure:indeterminate_timeout"
        if (c, n, s, cond) == ("S1", 60, "high", "E"):
            return "protocol_failure:role"
        return "correct"

    r = analyse(outcomes(3, rule))
    # seq numbers: S1, length 60: low B M E A = 1..4, high B M E A = 5..8
    pair = (
        "low block: seq 4 unexecuted; high block: seq 6 indeterminate (indeterminate_timeout), "
        "seq 7 protocol_failure (role)"
    )
    assert [(x.length, x.reason) for x in r.exploratory] == [
        (60, pair),
        (240, "pair complete, but the case has an incomplete length"),
    ]
    (case,) = r.completeness.incomplete_cases
    assert (case.case, case.reason) == ("S1", f"length 60 pair incomplete ({pair})")
    assert [e.excludes for e in r.exclusions] == [
        "case S1 (block S1/60/low)",
        *["case S1 (block S1/60/high)"] * 2,
    ]
    assert [(e.seq, e.category, e.kind) for e in r.exclusions] == [
        (4, "unexecuted", ""),
        (6, "indeterminate", "indeterminate_timeout"),
        (7, "protocol_failure", "role"),
    ]


def test_a_similarity_block_that_was_never_planned_makes_the_pair_incomplete() -> None:
    r = analyse(outcomes(2, sims=("low",)))
    assert r.primary.complete_cases == 0 and r.primary.planned_cases == 2
    assert [x.reason for x in r.exploratory] == ["high block not planned"] * 4
    assert [(x.loss_low, x.loss_high, x.difference) for x in r.exploratory] == [
        (0.0, None, None)
    ] * 4
    assert (r.completeness.blocks_complete, r.completeness.pairs_complete) == (4, 0)


# === every caveat at its edge ===


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


def caveats_of(
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
    assert caveats_of(correct) == [
        CEILING.format(""),
        "Degenerate bootstrap: every complete case has the same difference (0), so the "
        "interval has zero width; that reflects identical cases, not certainty.",
    ]


def test_the_simulation_banner_comes_first() -> None:
    assert caveats_of(correct, simulation=True)[0] == BANNER
    assert BANNER not in caveats_of(correct, simulation=False)


def test_a_wrong_refusal_is_no_answer_present_so_the_ceiling_stays() -> None:
    notes = caveats_of(lambda c, s, cond: "error:false_unknown" if cond == "A" else "correct")
    assert CEILING.format("") in notes


@pytest.mark.parametrize("position", ["B", "M", "E"])
def test_one_wrong_answer_at_any_position_breaks_the_ceiling(position: str) -> None:
    wrong = ("S2", "low", position)
    notes = caveats_of(
        lambda c, s, cond: "error:bad_format" if (c, s, cond) == wrong else "correct"
    )
    assert not any(n.startswith("Ceiling") for n in notes)


def test_an_incomplete_case_does_not_count_towards_the_ceiling() -> None:
    # S3 is out (a failed A); its wrong B must not hide the ceiling of the complete cases.
    def rule(c: str, s: str, cond: str) -> str:
        if c == "S3":
            return {"A": "protocol_failure:http_status", "B": "error:bad_format"}.get(
                cond, "correct"
            )
        return "correct"

    notes = caveats_of(rule)
    assert notes[0] == CEILING.format("")
    assert notes[-1] == (
        "1 of 3 planned cases are incomplete and excluded; the interval covers the complete "
        "cases only."
    )


def test_without_a_complete_case_the_ceiling_is_exploratory_and_ignores_failures() -> None:
    notes = caveats_of(
        lambda c, s, cond: "protocol_failure:finish_reason" if cond == "M" else "correct"
    )
    assert notes[0] == CEILING.format(EXPLORATORY)
    # The run is not evaluable, so no "incomplete cases" note: there is no interval to qualify.
    assert not any("planned cases are incomplete" in n for n in notes)


def test_without_a_complete_case_a_wrong_middle_still_breaks_the_ceiling() -> None:
    # Every A failed, so nothing is complete; the valid B, M and E answers decide, M included.
    rule = {"A": "protocol_failure:http_status", "M": "error:near_distractor_code"}
    notes = caveats_of(lambda c, s, cond: rule.get(cond, "correct"))
    assert not any(n.startswith(("Ceiling", "Floor")) for n in notes)


def test_a_ceiling_needs_both_similarities() -> None:
    # Every high-similarity response failed: the perfect low answers alone show no ceiling.
    notes = caveats_of(lambda c, s, cond: "protocol_failure:role" if s == "high" else "correct")
    assert not any(n.startswith("Ceiling") for n in notes)


def test_no_end_answer_correct_is_a_floor() -> None:
    notes = caveats_of(lambda c, s, cond: "error:absent_code" if cond in "BE" else "correct")
    assert notes[0] == FLOOR.format("")


@pytest.mark.parametrize("position", ["B", "E"])
def test_one_correct_end_answer_lifts_the_floor(position: str) -> None:
    def rule(c: str, s: str, cond: str) -> str:
        if (c, s, cond) == ("S1", "high", position):
            return "correct"
        return "error:absent_code" if cond in "BE" else "correct"

    assert not any(n.startswith("Floor") for n in caveats_of(rule))


def test_without_a_complete_case_the_floor_is_exploratory() -> None:
    rule = {"M": "protocol_failure:finish_reason", "A": "correct"}
    notes = caveats_of(lambda c, s, cond: rule.get(cond, "error:bad_format"))
    assert notes[0] == FLOOR.format(EXPLORATORY)


def test_without_a_complete_case_a_correct_e_answer_lifts_the_floor() -> None:
    # Exploratory branch: M always fails, so no case is complete; B is wrong, E right. E is an
    # end position too, so there is no floor (a rule reading only B would claim one).
    rule = {"M": "protocol_failure:finish_reason", "B": "error:absent_code", "E": "correct"}
    notes = caveats_of(lambda c, s, cond: rule.get(cond, "correct"))
    assert not any(n.startswith("Floor") for n in notes)


def test_without_a_complete_case_a_correct_b_answer_lifts_the_floor() -> None:
    # The mirror image: E wrong, B right; B counts as an end position in the exploratory branch.
    rule = {"M": "protocol_failure:finish_reason", "B": "correct", "E": "error:absent_code"}
    notes = caveats_of(lambda c, s, cond: rule.get(cond, "correct"))
    assert not any(n.startswith("Floor") for n in notes)


def test_no_valid_end_answer_at_all_is_no_floor() -> None:
    # B and E all failed, M answered wrong: nothing at an end position to judge a floor by.
    rule = {"B": "protocol_failure:role", "E": "protocol_failure:role", "M": "error:bad_format"}
    notes = caveats_of(lambda c, s, cond: rule.get(cond, "correct"))
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

    notes = caveats_of(rule, cases=4)
    assert (
        "Failures: 4 of 30 executed requests are protocol failures (http_status 3, "
        "indeterminate_timeout 1); they are listed with their reasons and never scored as wrong."
    ) in notes
    assert notes[-1].startswith("2 of 4 planned cases are incomplete")


def test_no_failures_note_when_only_unexecuted() -> None:
    notes = caveats_of(lambda c, s, cond: "unexecuted" if c == "S1" else "correct")
    assert not any(n.startswith("Failures") for n in notes)


def test_differing_cases_have_no_degenerate_note() -> None:
    # S1 loses the middle under high similarity only: S1 = 1, S2 = S3 = 0.
    def rule(c: str, s: str, cond: str) -> str:
        return "error:near_distractor_code" if (c, s, cond) == ("S1", "high", "M") else "correct"

    notes = caveats_of(rule)
    assert not any(n.startswith(("Degenerate", "Ceiling")) for n in notes)


def test_identical_nonzero_cases_give_a_degenerate_note_with_the_value() -> None:
    notes = caveats_of(
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

    notes = caveats_of(rule)
    assert notes == [
        position_note("B under low similarity 0/3 (floor); B under high similarity 0/3 (floor)")
    ]


def test_one_right_answer_lifts_a_position_off_the_floor() -> None:
    # Exactly one correct B under low similarity: that cell is 1/3, off the floor; high stays.
    wrong = {("S1", "high", "M"), ("S2", "low", "M"), ("S3", "low", "E"), ("S2", "high", "E")}

    def rule(c: str, s: str, cond: str) -> str:
        b_wrong = cond == "B" and (c, s) != ("S2", "low")
        return "error:bad_format" if b_wrong or (c, s, cond) in wrong else "correct"

    assert caveats_of(rule) == [position_note("B under high similarity 0/3 (floor)")]


def test_one_wrong_answer_takes_a_position_off_the_ceiling() -> None:
    # M low all right but one: 2/3 is no ceiling; every other cell varies as well.
    def rule(c: str, s: str, cond: str) -> str:
        wrong = {("S1", "low", "M"), ("S1", "high", "B"), ("S2", "high", "M"), ("S3", "low", "B")}
        wrong |= {("S2", "low", "E"), ("S3", "high", "E")}
        return "error:bad_format" if (c, s, cond) in wrong else "correct"

    assert caveats_of(rule) == []


def test_the_global_floor_leaves_out_the_b_and_e_floors_but_names_m() -> None:
    # No B or E is ever right: the Floor caveat says so; M at 0 still gets its own line.
    notes = caveats_of(lambda c, s, cond: "correct" if cond == "A" else "error:bad_format")
    assert notes == [
        FLOOR.format(""),
        position_note("M under low similarity 0/3 (floor); M under high similarity 0/3 (floor)"),
        "Degenerate bootstrap: every complete case has the same difference (0), so the "
        "interval has zero width; that reflects identical cases, not certainty.",
    ]


def test_a_full_ceiling_gets_one_caveat_not_six() -> None:
    notes = caveats_of(lambda c, s, cond: "correct")
    assert [n for n in notes if n.startswith(("Position", "Ceiling"))] == [CEILING.format("")]


@pytest.mark.parametrize(("broken", "note"), [(1, True), (2, False)])
def test_the_incomplete_note_only_when_the_run_is_evaluable(broken: int, note: bool) -> None:
    # Three cases, minimum two: one broken case leaves an evaluable run, two do not.
    notes = caveats_of(
        lambda c, s, cond: "unexecuted" if int(c[1:]) <= broken and cond == "A" else "correct"
    )
    assert any("planned cases are incomplete" in n for n in notes) == note


def test_a_similarity_other_than_low_or_high_counts_as_neither_for_the_ceiling() -> None:
    # caveats reads the two similarity conditions by name: a row of any other similarity
    # (no results table passes one, but caveats itself takes any Outcome) is not a 'high' one.
    def medium(out: Outcome) -> Outcome:
        return dataclasses.replace(out, similarity="medium") if out.similarity == "high" else out

    notes = caveats_of(correct, rename=medium)
    assert not any(n.startswith("Ceiling") for n in notes)


# === the decision rule against brute force ===


QUANTILE = "inverse CDF: Q(p) = smallest resample mean with P(mean <= Q) >= p"


def params(**kw: object) -> AnalysisParameters:
    return analysis_params(**kw)


def brute_quantile(values: list[int], denominator: int, p: Fraction) -> Fraction:
    """Q(p) over every ordered resample: the smallest mean whose cumulative share reaches p."""
    n = len(values)
    sums = Counter(sum(pick) for pick in itertools.product(values, repeat=n))
    acc = 0
    for s in sorted(sums):
        acc += sums[s]
        if Fraction(acc, n**n) >= p:
            return Fraction(s, n * denominator)
    raise AssertionError("unreachable")


def brute_decision(values: list[int], denominator: int, p: AnalysisParameters) -> str:
    if len(values) < p.min_complete_cases:
        return NOT_EVALUABLE
    alpha = (1 - Fraction(str(p.confidence))) / 2
    mean = Fraction(sum(values), len(values) * denominator)
    lower = brute_quantile(values, denominator, alpha)
    ok = mean >= Fraction(str(p.threshold)) and lower > 0
    return SUPPORTED if ok else NOT_SUPPORTED


# --- how many complete cases make a run evaluable -------------------------------------------------


@pytest.mark.parametrize(
    ("n", "reason"),
    [
        (0, "0 complete cases; the protocol requires at least 2"),
        (1, "1 complete case; the protocol requires at least 2"),
    ],
)
def test_fewer_than_two_complete_cases_are_not_evaluable(n: int, reason: str) -> None:
    out = decide([4] * n, 4, params())
    assert (out.decision, out.reason) == (NOT_EVALUABLE, reason)
    assert (out.estimate, out.estimate_exact, out.interval, out.threshold) == (
        None,
        None,
        None,
        0.1,
    )


def test_exactly_two_complete_cases_are_evaluable() -> None:
    out = decide([4, 4], 4, params())
    assert out.decision == SUPPORTED and out.interval is not None and out.interval.cases == 2


def test_the_minimum_comes_from_the_protocol() -> None:
    out = decide([4, 4], 4, params(min_complete_cases=3))
    assert (out.decision, out.reason) == (
        NOT_EVALUABLE,
        "2 complete cases; the protocol requires at least 3",
    )
    assert decide([4, 4, 4], 4, params(min_complete_cases=3)).decision == SUPPORTED


# --- the threshold and the lower bound, each exactly at its edge ----------------------------------


def test_exactly_the_threshold_with_a_positive_lower_bound_is_supported() -> None:
    # Ten cases, one at 0.2, one at 0, eight at 0.1: the mean is exactly 1/10, and no resample
    # mean at the 2.5% point is 0 or below.
    out = decide([2, 0, 1, 1, 1, 1, 1, 1, 1, 1], 10, params())
    assert out.estimate_exact == "1/10" and out.interval is not None
    assert Fraction(out.interval.lower_exact) > 0
    assert out.decision == SUPPORTED
    assert out.reason == (
        "difference 0.1 >= threshold 0.1 and the 95% interval's lower bound "
        f"{fmt(Fraction(out.interval.lower_exact))} is above 0"
    )


def test_exactly_the_threshold_with_a_lower_bound_of_zero_is_not_supported() -> None:
    # Two cases, 0 and 0.2: a quarter of all resamples have mean 0, so Q(1/40) = 0.
    out = decide([0, 2], 10, params())
    assert out.estimate_exact == "1/10" and out.interval is not None
    assert out.interval.lower_exact == "0" and out.interval.upper_exact == "1/5"
    assert (out.decision, out.reason) == (
        NOT_SUPPORTED,
        "the 95% interval's lower bound 0 is not above 0",
    )


def test_just_below_the_threshold_is_not_supported_however_sure() -> None:
    out = decide([1] * 11, 11, params())  # every case exactly 1/11 < 1/10
    assert out.interval is not None and out.interval.lower_exact == "1/11"
    assert (out.decision, out.reason) == (
        NOT_SUPPORTED,
        "difference 0.09091 is below the threshold 0.1",
    )


def test_both_reasons_are_given_when_both_fail() -> None:
    out = decide([-1, 1], 4, params())
    assert out.reason == (
        "difference 0 is below the threshold 0.1 and the 95% interval's lower bound -0.25 is "
        "not above 0"
    )


def test_a_zero_threshold_still_needs_a_positive_lower_bound() -> None:
    assert decide([0, 0], 4, params(threshold=0.0)).decision == NOT_SUPPORTED
    assert decide([1, 1], 4, params(threshold=0.0)).decision == SUPPORTED


def test_other_confidence_levels_are_named_in_the_reason() -> None:
    out = decide([0, 2], 10, params(confidence=0.5))
    # At 50% the lower point is Q(1/4): exactly the 0's cumulative share, so Q(1/4) = 0 (a tie
    # is resolved to the smaller value), and the upper point Q(3/4) is 0.1.
    assert out.interval is not None
    assert (out.interval.lower_exact, out.interval.upper_exact) == ("0", "1/10")
    assert out.reason == "the 50% interval's lower bound 0 is not above 0"


# --- what the decision records --------------------------------------------------------------------


def test_the_exact_interval_record() -> None:
    out = decide([0, 2], 10, params())
    assert out.threshold == 0.1 and out.estimate == 0.1
    iv = out.interval
    assert iv is not None
    assert (iv.confidence, iv.lower, iv.upper) == (0.95, 0.0, 0.2)
    assert (iv.method, iv.seed, iv.resamples, iv.cases, iv.degenerate) == (
        "exact",
        None,
        3,
        2,
        False,
    )
    assert iv.quantile == QUANTILE
    assert iv.distribution == (Mass(0.0, 1), Mass(0.1, 2), Mass(0.2, 1))
    assert iv.total_weight == 4


def test_the_monte_carlo_interval_record() -> None:
    out = decide([4, 0, 2, 4, -2] * 3, 4, params(bootstrap_resamples=500, bootstrap_seed=7))
    iv = out.interval
    assert iv is not None
    assert (iv.method, iv.seed, iv.resamples, iv.cases, iv.total_weight) == (
        "monte-carlo",
        7,
        500,
        15,
        500,
    )
    assert sum(m.weight for m in iv.distribution) == 500
    assert [m.value for m in iv.distribution] == sorted({m.value for m in iv.distribution})


def test_the_exact_limit_comes_from_the_protocol() -> None:
    values = [4, 0, 2, 4, -2, 1]
    assert decide(values, 4, params(exact_bootstrap_max_cases=6)).interval.method == "exact"
    mc = decide(values, 4, params(exact_bootstrap_max_cases=5)).interval
    assert (mc.method, mc.resamples, mc.seed) == ("monte-carlo", 2000, 20260930)


def test_a_degenerate_interval_is_flagged() -> None:
    iv = decide([3, 3, 3], 4, params()).interval
    assert iv is not None and iv.degenerate and iv.lower == iv.upper == 0.75


# --- the rule against brute force -----------------------------------------------------------------


@settings(derandomize=True, max_examples=150, deadline=None)
@given(
    values=st.lists(st.integers(-4, 4), max_size=5),
    denominator=st.sampled_from([1, 2, 4, 10]),
    threshold=st.sampled_from([0.0, 0.1, 0.25, 0.5]),
    confidence=st.sampled_from([0.5, 0.8, 0.9, 0.95]),
    minimum=st.integers(1, 3),
)
def test_decision_matches_brute_force(
    values: list[int], denominator: int, threshold: float, confidence: float, minimum: int
) -> None:
    p = params(threshold=threshold, confidence=confidence, min_complete_cases=minimum)
    out = decide(values, denominator, p)
    assert out.decision == brute_decision(values, denominator, p)
    if out.interval is not None:
        alpha = (1 - Fraction(str(confidence))) / 2
        lower = brute_quantile(values, denominator, alpha)
        upper = brute_quantile(values, denominator, 1 - alpha)
        assert (out.interval.lower_exact, out.interval.upper_exact) == (str(lower), str(upper))
        assert out.estimate_exact == str(Fraction(sum(values), len(values) * denominator))


# === the decision at its turning points ===


def quick(values: list[int], denominator: int, params) -> tuple:
    """(cases, estimate, lower, upper, decision) of ``decide``, as fractions."""
    d = decide(values, denominator, params)
    iv = d.interval
    exact = (d.estimate_exact, *((iv.lower_exact, iv.upper_exact) if iv else (None, None)))
    return (len(values), *(None if x is None else Fraction(x) for x in exact), d.decision)


def test_decide_at_the_minimum_and_at_the_threshold() -> None:
    p = analysis_params(min_complete_cases=3, threshold=0.25, confidence=0.5)
    assert quick([1, 1], 4, p)[4] == NOT_EVALUABLE
    assert quick([], 4, p)[4] == NOT_EVALUABLE
    assert quick([1, 1, 1], 4, p)[4] == "supported"  # exactly 0.25
    assert quick([1, 1, 0], 4, p)[4] == "not supported"  # one unit below


def test_below_the_minimum_case_count_nothing_is_decided() -> None:
    p = analysis_params(min_complete_cases=3)
    assert quick([2, 2], 2, p) == (2, None, None, None, "not evaluable")
    one = Fraction(1)
    assert quick([2, 2, 2], 2, p) == (3, one, one, one, "supported")


def test_no_case_is_never_evaluable_even_with_no_minimum() -> None:
    p = analysis_params(min_complete_cases=0)
    assert quick([], 2, p) == (0, None, None, None, "not evaluable")
    assert quick([2], 2, p)[4] == "supported"


def test_supported_needs_the_estimate_at_the_threshold_and_the_lower_bound_above_0() -> None:
    # [1, 1, 1, 2]/4 = 5/16 with the lower bound 1/4 (at 50 %: 81 of 256 resamples sum 4).
    p = analysis_params(confidence=0.5, threshold=0.3125)
    q = quick([1, 1, 1, 2], 4, p)
    assert q == (4, Fraction(5, 16), Fraction(1, 4), Fraction(3, 8), "supported")
    above = analysis_params(confidence=0.5, threshold=0.3126)
    assert quick([1, 1, 1, 2], 4, above)[4] == "not supported"
    # A lower bound of exactly 0 is not above 0.
    assert quick([0, 0, 4], 4, analysis_params(confidence=0.5)) == (
        3,
        Fraction(1, 3),
        Fraction(0),
        Fraction(2, 3),
        "not supported",
    )
