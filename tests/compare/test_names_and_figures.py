"""How a comparison names its runs, and what its figures draw (and do not draw over each other).

Runs are named by model, or by the user's ``--label``, never by a path relative to ``--out``;
the lenient score appears only where it differs from the strict one; a comparison without
failures says so in one sentence with no "0" drawn across it; the forest and the analysis
forest show every value, however far past ±1, and say what middle loss is.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from matplotlib.axes import Axes

from needlepoint.analysis import plots as analysis_plots
from needlepoint.analysis.figure import MIDDLE_LOSS_NOTE, difference_limits
from needlepoint.cli.app import main
from needlepoint.compare import plots
from needlepoint.compare.build import run_names
from needlepoint.compare.document import compare_runs
from needlepoint.compare.record import from_json, to_json
from needlepoint.compare.summary import comparison_markdown
from needlepoint.design.prepared import prepare
from needlepoint.errors import NeedlepointError
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
    plots.accuracy_panels(doc, tmp_path / "acc.png")
    bracketed = [t for t in drawn if "[" in t]
    assert bracketed == [f"{cell.correct}/{cell.valid} [{cell.correct + 1}]"]


def test_no_failures_is_one_sentence_with_no_zero_across_it(
    runs: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = compare_runs(runs, tmp_path / "cmp", figures=False).document
    drawn = _texts(monkeypatch)
    plots.failures(doc, tmp_path / "f.png")
    assert drawn == ["no protocol failure and no unexecuted request in any run"]
    drawn.clear()
    some = dataclasses.replace(doc.runs[1], unexecuted=5)
    plots.failures(dataclasses.replace(doc, runs=(doc.runs[0], some, doc.runs[2])), tmp_path / "g")
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
    plots.forest(result.document, tmp_path / "forest.png")
    from needlepoint.analysis.document import analyze_run

    primary = analyze_run(runs[0], tmp_path / "a", figures=False).document.primary
    analysis_plots.forest_plot(primary, tmp_path / "f2.png")
    assert [n for n in notes if "middle loss =" in n] == [MIDDLE_LOSS_NOTE, MIDDLE_LOSS_NOTE]
    assert MIDDLE_LOSS_NOTE.startswith("middle loss = (B + E)/2 − M")
