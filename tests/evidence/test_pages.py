"""Every committed page agrees with the data beside it, holds no progress bar, and every figure
of the committed runs keeps its labels inside the picture.

The pages of two local folders once showed analysis format v1 beside a v2 summary.md, and one
held 129 lines of a progress bar. `tools/regenerate_evidence.py` regenerates them; this fails
when a page and its data part again.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EVIDENCE = ROOT / "evidence"
PAGES = sorted(EVIDENCE.rglob("*.html"))
ANALYSIS_PAGES = [p for p in PAGES if p.name.startswith("04-analysis")]
# A tqdm bar as nbconvert renders it: "run 12/128 |██▍      |" (one line per redraw).
BAR = re.compile(r"\d+/\d+ \|[█▏▎▍▌▋▊▉ ]{8,}\|")


def page_text(page: Path) -> str:
    """What a reader sees of a page: its text, tags and styles dropped, spaces collapsed."""
    body = page.read_text("utf-8")
    body = re.sub(r"<(style|script)\b.*?</\1>", " ", body, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def plain(markdown: str) -> str:
    """A Markdown line as it reads once rendered: no markers, no list dash, spaces collapsed."""
    text = re.sub(r"^\s*(?:[-*]|#+)\s+", "", markdown)
    text = text.replace("**", "").replace("`", "")
    return " ".join(text.split())


def headline(summary: Path) -> list[str]:
    """The summary's headline: its lines from the ``# Analysis`` title to the legend (or the
    first section)."""
    lines = summary.read_text("utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# Analysis"))
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].startswith(("## ", "**How to read"))),
        len(lines),
    )
    return [plain(x) for x in lines[start:end] if x.strip()]


def summary_beside(page: Path) -> Path:
    """The summary.md the analysis notebook of ``page`` wrote (its recorded analysis_dir)."""
    nb = json.loads(page.with_suffix(".ipynb").read_text("utf-8"))
    params = nb["metadata"].get("papermill", {}).get("parameters") or {}
    return page.parent / params.get("analysis_dir", "analysis") / "summary.md"


def test_there_are_analysis_pages() -> None:
    assert len(ANALYSIS_PAGES) >= 6, [p.name for p in ANALYSIS_PAGES]


@pytest.mark.parametrize("page", ANALYSIS_PAGES, ids=lambda p: str(p.relative_to(EVIDENCE)))
def test_each_analysis_page_shows_the_headline_of_its_summary(page: Path) -> None:
    text = page_text(page)
    lines = headline(summary_beside(page))
    assert len(lines) >= 4
    missing = [line for line in lines if line not in text]
    assert missing == [], f"{page.name} does not show: {missing[:2]}"
    # said once: the Q2 line of the headline appears once on the page
    q2 = next(line for line in lines if "SUPPORTED" in line or "EVALUABLE" in line)
    assert text.count(q2) == 1, q2


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(EVIDENCE)))
def test_no_page_holds_progress_bar_output(page: Path) -> None:
    text = page.read_text("utf-8")
    assert not BAR.search(text), BAR.search(text)
    assert "\r" not in text


def test_the_checks_can_fail(tmp_path: Path) -> None:
    page = tmp_path / "p.html"
    page.write_text("<pre>run 3/128 |█▌                      |, seq=3</pre>", encoding="utf-8")
    assert BAR.search(page.read_text("utf-8"))
    summary = tmp_path / "s.md"
    summary.write_text("# Analysis: x\n\n- **Q2** `a`\n\n## Rest\n", encoding="utf-8")
    assert headline(summary) == ["Analysis: x", "Q2 a"]


# --- figure labels -------------------------------------------------------------------------------


def _drawn_texts(fig: Any) -> list[Any]:
    """The texts a reader sees: the figure's own, and each axes' titles, labels, texts, legend
    and the tick labels of ticks inside its view (matplotlib keeps others, undrawn)."""
    texts = list(fig.texts)
    for ax in fig.axes:
        texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
        texts += list(ax.texts)
        legend = ax.get_legend()
        if legend is not None:
            texts += list(legend.get_texts())
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks():
                if low - 1e-9 <= tick.get_loc() <= high + 1e-9:
                    texts += [tick.label1, tick.label2]
    for legend in fig.legends:
        texts += list(legend.get_texts())
    return [t for t in texts if t.get_visible() and str(t.get_text()).strip()]


def _clipped(fig: Any) -> list[str]:
    """Every drawn text of the figure that reaches past its edges (by a pixel)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # as savefig draws it: lay every text out, then measure
    canvas.draw()
    renderer = canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    out = []
    for text in _drawn_texts(fig):
        box = text.get_window_extent(renderer)
        if box.x0 < -1 or box.y0 < -1 or box.x1 > width + 1 or box.y1 > height + 1:
            out.append(
                f"{text.get_text()!r} at x {box.x0:.0f}..{box.x1:.0f} of {width:.0f}, "
                f"y {box.y0:.0f}..{box.y1:.0f} of {height:.0f}"
            )
    return out


@pytest.fixture
def clipped(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record, for every figure saved while the test runs, each label that is cut off."""
    from matplotlib.figure import Figure

    found: list[str] = []
    real = Figure.savefig

    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        found.extend(_clipped(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", checked)
    return found


def _committed_runs() -> list[Path]:
    return sorted(p.parent for p in EVIDENCE.rglob("journal.jsonl") if "pilot" not in p.parts)


def test_no_figure_of_a_committed_run_cuts_a_label_off(clipped: list[str], tmp_path: Path) -> None:
    from needlepoint.analysis.document import analyze_run
    from needlepoint.compare.document import compare_runs
    from needlepoint.compare.record import read_comparison

    runs = [r for r in _committed_runs() if (r / "run.json").is_file()]
    assert len(runs) >= 6
    for i, run in enumerate(runs):
        try:
            analyze_run(run, tmp_path / f"a{i}")
        except Exception as exc:  # a run this analysis refuses (a pilot marker, say)
            assert "pilot" in str(exc), exc
    for i, path in enumerate(sorted(EVIDENCE.rglob("comparison.json"))):
        doc = read_comparison(path)
        dirs = [(path.parent / r.run_dir).resolve() for r in doc.runs]
        labels = [r.shown for r in doc.runs] if any(r.name for r in doc.runs) else None
        compare_runs(dirs, tmp_path / f"c{i}", allow_simulated=True, labels=labels)
    assert clipped == [], "\n".join(sorted(set(clipped)))


def test_the_label_check_sees_a_label_past_the_edge(clipped: list[str], tmp_path: Path) -> None:
    from needlepoint.analysis.figures import stable_figure

    with stable_figure((3, 2), (0.1, 0.1, 0.5, 0.3), "t", False, tmp_path / "f.png") as fig:
        ax = fig.subplots()
        ax.set_yticks([0], ["a label far too long for a figure three inches wide"])
    assert clipped and "far too long" in clipped[0]
