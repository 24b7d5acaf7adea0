"""The preregistered analysis: completeness branches, decisions, caveats, validation, pooling."""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction
from pathlib import Path

import pytest
from support.analysis import analysis_params
from support.results import make_input, make_prepared, make_rows, middle_loss, write_csv

from needlepoint import cli
from needlepoint.analysis.document import analyze, analyze_results, build_document
from needlepoint.analysis.inputs import (
    RESULT_COLUMNS,
    from_results_csv,
    refuse_pooling,
)
from needlepoint.analysis.primary import (
    NOT_EVALUABLE,
    NOT_SUPPORTED,
    SUPPORTED,
    PrimaryResult,
    decide,
    primary,
)
from needlepoint.design.prepared import PlanRow, Prepared
from needlepoint.errors import NeedlepointError

CASES = [f"S{i}" for i in range(1, 9)]
ALL_HIGH_M_WRONG = middle_loss({c: ("high",) for c in CASES})


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    return make_prepared(tmp_path_factory)


def seq_of(prepared: Prepared, case: str, length: int, sim: str, cond: str) -> int:
    return next(
        p.seq
        for p in prepared.plan
        if (p.case, p.length, p.similarity, p.condition) == (case, length, sim, cond)
    )


def run(prepared: Prepared, spec=None, simulation: bool = True) -> PrimaryResult:
    return primary(make_input(prepared, spec, simulation))


# --- completeness branches -------------------------------------------------------------------


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


# --- the metric and the three decisions ------------------------------------------------------


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


# --- caveats ---------------------------------------------------------------------------------


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


# --- secondary tables ------------------------------------------------------------------------


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


# --- validation of results tables ------------------------------------------------------------


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


# --- pooling ---------------------------------------------------------------------------------


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


# --- end to end ------------------------------------------------------------------------------


def test_cli_analyze_results_writes_everything_deterministically(
    tmp_path: Path, prepared: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    csv_path = write_csv(tmp_path / "results.csv", make_rows(prepared, ALL_HIGH_M_WRONG))
    outputs = []
    for name in ("one", "two"):
        argv = ["analyze", "--results", str(csv_path), "--prepared", str(prepared.root)]
        if name == "two":
            argv.append("--no-figures")  # figure bytes are compared in test_plots
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
    decision = next(line for line in summary.splitlines() if line.startswith("**Decision"))
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
