"""`needlepoint pipeline` ends with the decision and where the summary is."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from needlepoint.cli import main
from needlepoint.cli.local import outcome_lines
from needlepoint.notebook import pipeline

EVIDENCE = Path(__file__).resolve().parents[2] / "evidence"


def test_a_simulated_decision_carries_the_banner() -> None:
    folder = EVIDENCE / "20261130-simulated-reference"
    assert outcome_lines(folder) == [
        "decision (SIMULATION — not a model result): not supported (difference 0.03125 is "
        "below the threshold 0.1 and the 95% interval's lower bound -0.2812 is not above 0)",
        f"summary: {folder}/analysis/summary.md",
    ]


def test_a_live_decision_does_not() -> None:
    folder = EVIDENCE / "20261130-local-smollm2"
    assert outcome_lines(folder)[0] == (
        "decision: not evaluable (0 complete cases; the protocol requires at least 2)"
    )


def test_the_command_prints_them_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "evidence" / "20261201-offline-x"
    shutil.copytree(EVIDENCE / "20261130-simulated-reference" / "analysis", out / "analysis")
    monkeypatch.setattr(pipeline, "run_pipeline", lambda *a, **k: out)
    assert main(["pipeline", "--label", "offline-x"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"evidence written to {out}/"
    assert lines[1].startswith("decision (SIMULATION — not a model result): not supported (")
    assert lines[2] == f"summary: {out}/analysis/summary.md"
    shutil.rmtree(out / "analysis")
    assert outcome_lines(out) == []  # no analysis notebook ran: nothing to report
