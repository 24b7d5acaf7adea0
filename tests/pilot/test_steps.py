"""The pilot notebook's steps: simulated pilot, calibration files, stable figures, its source."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import nbformat
from support.pilots import IN_BAND, design_file

from needlepoint.jsonio import file_sha256
from needlepoint.pilot.calibrate import CalibrationOptions
from needlepoint.pilot.files import read_report
from needlepoint.pilot.report import SIMULATED, calibration_lines, table
from needlepoint.pilot.steps import (
    ACCURACY_FIGURE,
    CALIBRATED_NAME,
    POWER_FIGURE,
    REPORT_NAME,
    calibrate_step,
    figures_step,
    pilot_step,
    recommendation_lines,
)

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

    from needlepoint.pilot.files import read_report
    from needlepoint.pilot.report import calibration_lines, notebook_lines, power_frame

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
