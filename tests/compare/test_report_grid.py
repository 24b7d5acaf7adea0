"""The results grid: every run's cells in one table, one CSV and one figure, each number the
run's own analysis (never pooled), with an exact interval, and Q1 and Q2 per run."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from PIL import Image
from support.loopback import LoopbackServer, answers_from
from support.runner import KEY_ENV, SENTINEL, live

from needlepoint.analysis.secondary import clopper_pearson
from needlepoint.cli.app import main
from needlepoint.compare.document import compare_runs
from needlepoint.compare.report import GRID_FIGURE, grid_csv, grid_markdown, grid_rows, q1_shape
from needlepoint.design.prepared import load_prepared, prepare
from needlepoint.run.options import RunOptions
from needlepoint.run.runner import run_protocol


def _simulate(prepared: Path, run_dir: Path, allow: int = 128, **params: float) -> Path:
    options = RunOptions(
        allow=allow, simulate="position", sim_params=params or None, progress="off", fsync=False
    )
    run_protocol(prepared, run_dir, options)
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("grid")
    base = prepare(root / "prepared")
    variant = prepare(root / "prepared-b", model="model-b")
    return [
        _simulate(base, root / "runs" / "a"),
        _simulate(variant, root / "runs" / "b", p_middle=0.3, seed=5),
        _simulate(base, root / "runs" / "partial", allow=12),
    ]


def test_the_grid_is_each_run_s_own_cells_with_exact_intervals(
    runs: list[Path], tmp_path: Path
) -> None:
    result = compare_runs(runs, tmp_path / "cmp", labels=["a", "b", "partial"])
    doc = result.document
    rows = grid_rows(doc)
    # every cell of every run, in the order given: runs × lengths × similarities × positions
    assert len(rows) == 3 * 2 * 2 * 4
    assert list(dict.fromkeys(r.run for r in rows)) == ["a", "b", "partial"]
    for run in doc.runs:
        mine = {(r.length, r.similarity, r.position): r for r in rows if r.run == run.shown}
        for cell in run.accuracy:
            row = mine[(cell.length, cell.similarity, cell.condition)]
            assert (row.correct, row.n, row.accuracy) == (cell.correct, cell.valid, cell.accuracy)
            interval = clopper_pearson(cell.correct, cell.valid)
            assert (row.ci_low, row.ci_high) == (interval or (None, None))
            assert row.q2_decision == run.decision and row.q1_shape == q1_shape(run)
    # the partial run has cells with nothing valid: no accuracy and no interval, never 0
    empty = [r for r in rows if r.run == "partial" and r.n == 0]
    assert empty and all(r.accuracy is None and r.ci_low is None for r in empty)
    folder = tmp_path / "cmp"
    table = list(csv.DictReader(io.StringIO((folder / "grid.csv").read_text("utf-8"))))
    assert len(table) == len(rows) and table[0]["position"] == "B"
    assert {r["accuracy"] for r in table if r["run"] == "partial" and r["n"] == "0"} == {""}
    assert (folder / "grid.csv").read_bytes() == grid_csv(doc)
    md = (folder / "grid.md").read_text("utf-8")
    assert md == grid_markdown(doc) and md.startswith("**SIMULATION")
    assert "| a | " in md and "[" in md and "Q2: decision" in md
    assert "[grid.md](grid.md)" in (folder / "comparison.md").read_text("utf-8")


def test_the_figure_has_one_panel_per_run(runs: list[Path], tmp_path: Path) -> None:
    two = compare_runs(runs[:2], tmp_path / "two").document
    compare_runs(runs, tmp_path / "three")
    assert two.figures["grid"] == GRID_FIGURE
    width_two = Image.open(tmp_path / "two" / GRID_FIGURE).size[0]
    width_three = Image.open(tmp_path / "three" / GRID_FIGURE).size[0]
    assert width_three > width_two  # a third panel, beside the others
    # the same runs give the same bytes
    again = compare_runs(runs[:2], tmp_path / "again").document
    assert again == two
    for name in ("grid.csv", "grid.md", GRID_FIGURE):
        assert (tmp_path / "two" / name).read_bytes() == (tmp_path / "again" / name).read_bytes()


def test_the_failures_figure_only_when_a_run_failed(runs: list[Path], tmp_path: Path) -> None:
    assert "failures" not in compare_runs(runs[:2], tmp_path / "x").document.figures
    # unexecuted requests of the partial run are something to draw
    assert "failures" in compare_runs(runs, tmp_path / "y").document.figures


def test_registry_writes_the_grid_of_every_design_s_live_runs(
    runs: list[Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = runs[0].parents[1]
    main(["registry", str(root), "--grid", str(tmp_path / "grids")])
    out = capsys.readouterr().out
    # simulated runs are not results: nothing to draw, and nothing written
    assert "grid: no audited live main run under" in out
    assert not (tmp_path / "grids").exists()
    # one live run beside them: its grid, under its design, named by its folder
    prepared = root / "prepared"
    p = load_prepared(prepared)
    monkeypatch.setenv(KEY_ENV, SENTINEL)
    with LoopbackServer(answers_from(p.answer_key, p.bodies)) as server:
        live(prepared, root / "runs" / "live", server, allow=128)
    assert main(["registry", str(root), "--grid", str(tmp_path / "grids")]) == 0
    out = capsys.readouterr().out
    (folder,) = (tmp_path / "grids").iterdir()
    assert folder.name.startswith("context-position-similar-")
    assert sorted(f.name for f in folder.iterdir()) == ["grid.csv", "grid.md", GRID_FIGURE]
    table = list(csv.DictReader(io.StringIO((folder / "grid.csv").read_text("utf-8"))))
    assert {r["run"] for r in table} == {"runs/live"} and {r["accuracy"] for r in table} == {"1"}
    assert f"grid of 1 run of design {folder.name[-12:]}: " in out
