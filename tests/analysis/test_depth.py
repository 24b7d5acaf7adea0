"""The depth analysis on simulated runs of protocols/depth-grid.json with known shapes.

Each scenario is a seeded ``position`` simulation whose depth parameters say what the truth is:
a steady decline, a dip at depth 0.5, or errors driven by the near names ahead of the target.
The analysis must find each, and only it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from needlepoint.analysis.depth import (
    analyze_depth,
    case_interval,
    contrast_weights,
    decide,
    depth_robustness,
    integer_weights,
    per_case_values,
)
from needlepoint.analysis.depth.report import DepthDocument, from_json, headline_lines, to_json
from needlepoint.analysis.inputs import from_run
from needlepoint.cli import main
from needlepoint.design.prepared import prepare
from needlepoint.errors import NeedlepointError
from needlepoint.schema import document_bytes
from tests.support.analysis import analysis_params, outcome

ROOT = Path(__file__).resolve().parents[2]
FLAT = {
    "p_edge": 0.97,
    "p_middle": 0.97,
    "high_similarity_middle_drop": 0,
    "high_similarity_edge_drop": 0,
    "length_drop_per_100_records": 0,
}
SCENARIOS = {
    "decline": FLAT | {"depth_decline": 0.7},
    "dip": FLAT | {"depth_dip": 0.7},
    "near": FLAT | {"near_before_drop": 0.13},
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("depth")
    prepared = prepare(root / "prepared", ROOT / "protocols" / "depth-grid.json")
    out = {}
    for name, params in SCENARIOS.items():
        run_dir = root / name
        args = ["run", str(prepared), "--run-dir", str(run_dir), "--allow", "432"]
        args += ["--simulate", "position", "--no-progress"]
        for key, value in params.items():
            args += ["--sim-param", f"{key}={value}"]
        assert main(args) == 0
        out[name] = run_dir
    return out


def _near(result, similarity: str):
    model = next(m for m in result.models if m.similarity == similarity)
    return next(c for c in model.coefficients if c.term == "near names before")


def test_a_decline_shows_as_ends_on_either_side_of_the_interior(runs: dict[str, Path]) -> None:
    result = analyze_depth(from_run(runs["decline"]))
    for sim in ("low", "high"):
        first, last = result.ends[sim]
        assert first.lower > 0 and last.upper < 0, (sim, first, last)
    # The shape verdict reads it with the reference rule: a decline, never a U, over all
    # lengths and at each of the two.
    assert [(r.similarity, r.length, r.verdict) for r in result.shapes] == [
        (sim, n, "decline with position") for sim in ("low", "high") for n in (None, 60, 240)
    ]
    # Over all lengths both ends sit clearly apart from the interior (at one length the last
    # end may stay within its interval: a decline needs only the first end above).
    pooled = [r for r in result.shapes if r.length is None]
    assert all(r.first.direction == 1 and r.last.direction == -1 for r in pooled)
    assert all(r.first.direction == 1 and r.last.direction <= 0 for r in result.shapes)
    # Nothing in it is about near names, and the model does not invent it.
    near = _near(result, "high")
    assert near.lower < 0 < near.upper


def test_a_dip_at_the_middle_shows_as_both_ends_above_the_interior(runs: dict[str, Path]) -> None:
    result = analyze_depth(from_run(runs["dip"]))
    for sim in ("low", "high"):
        first, last = result.ends[sim]
        assert first.lower > 0 and last.lower > 0, (sim, first, last)
    pooled = [r for r in result.shapes if r.length is None]
    assert [r.verdict for r in pooled] == ["middle loss (U-shape)"] * 2
    # Holm across the twelve end contrasts of the six rows: each adjusted p at least its raw p,
    # and the smallest raw p multiplied by the family's size
    ps = [c for r in result.shapes for c in (r.first, r.last)]
    assert len(ps) == 12
    for c in ps:
        assert c.p_adjusted is not None and c.p_adjusted >= c.p
    low = min(ps, key=lambda c: c.p)
    assert low.p_adjusted == pytest.approx(min(1.0, 12 * low.p))


def test_the_rows_at_each_length_add_up_to_the_row_over_all(runs: dict[str, Path]) -> None:
    result = analyze_depth(from_run(runs["near"]))
    for sim in ("low", "high"):
        rows = {r.length: r for r in result.shapes if r.similarity == sim}
        assert list(rows) == [None, 60, 240]
        for cond, text in rows[None].counts.items():
            parts = [rows[n].counts[cond].split("/") for n in (60, 240)]
            assert text == f"{sum(int(a) for a, _ in parts)}/{sum(int(b) for _, b in parts)}"
        # One length's contrast has half the denominator of the pooled one: its estimate is
        # the mean of the two lengths' estimates.
        for end in ("first", "last"):
            each = [getattr(rows[n], end).estimate for n in (60, 240)]
            assert getattr(rows[None], end).estimate == pytest.approx(sum(each) / 2)


def test_near_names_ahead_read_as_a_decline_and_the_headline_names_the_shape(
    runs: dict[str, Path],
) -> None:
    """Drawn per case, near names ahead of the target grow with depth: under high similarity
    the curve declines (D0 36/36 … D1 8/36 in this seeded run), and the headline says so."""
    from needlepoint.analysis.depth.report import headline_lines

    result = analyze_depth(from_run(runs["near"]))
    high = next(r for r in result.shapes if r.similarity == "high" and r.length is None)
    assert high.verdict == "decline with position"
    assert high.counts["D0"] == "36/36" and high.counts["D1"] == "8/36"
    assert high.last.estimate_exact == "-1/3"
    lines = headline_lines(result)
    assert sum(line.startswith("  shape: ") for line in lines) == 2
    assert sum(line.startswith("  shape at 60 records: ") for line in lines) == 2
    assert "Holm across the 12 end contrasts" in lines[2]


def test_near_names_before_the_target_show_in_the_model_apart_from_depth(
    runs: dict[str, Path],
) -> None:
    result = analyze_depth(from_run(runs["near"]))
    high, low = _near(result, "high"), _near(result, "low")
    assert high.upper < 0 and high.p_two_sided < 0.01, high
    assert low.lower < 0 < low.upper, low  # unrelated names in the same slots: a placebo
    # Depth itself costs nothing here: no depth coefficient is clearly below 0 once the near
    # names are in the model.
    model = next(m for m in result.models if m.similarity == "high")
    depth_terms = [c for c in model.coefficients if c.term.startswith("depth")]
    assert len(depth_terms) == 4 and all(c.upper > 0 for c in depth_terms), depth_terms


def test_analyze_writes_depth_json_summary_and_figures(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(runs["dip"])]) == 0
    out = capsys.readouterr().out
    assert "preregistered contrast ends-minus-interior (high − low)" in out
    folder = runs["dip"] / "analysis"
    doc = json.loads((folder / "depth.json").read_text("utf-8"))
    assert doc["format"] == "needlepoint-depth-analysis" and doc["simulation"] is True
    assert len(doc["accuracy"]) == 2 * 2 * 6
    assert (folder / "accuracy_by_depth.png").stat().st_size > 10_000
    assert (folder / "depth_by_length_heatmap.png").stat().st_size > 10_000
    assert "## The model" in (folder / "summary.md").read_text("utf-8")
    first = (folder / "depth.json").read_bytes()
    assert main(["analyze", str(runs["dip"])]) == 0
    assert (folder / "depth.json").read_bytes() == first  # same inputs, same bytes


# Every depth.json on record: the typed reader takes it whole and writes the same bytes back.
COMMITTED_DEPTH = sorted((ROOT / "evidence").glob("*/**/analysis/depth.json"))


@pytest.mark.parametrize("path", COMMITTED_DEPTH, ids=lambda p: p.parent.parent.name)
def test_committed_depth_json_reads_back_to_the_same_bytes(path: Path) -> None:
    data = path.read_bytes()
    doc = from_json(data)
    assert isinstance(doc, DepthDocument) and document_bytes(doc) == data
    # A shape row over every length has no length key; a row at one length names it.
    plain = json.loads(data)
    assert any("length" not in r for r in plain["shapes"])
    assert sorted(r["length"] for r in plain["shapes"] if "length" in r) == sorted(
        r.length for r in doc.shapes if r.length is not None
    )


def test_depth_json_written_by_analyze_reads_back(runs: dict[str, Path]) -> None:
    assert main(["analyze", str(runs["near"])]) == 0
    data = (runs["near"] / "analysis" / "depth.json").read_bytes()
    doc = from_json(data)
    assert document_bytes(doc) == data and doc.simulation is True
    assert [m.similarity for m in doc.models] == ["low", "high"]
    assert doc.near_named["high"].wrong >= doc.near_named["high"].before


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"version": 2},
            "depth.json: needlepoint-depth-analysis version 2 is not supported "
            "(this needlepoint reads version 1)",
        ),
        ({"format": "other"}, "depth.json: format 'other' is not 'needlepoint-depth-analysis'"),
        ({"extra": 1}, "depth.json: field extra: unknown field"),
        ({"depths": ["x"]}, "depth.json: field depths[0]: expected float, got 'x'"),
    ],
)
def test_the_depth_json_reader_refuses_another_document_in_one_line(
    change: dict, message: str
) -> None:
    plain = json.loads(COMMITTED_DEPTH[0].read_bytes()) | change
    with pytest.raises(NeedlepointError) as err:
        from_json(json.dumps(plain))
    assert str(err.value) == message


def test_a_depth_json_written_before_near_named_and_robustness_reads() -> None:
    plain = json.loads(COMMITTED_DEPTH[0].read_bytes())
    del plain["near_named"], plain["robustness"]
    for row in plain["shapes"]:
        row.pop("length", None)
    doc = from_json(json.dumps(plain))
    assert doc.near_named == {} and doc.robustness is None
    assert {r.length for r in doc.shapes} == {None}


def test_a_model_whose_fit_is_not_finite_is_no_model(
    runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # depth.json is strict JSON: a NaN coefficient would make it unwritable.
    from statsmodels.genmod.generalized_estimating_equations import GEE

    fit = GEE.fit

    def nan_fit(self, *args, **kwargs):
        result = fit(self, *args, **kwargs)
        result.params[1] = np.nan
        return result

    monkeypatch.setattr(GEE, "fit", nan_fit)
    result = analyze_depth(from_run(runs["near"]))
    assert {(m.coefficients, m.note) for m in result.models} == {((), "the fit failed: not finite")}
    assert from_json(to_json(result)).models == result.models


@pytest.mark.parametrize(
    ("name", "weights"),
    [
        ("ends-minus-interior", [0.5, -1 / 3, -1 / 3, -1 / 3, 0.5]),
        ("ends-minus-centre", [0.5, 0, -1, 0, 0.5]),
        ("first-minus-last", [1, 0, 0, 0, -1]),
    ],
)
def test_contrast_weights(name: str, weights: list[float]) -> None:
    got = contrast_weights(name, [0, 0.25, 0.5, 0.75, 1])
    assert got == pytest.approx(weights) and sum(got) == pytest.approx(0)


def test_a_centre_contrast_needs_an_interior_depth() -> None:
    with pytest.raises(NeedlepointError, match="needs at least three depths"):
        contrast_weights("ends-minus-centre", [0, 1])


def test_compare_sets_depth_runs_side_by_side(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp"
    args = ["compare", str(runs["decline"]), str(runs["dip"]), "--out", str(out)]
    assert main([*args, "--label", "decline", "--label", "dip"]) == 0
    printed = capsys.readouterr().out
    assert "decline: " in printed and "dip: " in printed
    text = (out / "comparison.md").read_text("utf-8")
    assert "| decline |" in text and "| dip |" in text
    assert (out / "comparison_depth.png").exists()
    assert (out / "runs" / "1" / "depth.json").exists() and (
        out / "runs" / "2" / "depth.json"
    ).exists()


def test_calibrate_reads_a_depth_pilot_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pilot = tmp_path / "pilot"
    args = ["pilot", "--protocol", str(ROOT / "protocols" / "depth-grid.json"), "--out", str(pilot)]
    args += ["--lengths", "24", "--cases", "6", "--evidence-root", str(tmp_path)]
    assert main([*args, "--allow", "100", "--simulate", "perfect", "--no-progress"]) == 0
    capsys.readouterr()
    out = tmp_path / "v42.json"
    cal = ["calibrate", str(pilot), "--out", str(out), "--evidence-root", str(tmp_path)]
    # A perfect model sits at the ceiling in both arms: no length qualifies, nothing written.
    assert main([*cal, "--simulations", "20", "--report", str(tmp_path / "cal.json")]) == 1
    printed = capsys.readouterr().out
    assert "end (first and last depth) accuracy in [0.6, 0.95]; a case's 12 requests" in printed
    assert "end accuracy under low similarity 1.000 (12/12) is above the band" in printed
    assert "NO PROTOCOL WRITTEN: no length qualifies" in printed
    assert not out.exists() and (tmp_path / "cal.json").exists()


# --- the robustness line of a depth decision ------------------------------------------------------

PRESENT = ["D0", "D0.5", "D1"]  # ends-minus-interior: weights 1/2, −1, 1/2


def _case(case: str, high: list[int | None], low: tuple[int, ...] = (1, 1, 1)) -> list:
    """One case's answers at one length: 1 correct, 0 wrong, None a protocol failure."""
    rows = []
    for sim, answers in (("low", list(low)), ("high", high)):
        for cond, ok in zip(PRESENT, answers, strict=True):
            status = "protocol_failure" if ok is None else ("correct" if ok else "error")
            rows.append(
                outcome(seq=len(rows) + 100 * int(case[1:]), case=case, length=60,
                        similarity=sim, condition=cond, status=status, kind="", block=1)
            )  # fmt: skip
    return rows


def _robustness(outcomes: list, params=None):
    from needlepoint.analysis.depth import _case_scores

    params = params or analysis_params()
    weights = contrast_weights("ends-minus-interior", [0, 0.5, 1])
    scores = _case_scores(outcomes, PRESENT, [60])
    iv = case_interval(per_case_values(np.array(list(scores.values())), weights), params, 0)
    decision, _ = decide(iv, params)
    return decision, depth_robustness(outcomes, scores, PRESENT, [60], weights, params, decision)


def test_integer_weights_count_the_contrast_in_integers() -> None:
    assert integer_weights([0.5, -1 / 3, -1 / 3, -1 / 3, 0.5]) == ([3, -2, -2, -2, 3], 6)
    assert integer_weights([0.5, 0, -1, 0, 0.5]) == ([1, 0, -2, 0, 1], 2)
    assert integer_weights([1.0, 0.0, -1.0]) == ([1, 0, -1], 1)


def test_a_dip_in_every_case_is_robust_and_says_why() -> None:
    # Eight cases, each a dip under high similarity only: value 1 each, interval [1, 1].
    outcomes = [o for i in range(1, 9) for o in _case(f"S{i}", [1, 0, 1])]
    decision, r = _robustness(outcomes)
    assert decision == "supported"
    assert r.verdict == (
        "robust: no missing cell, no single case and no other method changes it; sign-flip p 1/256"
    )
    assert [s.label for s in r.leave_one_out] == [f"without S{i}" for i in range(1, 9)]
    assert r.sign_flip is not None and r.sign_flip.statistic_exact == "1"


def test_two_cases_are_fragile_by_each_case_and_by_the_sign_flip_test() -> None:
    outcomes = [o for i in (1, 2) for o in _case(f"S{i}", [1, 0, 1])]
    decision, r = _robustness(outcomes)
    assert decision == "supported"
    assert r.verdict == (
        "fragile: leaving out S1 or S2 flips it (2 of 2 cases); "
        "the sign-flip test disagrees (p 1/4)"
    )
    assert {s.decision for s in r.leave_one_out} == {"not decided"}


def test_missing_cells_are_scored_at_four_extremes_and_named_when_they_flip_it() -> None:
    outcomes = [o for i in (1, 2) for o in _case(f"S{i}", [1, 0, 1])]
    # Two incomplete cases: the interior and the last depth failed under high similarity.
    outcomes += [o for i in (3, 4) for o in _case(f"S{i}", [1, None, None])]
    decision, r = _robustness(outcomes)
    assert decision == "supported"
    labels = {s.label: s.decision for s in r.missing}
    # Correct at the interior lowers the contrast, correct at the last depth raises it.
    assert labels == {
        "all missing cells correct": "not supported",  # cases worth 0: [1, 1, 0, 0]
        "all missing cells wrong": "supported",  # 0.5 each: never at or below 0
        "each missing cell at the value that lowers the contrast": "not supported",
        "each missing cell at the value that raises it": "supported",
    }
    assert all(s.cells == (304, 305, 404, 405) for s in r.missing)
    assert "it flips when all missing cells correct (not supported); when each missing cell " in (
        r.verdict
    )


def test_an_undecided_run_has_no_robustness_line() -> None:
    decision, r = _robustness(_case("S1", [1, 0, 1]))
    assert decision == "not decided"
    assert (r.verdict, r.missing, r.leave_one_out, r.sign_flip) == ("", (), (), None)


def test_the_headline_registry_and_comparison_print_the_robustness_line(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = analyze_depth(from_run(runs["dip"]))
    assert result.robustness is not None and result.robustness.verdict.startswith("robust: ")
    assert f"robustness: {result.robustness.verdict}" in headline_lines(result)
    doc = json.loads(to_json(result))
    assert doc["robustness"]["verdict"] == result.robustness.verdict
    assert main(["registry", str(runs["dip"].parent)]) == 0
    assert f"; {result.robustness.verdict}; audit" in capsys.readouterr().out
    out = tmp_path / "cmp"
    assert main(["compare", str(runs["decline"]), str(runs["dip"]), "--out", str(out)]) == 0
    assert "| robustness |" in (out / "comparison.md").read_text("utf-8")
