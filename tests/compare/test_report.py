"""What comparison.md and the comparison figures show (and do not draw over each other).

The lenient score appears only where it differs from the strict one; a comparison without
failures says so in one sentence with no "0" drawn across it; the forest and the analysis
forest show every value, however far past ±1, and say what middle loss is.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from matplotlib.axes import Axes

from needlepoint.analysis import figures as analysis_figures
from needlepoint.analysis.figures import MIDDLE_LOSS_NOTE, difference_limits
from needlepoint.compare import report
from needlepoint.compare.document import compare_runs
from needlepoint.compare.report import comparison_markdown
from needlepoint.design.prepared import prepare
from needlepoint.run.options import RunOptions
from needlepoint.run.runner import run_protocol


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


def _texts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    drawn: list[str] = []
    original = Axes.text

    def record(self: Axes, x: float, y: float, s: str, *a: Any, **k: Any) -> Any:
        drawn.append(s)
        return original(self, x, y, s, *a, **k)

    monkeypatch.setattr(Axes, "text", record)
    return drawn


def test_lenient_counts_only_where_they_differ(
    runs: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = compare_runs(runs[:2], tmp_path / "cmp", figures=False).document
    cell = doc.runs[0].accuracy[0]
    differs = dataclasses.replace(cell, lenient_correct=cell.correct + 1)
    first = dataclasses.replace(doc.runs[0], accuracy=(differs, *doc.runs[0].accuracy[1:]))
    doc = dataclasses.replace(doc, runs=(first, *doc.runs[1:]))
    text = comparison_markdown(doc)
    assert text.count("; lenient ") == 1
    drawn = _texts(monkeypatch)
    report.accuracy_panels(doc, tmp_path / "acc.png")
    bracketed = [t for t in drawn if "[" in t]
    assert bracketed == [f"{cell.correct}/{cell.valid} [{cell.correct + 1}]"]


def test_no_failures_is_one_sentence_with_no_zero_across_it(
    runs: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = compare_runs(runs, tmp_path / "cmp", figures=False).document
    drawn = _texts(monkeypatch)
    report.failures(doc, tmp_path / "f.png")
    assert drawn == ["no protocol failure and no unexecuted request in any run"]
    drawn.clear()
    some = dataclasses.replace(doc.runs[1], unexecuted=5)
    report.failures(dataclasses.replace(doc, runs=(doc.runs[0], some, doc.runs[2])), tmp_path / "g")
    assert drawn == ["  0", "  5", "  0"]


def test_difference_axes_show_every_value() -> None:
    assert difference_limits([0.2, -0.4]) == (-1.1, 1.1)  # the usual frame
    low, high = difference_limits([0.5, -1.5, 1.0])
    assert low < -1.5 and high > 1.5 and low == -high  # a -1.5 marker is not cut off
    assert difference_limits([2.0])[1] > 2.0


def test_forests_define_middle_loss(
    runs: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from matplotlib.figure import Figure

    notes: list[str] = []
    original = Figure.text

    def record(self: Figure, x: float, y: float, s: str, *a: Any, **k: Any) -> Any:
        notes.append(s)
        return original(self, x, y, s, *a, **k)

    monkeypatch.setattr(Figure, "text", record)
    result = compare_runs(runs, tmp_path / "cmp", figures=False)
    report.forest(result.document, tmp_path / "forest.png")
    from needlepoint.analysis.document import analyze_run

    primary = analyze_run(runs[0], tmp_path / "a", figures=False).document.primary
    analysis_figures.forest_plot(primary, tmp_path / "f2.png")
    assert [n for n in notes if "middle loss =" in n] == [MIDDLE_LOSS_NOTE, MIDDLE_LOSS_NOTE]
    assert MIDDLE_LOSS_NOTE.startswith("middle loss = (B + E)/2 − M")
