"""The run notebook's transport switch.

The notebooks declare before they run: a plan stating what runs and the rule that judges it,
declared with what is on record; kept when re-executed with the same plan, refused otherwise.

The pilot notebook's steps: simulated pilot, calibration files, stable figures, its source.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import nbformat
import pytest
from support.pilots import IN_BAND, design_file

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import file_sha256
from needlepoint.notebook.steps import (
    ACCURACY_FIGURE,
    CALIBRATED_NAME,
    POWER_FIGURE,
    REPORT_NAME,
    calibrate_step,
    declare_pilot,
    declare_run,
    declare_step,
    declare_variants,
    figures_step,
    pilot_step,
    recommendation_lines,
    run_step,
)
from needlepoint.pilot.calibrate import CalibrationOptions
from needlepoint.pilot.report import SIMULATED, calibration_lines, read_report, table
from needlepoint.run.declaration import read_declaration


def test_unknown_transport_is_refused(reference_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(NeedlepointError, match="transport must be one of simulate, live"):
        run_step(reference_dir, tmp_path / "run", transport="carrier-pigeon", allow=1)


def test_live_without_key_is_refused_before_anything_is_sent(
    reference_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NP_TEST_KEY", raising=False)
    with pytest.raises(NeedlepointError, match="NP_TEST_KEY"):
        run_step(
            reference_dir,
            tmp_path / "run",
            transport="live",
            allow=1,
            base_url="http://127.0.0.1:9",
            model="agnes-3.0-flash",
            api_key_env="NP_TEST_KEY",
        )
    assert not (tmp_path / "run" / "journal.jsonl").exists()


def test_simulation_runs_offline(reference_dir: Path, tmp_path: Path) -> None:
    summary = run_step(
        reference_dir,
        tmp_path / "run",
        transport="simulate",
        allow=8,
        simulate="perfect",
        progress="off",
    )
    assert summary.simulation and summary.attempts_total == 8
    assert summary.counts.get("correct") == 8


def test_the_run_notebook_declares_before_its_first_request(
    reference_dir: Path, tmp_path: Path
) -> None:
    declared = declare_run(
        reference_dir, tmp_path / "declarations", tmp_path, allow=8, simulated=True
    )
    assert declared.path == tmp_path / "declarations" / "run-declaration.json"
    record = read_declaration(declared.path).record
    assert record.simulation and record.time == "2026-01-01T00:00:00.000000Z"
    assert "at most 8 requests" in record.plan.text
    assert "at least 0.1 and the lower bound of its 95% case-cluster" in record.plan.text
    assert (tmp_path / "declarations" / "run-plan.md").read_text("utf-8") == record.plan.text
    assert not any("/" in line and str(tmp_path) in line for line in declared.lines)
    run_step(
        reference_dir, tmp_path / "run", transport="simulate", allow=8, progress="off",
        declaration=declared.path,
    )  # fmt: skip
    # Re-executed with the same plan: the declaration is kept (the run resumes under it).
    again = declare_run(reference_dir, tmp_path / "declarations", tmp_path, allow=8, simulated=True)
    assert again.path == declared.path and "declaration kept" in again.lines[0]
    with pytest.raises(NeedlepointError, match="declares another plan"):
        declare_run(reference_dir, tmp_path / "declarations", tmp_path, allow=9, simulated=True)


def test_the_compare_and_pilot_notebooks_declare_their_plans(tmp_path: Path) -> None:
    variants = declare_variants(["m-1", "m-2"], tmp_path, tmp_path, simulated=True)
    text = read_declaration(variants.path).record.plan.text
    assert "`m-1`" in text and "`m-2`" in text and "never pooled" in text
    options = CalibrationOptions(effect=0.3, max_cases=64)
    pilot = declare_pilot(None, [12, 48], 8, options, tmp_path, tmp_path, simulated=True)
    text = read_declaration(pilot.path).record.plan.text
    assert "lengths 12, 48, 8 cases" in text and "effect 0.3" in text and "at most 64 cases" in text
    elsewhere = declare_pilot(None, [12], 4, options, tmp_path / "x", tmp_path, simulated=False)
    assert elsewhere.path is None and not (tmp_path / "x").exists()


def test_a_live_notebook_declares_on_the_real_clock(tmp_path: Path) -> None:
    declared = declare_step("# Plan\n\nA live run.\n", tmp_path, "live", tmp_path, simulated=False)
    record = read_declaration(declared.path).record
    assert not record.simulation and record.time != "2026-01-01T00:00:00.000000Z"


NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "08-pilot.ipynb"


def _run(root: Path) -> tuple[list[str], object, list[str]]:
    lines = pilot_step(
        design_file(root), root / "pilot", simulate=True, lengths=[12, 24], cases=4,
        sim_params=IN_BAND,
    )  # fmt: skip
    options = CalibrationOptions(effect=0.3, simulations=200, max_cases=64)
    step = calibrate_step(root / "pilot", root / "calibration", options)
    figures = figures_step(step, [0.0, 0.1, 0.2, 0.3])
    return lines, step, figures


def test_the_steps_write_stable_labelled_files(tmp_path: Path) -> None:
    lines, step, figures = _run(tmp_path / "a")
    assert lines[0].startswith("PILOT of context-position-similar v5")
    assert any(line.startswith("SIMULATION") for line in lines)
    assert figures == [ACCURACY_FIGURE, POWER_FIGURE]
    out = tmp_path / "a" / "calibration"
    rec = read_report(out / REPORT_NAME)
    assert rec == step.calibration.record and rec.pilot.simulation
    assert json.loads((out / CALIBRATED_NAME).read_text("utf-8"))["cases"] == rec.recommended_cases
    assert calibration_lines(rec)[0].startswith(SIMULATED)
    assert list(table(rec)["length"]) == [12, 24]
    assert recommendation_lines(step, "calibration")[1].startswith(
        f"wrote calibration/{CALIBRATED_NAME}"
    )
    # the same pilot again, elsewhere: the same bytes (the figures are stable PNGs)
    _run(tmp_path / "b")
    for name in (REPORT_NAME, CALIBRATED_NAME, ACCURACY_FIGURE, POWER_FIGURE, "power.csv"):
        assert file_sha256(out / name) == file_sha256(tmp_path / "b" / "calibration" / name)
    # re-running in place resumes the finished pilot and rewrites identical files
    again = pilot_step(
        design_file(tmp_path / "a"), tmp_path / "a" / "pilot", simulate=True, lengths=[12, 24],
        cases=4, sim_params=IN_BAND,
    )  # fmt: skip
    assert "resumed" in again[0]
    calibrate_step(
        tmp_path / "a" / "pilot", out, CalibrationOptions(effect=0.3, simulations=200, max_cases=64)
    )


def test_an_existing_pilot_is_described_not_rerun(tmp_path: Path) -> None:
    _run(tmp_path)
    lines = pilot_step(None, tmp_path / "pilot", simulate=False, lengths=[], cases=0)
    seed = json.loads((tmp_path / "pilot" / "pilot.json").read_text())["materials_seed"]["seed"]
    assert lines == [
        "pilot of context-position-similar v5 (pilot protocol v6): lengths 12, 24, 4 cases, "
        f"held-out materials seed {seed}"
    ]


def test_the_notebook_is_clean_and_calls_only_the_library() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1
    names = {s.targets[0].id for s in ast.parse(params[0].source).body}
    assert {"design_file", "pilot_dir", "simulate_pilot", "calibration_dir"} <= names
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    for forbidden in ("datetime", "time.", "resolve(", "abspath", "getcwd", "open("):
        assert forbidden not in source
    assert "SIMULATED" in nb.cells[0].source and "held-out" in nb.cells[0].source


def test_the_notebook_shows_the_calibration_as_tables_without_markdown_markers() -> None:
    """08-pilot printed a monospaced wall with literal ** markers: the per-length lines and the
    case-count search are tables now, the rest of calibration_lines is printed once."""
    import json
    from pathlib import Path

    from needlepoint.pilot.report import calibration_lines, notebook_lines, power_frame, read_report

    root = Path(__file__).resolve().parents[2] / "evidence" / "20261130-simulated-reference"
    rec = read_report(root / "calibration" / "calibration.json")
    every, shown = calibration_lines(rec), notebook_lines(rec)
    assert {x.replace("`", "") for x in every} > set(shown)
    assert not any(line.startswith(("length ", "  -> ", "power at ")) for line in shown)
    assert not any("**" in line or "`" in line for line in shown)
    frame = power_frame(rec)
    assert list(frame["cases"]) == [r.cases for r in rec.power_table]
    assert frame.iloc[-1, 3] and not frame.iloc[0, 3]  # the last count reaches 80%, the first not
    nb = json.loads((root.parents[1] / "notebooks" / "08-pilot.ipynb").read_text("utf-8"))
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "calibration_lines" not in code and "markdown_lines(record_lines)" in code
