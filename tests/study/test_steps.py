"""The notebooks declare before they run: a plan stating what runs and the rule that judges it,
declared with what is on record; kept when re-executed with the same plan, refused otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from needlepoint.errors import NeedlepointError
from needlepoint.pilot.calibrate import CalibrationOptions
from needlepoint.run.declaration import read_declaration
from needlepoint.run.modes import run_step
from needlepoint.study.steps import declare_pilot, declare_run, declare_step, declare_variants


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
