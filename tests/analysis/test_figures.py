"""Figures: the simulation banner in every title, counts on the cells, byte-stable PNGs."""

from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib
import matplotlib.figure
import pytest
from support.results import make_input

from needlepoint.analysis import figures
from needlepoint.analysis.document import build_document, write_figures
from needlepoint.analysis.primary import SIMULATION_BANNER
from needlepoint.design.prepared import Prepared

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Record each saved figure's title and every text on it."""
    seen: list[dict] = []
    original = matplotlib.figure.Figure.savefig

    def savefig(self, fname, *args, **kwargs):
        texts = [t.get_text() for t in self.findobj(matplotlib.text.Text)]
        seen.append({"title": self._suptitle.get_text(), "texts": texts})
        return original(self, fname, *args, **kwargs)

    # Figures are drawn into memory and written through the safe-write helper: note where.
    written = figures.write_bytes_atomic

    def write(path, data, **kwargs):
        seen[-1]["path"] = Path(path)
        return written(path, data, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    monkeypatch.setattr(figures, "write_bytes_atomic", write)
    return seen


def spec(p) -> str:
    if p.seq == 5:
        return "failure:http_status"
    if p.seq == 9:
        return "failure:indeterminate_timeout"
    if p.condition == "M" and p.similarity == "high" and p.case in ("S1", "S2", "S3"):
        return "error:near_distractor_code"
    return "unexecuted" if p.seq > 124 else "correct"


@pytest.mark.parametrize("simulation", [True, False])
def test_every_figure_title_carries_the_banner_for_simulations(
    tmp_path: Path, prepared: Prepared, drawn: list[dict], simulation: bool
) -> None:
    inp = make_input(prepared, spec, simulation=simulation)
    write_figures(build_document(inp), inp, tmp_path)
    assert len(drawn) == 5
    for fig in drawn:
        assert fig["title"].startswith(SIMULATION_BANNER) == simulation, fig["path"].name
        assert fig["path"].read_bytes().startswith(PNG)


def test_cells_show_their_counts(tmp_path: Path, prepared: Prepared, drawn: list[dict]) -> None:
    inp = make_input(prepared, spec)
    doc = build_document(inp)
    figures.accuracy_heatmap(doc.secondary.accuracy, tmp_path / "a.png", True)
    texts = drawn[0]["texts"]
    assert "8/8\n100%" in texts
    assert "5/8\n62%" in texts  # middle, high similarity, 60 records: three near-name errors
    assert any(t.endswith("+1 not valid") for t in texts)
    figures.completeness_grid(inp.outcomes, tmp_path / "c.png", True)
    grid = drawn[1]["texts"]
    assert any(t.startswith("S") and "seq 1–4" in t for t in grid)
    assert "unexecuted" in grid and "failed" in grid and "indeterminate" in grid


def test_empty_cells_say_so(tmp_path: Path, prepared: Prepared, drawn: list[dict]) -> None:
    inp = make_input(prepared, lambda p: "unexecuted")
    doc = build_document(inp)
    write_figures(doc, inp, tmp_path)
    assert "no valid\nresponse\n+8 not valid" in drawn[0]["texts"]
    assert any(t.startswith("not evaluable: 0 complete cases") for t in drawn[2]["texts"])


def test_forest_and_bootstrap_show_threshold_zero_and_interval(
    tmp_path: Path, prepared: Prepared, drawn: list[dict]
) -> None:
    inp = make_input(prepared, spec)
    doc = build_document(inp)
    figures.forest_plot(doc.primary, tmp_path / "f.png")
    figures.bootstrap_plot(doc.primary, tmp_path / "b.png")
    forest, boot = drawn[0]["texts"], drawn[1]["texts"]
    assert "threshold 0.1" in forest and any(t.startswith("overall 0.") for t in forest)
    assert {"zero", "threshold 0.1", "95% interval"} <= set(boot)
    assert any(t.startswith("exact, ") and "multisets" in t for t in boot)


def test_png_bytes_are_stable_and_carry_no_version(tmp_path: Path, prepared: Prepared) -> None:
    inp = make_input(prepared, spec)
    doc = build_document(inp)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_figures(doc, inp, tmp_path / "a")
        # A notebook's rcParams must not leak into the figures.
        with matplotlib.rc_context({"font.size": 22, "figure.dpi": 300, "lines.linewidth": 5}):
            write_figures(doc, inp, tmp_path / "b")
    for png in sorted((tmp_path / "a").iterdir()):
        data = png.read_bytes()
        assert data == (tmp_path / "b" / png.name).read_bytes(), png.name
        assert b"Matplotlib" not in data and b"matplotlib" not in data


def test_no_pyplot_figures_are_left_open(tmp_path: Path, prepared: Prepared) -> None:
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    inp = make_input(prepared)
    write_figures(build_document(inp), inp, tmp_path)
    assert plt.get_fignums() == before
