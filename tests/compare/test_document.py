"""`needlepoint compare`: each run's numbers are its own analysis, and every refusal is one line.

Runs are named by model, or by the user's ``--label``, never by a path relative to ``--out``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from support.loopback import LoopbackServer, answers_from
from support.runner import KEY_ENV, MODEL, SENTINEL

from needlepoint.analysis.document import analyze_run
from needlepoint.cli.app import main
from needlepoint.compare.document import compare_runs, run_names
from needlepoint.compare.record import MIXED_LABEL, from_json, read_comparison, to_json
from needlepoint.design.prepared import load_prepared, prepare
from needlepoint.errors import NeedlepointError
from needlepoint.run.options import RunOptions
from needlepoint.run.runner import run_protocol

# === the comparison ===


BANNER = "SIMULATION — not a model result"


def simulate(prepared: Path, run_dir: Path, allow: int = 128, **kw: Any) -> Path:
    options = RunOptions(allow=allow, simulate="position", progress="off", fsync=False, **kw)
    run_protocol(prepared, run_dir, options)
    return run_dir


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Runs of one design (two model variants), a live run, and a run of another design."""
    root = tmp_path_factory.mktemp("lab")
    (root / "design.json").write_text(json.dumps({"version": 2, "seeds": {"materials": 5}}))
    base = prepare(root / "prepared")
    variant = prepare(root / "prepared-variant", model="other-model")  # a model variant
    other = prepare(root / "prepared-other", root / "design.json")
    runs = {
        "a": simulate(base, root / "runs" / "a"),
        "b": simulate(variant, root / "runs" / "b", sim_params={"p_middle": 0.4, "seed": 3}),
        "partial": simulate(base, root / "runs" / "partial", allow=70),
        "other": simulate(other, root / "runs" / "other"),
        "pilot": simulate(base, root / "runs" / "pilot", run_meta={"pilot": True}),
        "odd": simulate(base, root / "runs" / "odd", run_meta={"pilot": "yes"}),
    }
    # A live run whose answers carry text around every third code: lenient differs from strict.
    p = load_prepared(base)
    right = answers_from(p.answer_key, p.bodies)
    chatty = {row.seq % 3 == 0 for row in p.plan}
    assert chatty == {True, False}

    def answer(body: bytes, payload: dict[str, Any]) -> str:
        code = right(body, payload)
        seq = next(s for s, b in p.bodies.items() if b == body)
        return f"The answer is {code}." if seq % 3 == 0 else code

    import os

    os.environ[KEY_ENV] = SENTINEL
    with LoopbackServer(answer) as server:
        options = RunOptions(
            allow=128,
            base_url=server.base_url,
            model=MODEL,
            api_key_env=KEY_ENV,
            min_gap_s=0,
            override_reason="loopback test server",
            timeout_s=30,
            progress="off",
            fsync=False,
        )
        run_protocol(base, root / "runs" / "live", options)
    runs["live"] = root / "runs" / "live"
    return runs


def test_each_run_equals_its_own_analysis(lab: dict[str, Path], tmp_path: Path) -> None:
    order = ["b", "a", "partial"]
    result = compare_runs([lab[k] for k in order], tmp_path / "cmp")
    doc = result.document
    assert all(r.run_dir.startswith("../") for r in doc.runs)  # relative to the comparison
    assert [Path(r.run_dir).name for r in doc.runs] == order  # the order given, never sorted
    assert [r.model for r in doc.runs] == ["other-model", MODEL, MODEL]
    assert doc.simulation and doc.label == BANNER
    for name, run in zip(order, doc.runs, strict=True):
        alone = analyze_run(lab[name], tmp_path / f"alone-{name}", figures=False).document
        p = alone.primary
        assert run.decision == p.decision and run.reason == p.reason
        assert run.difference == p.estimate and run.difference_exact == p.estimate_exact
        assert run.interval == (
            None if p.interval is None else (p.interval.lower, p.interval.upper)
        )
        assert (run.complete_cases, run.planned_cases) == (p.complete_cases, p.planned_cases)
        assert run.caveats == alone.caveats
        assert run.protocol_fingerprint == alone.protocol.fingerprint
        assert run.journal_sha256 == alone.run.journal_sha256
        failures = {f.kind: f.count for f in alone.secondary.protocol_failures}
        assert run.protocol_failures == {k: v for k, v in failures.items() if k != "unexecuted"}
        assert run.unexecuted == failures.get("unexecuted", 0)
        strict = [
            (c.similarity, c.length, c.condition, c.valid, c.correct, c.accuracy, c.not_valid)
            for c in alone.secondary.accuracy
        ]
        mine = [
            (c.similarity, c.length, c.condition, c.valid, c.correct, c.accuracy, c.not_valid)
            for c in run.accuracy
        ]
        assert mine == strict
    assert doc.runs[2].unexecuted == 58 and doc.runs[2].complete_cases < 8
    assert len({r.design_fingerprint for r in doc.runs}) == 1
    assert len({r.protocol_fingerprint for r in doc.runs}) == 2  # two model variants


def test_files_are_labelled_stable_and_read_back(lab: dict[str, Path], tmp_path: Path) -> None:
    first = compare_runs([lab["a"], lab["b"]], tmp_path / "one")
    again = compare_runs([lab["a"], lab["b"]], tmp_path / "two")
    names = ["comparison.json", "comparison.md", "grid.csv", "grid.md"]
    names += list(first.document.figures.values())
    # no failure in either run: no failures figure (an empty panel says nothing)
    assert sorted(first.document.figures) == ["accuracy", "forest", "grid"]
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == sorted(names)
    for name in names:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    md = (tmp_path / "one" / "comparison.md").read_text(encoding="utf-8")
    assert md.startswith(f"# {BANNER}\n")
    assert read_comparison(tmp_path / "one" / "comparison.json") == first.document
    assert first.lines()[0] == BANNER
    assert again.table("runs")["decision"].tolist() == [r.decision for r in again.document.runs]
    text = (tmp_path / "one" / "comparison.json").read_text(encoding="utf-8")
    assert str(tmp_path) not in text and str(tmp_path) not in md  # no machine paths


def test_lenient_is_exploratory_and_counted_per_cell(lab: dict[str, Path], tmp_path: Path) -> None:
    doc = compare_runs([lab["live"], lab["a"]], tmp_path / "cmp", allow_simulated=True).document
    run = doc.runs[0]
    # Every third answer has text around the right code: strictly wrong, leniently right.
    for cell in run.accuracy:
        assert cell.lenient_correct == cell.valid and cell.correct < cell.valid
    present, absent = run.scores
    assert present.lenient_correct == present.valid > present.correct
    assert absent.group == "answer absent (A)"
    assert not run.simulation and run.label is None
    # The decision is the strict one: lenient answers never enter it.
    assert run.decision == analyze_run(lab["live"], tmp_path / "alone", figures=False).decision


def test_simulated_beside_live_needs_the_flag_and_is_labelled(
    lab: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["compare", str(lab["live"]), str(lab["a"]), "--out", str(tmp_path / "x")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is simulated but" in err and "--allow-simulated" in err
    assert not (tmp_path / "x").exists()
    assert main([*args, "--allow-simulated", "--no-figures"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == MIXED_LABEL
    doc = read_comparison(tmp_path / "x" / "comparison.json")
    assert doc.label == MIXED_LABEL and [r.label for r in doc.runs] == [None, BANNER]
    md = (tmp_path / "x" / "comparison.md").read_text(encoding="utf-8")
    assert md.startswith(f"# {MIXED_LABEL}") and "(SIMULATION)" in md


REFUSALS = {
    "one run": (["a"], "compare needs two or more run folders of one design (given 1)"),
    "another design": (["a", "other"], "design fingerprint"),
    "the same run twice": (["a", "a"], "is the same run as"),
    "a pilot": (["a", "pilot"], "is a pilot"),
    "an unreadable pilot marker": (["odd"], "neither true nor false"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals_are_one_line_naming_the_run(
    lab: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    names, expected = REFUSALS[case]
    assert main(["compare", *[str(lab[n]) for n in names], "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err and "Traceback" not in err
    assert str(lab[names[-1]]) in err


def test_bad_folders_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "run.json").write_text("{")
    for target in (tmp_path / "missing", broken):
        assert main(["compare", str(target), "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err


def test_reading_refuses_other_versions_and_bad_intervals(
    lab: dict[str, Path], tmp_path: Path
) -> None:
    doc = compare_runs([lab["a"], lab["b"]], tmp_path / "cmp", figures=False).document
    value = json.loads(to_json(doc))
    with pytest.raises(NeedlepointError, match="version 1 is not supported"):
        from_json(json.dumps(value | {"version": 1}))
    with pytest.raises(NeedlepointError, match="version 3 is not supported"):
        from_json(json.dumps(value | {"version": 3}))
    value["runs"][0]["interval"] = [0.1, 0.2, 0.3]
    with pytest.raises(NeedlepointError, match=r"expected \[low, high\]"):
        from_json(json.dumps(value))
    value["runs"][0]["interval"] = "wide"
    with pytest.raises(NeedlepointError, match="runs"):
        from_json(json.dumps(value))


def test_simulated_variants_share_the_design(tmp_path: Path) -> None:
    from needlepoint.notebook.steps import simulate_variants

    runs = [tmp_path / "runs" / "x", tmp_path / "runs" / "y"]
    profiles = [
        {"model": "sim-x", "params": {"p_middle": 0.5}},
        {"model": "sim-y", "params": {"high_similarity_middle_drop": 0.6, "seed": 4}},
    ]
    lines = simulate_variants(runs, profiles, tmp_path / "prepared", shown=["x", "y"])
    assert lines[0].startswith("x: SIMULATION of sim-x: complete; correct ")
    again = simulate_variants(runs, profiles, tmp_path / "prepared", shown=["x", "y"])
    assert again == lines  # a second call resumes: nothing is sent twice
    doc = compare_runs(runs, tmp_path / "cmp", figures=False).document
    assert [r.model for r in doc.runs] == ["sim-x", "sim-y"] and doc.label == BANNER
    assert len({r.protocol_fingerprint for r in doc.runs}) == 2
    with pytest.raises(NeedlepointError, match="one each"):
        simulate_variants(runs, profiles[:1], tmp_path / "prepared")
    with pytest.raises(NeedlepointError, match="simulated\\[0\\]"):
        simulate_variants(runs[:1], [{"name": "z"}], tmp_path / "prepared")


def test_each_run_opens_with_its_own_headline_and_the_grid_plot(
    lab: dict[str, Path], tmp_path: Path
) -> None:
    result = compare_runs([lab["a"], lab["b"]], tmp_path / "h")
    doc = result.document
    for run, folder in zip(doc.runs, (lab["a"], lab["b"]), strict=True):
        alone = analyze_run(folder, tmp_path / f"alone-{folder.name}")
        assert list(run.headline) == alone.headline()
        assert run.robustness == alone.document.robustness.verdict
        assert run.positions == alone.document.effects.positions
        assert {r.measure for r in run.middle_loss} == {"middle loss"}
    md = (tmp_path / "h" / "comparison.md").read_text(encoding="utf-8")
    head = md.split("## Primary analysis, per run")[0]
    assert "## Each run: what was run, then Q1 and Q2" in head
    assert head.count("- Q1, what shape is the position curve?") == 2
    assert head.count("- Q2, does similarity add to it?") == 2
    lines = result.lines()
    assert sum(line.startswith("  Q1, what shape is the position curve?") for line in lines) == 2
    assert (tmp_path / "h" / doc.figures["grid"]).read_bytes().startswith(b"\x89PNG")


REFERENCE = Path(__file__).resolve().parents[2] / "evidence" / "20261130-simulated-reference"


def test_the_simulated_middle_loss_variant_shows_a_clear_q1_middle_loss() -> None:
    doc = read_comparison(REFERENCE / "compare" / "comparison" / "comparison.json")
    run = next(r for r in doc.runs if r.model == "sim-middle-loss")
    for sim in ("low", "high"):
        row = next(r for r in run.middle_loss if (r.similarity, r.length) == (sim, None))
        assert row.lower is not None and row.lower > 0, sim  # the interval is above 0
    q1 = [line for line in run.headline if "similarity, all lengths" in line]
    # Under Holm across its 12 contrasts the low-similarity curve is a U-shape; the headline
    # says where its per-length rows disagree.
    assert len(q1) == 2 and "low similarity, all lengths: middle loss (U-shape) (" in q1[0]
    assert any(
        line.startswith("  Note: under low similarity the pooled row") for line in run.headline
    )
    steady = next(r for r in doc.runs if r.model == "sim-steady")
    row = next(r for r in steady.middle_loss if (r.similarity, r.length) == ("high", None))
    assert row.lower is not None and row.lower <= 0  # the steady model shows none


# === how runs are named ===


def _simulate(prepared: Path, run_dir: Path, **params: float) -> Path:
    options = RunOptions(
        allow=128, simulate="position", sim_params=params or None, progress="off", fsync=False
    )
    run_protocol(prepared, run_dir, options)
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("names")
    base = prepare(root / "prepared")
    variant = prepare(root / "prepared-x", model="model-x")
    return [
        _simulate(base, root / "runs" / "one"),
        _simulate(variant, root / "runs" / "two", p_middle=0.5),
        _simulate(base, root / "runs" / "three", seed=9),
    ]


def test_runs_are_named_by_model_made_unique_never_by_folder(
    runs: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp"
    assert main(["compare", *map(str, runs), "--out", str(out)]) == 0
    # one line per run, each followed by its indented headline
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")]
    assert [line.split(":")[0] for line in lines[1:4]] == [
        "agnes-3.0-flash #1 (SIMULATION)",
        "model-x (SIMULATION)",
        "agnes-3.0-flash #2 (SIMULATION)",
    ]
    text = (out / "comparison.md").read_text(encoding="utf-8")
    assert "| agnes-3.0-flash #1 (SIMULATION) | agnes-3.0-flash |" in text
    # the folder is kept where it belongs: in the fingerprints, beside the name
    assert "/runs/one` |" in text and "runs/one (SIMULATION)" not in text
    assert "#### model-x (SIMULATION)" in text


def test_labels_name_the_runs_everywhere(
    runs: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp"
    labels = ["steady", "middle", "seed 9"]
    argv = ["compare", *map(str, runs), "--out", str(out)]
    assert main([*argv, *[a for label in labels for a in ("--label", label)]]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")]
    assert lines[1].startswith("steady (SIMULATION) (agnes-3.0-flash): ")
    assert lines[2].startswith("middle (SIMULATION) (model-x): ")
    doc = from_json((out / "comparison.json").read_bytes())
    assert [r.name for r in doc.runs] == labels
    assert "| steady (SIMULATION) | agnes-3.0-flash |" in (out / "comparison.md").read_text()
    assert main([*argv[:-1], str(tmp_path / "c2"), "--label", "only one"]) == 2
    err = capsys.readouterr().err
    assert "--label given 1 times for 3 runs" in err and not (tmp_path / "c2").exists()
    with pytest.raises(NeedlepointError, match="each run needs its own label"):
        run_names([object()] * 2, ["a", "a"])  # type: ignore[list-item]


def test_a_comparison_json_without_names_reads_as_models(runs: list[Path], tmp_path: Path) -> None:
    doc = compare_runs(runs[:2], tmp_path / "cmp", figures=False).document
    old = dataclasses.replace(doc, runs=tuple(dataclasses.replace(r, name=None) for r in doc.runs))
    data = to_json(old)
    assert b'"name"' not in data  # written back as an older file had it
    assert [r.shown for r in from_json(data).runs] == ["agnes-3.0-flash", "model-x"]
