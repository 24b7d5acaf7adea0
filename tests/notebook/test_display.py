"""A Markdown document shown in a notebook: the notebook's own sections left out, images found."""

from __future__ import annotations

from pathlib import Path

import pytest

from needlepoint.notebook import display, paths

SUMMARY = """# Analysis

## Primary

| case | difference |
|---|---|
| S1 | 0 |

![inline](inline.png)

## Figures

![accuracy](accuracy_by_position.png)
"""


def test_summary_without_its_figures_section_and_images_from_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(paths.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "summary.md").write_text(SUMMARY, encoding="utf-8")
    text = display.markdown_text("analysis/summary.md", drop=("Figures",))
    assert "## Figures" not in text and "accuracy_by_position" not in text
    assert "![inline](analysis/inline.png)" in text  # resolves from where the notebook runs
    assert "| S1 | 0 |" in text
    full = display.markdown_text("analysis/summary.md")
    assert "![accuracy](analysis/accuracy_by_position.png)" in full


def test_in_the_sources_folder_images_point_under_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run interactively in notebooks/, the summary is under work/: so are its images."""
    monkeypatch.delenv(paths.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / paths.SOURCES_MARKER).write_text("")
    (tmp_path / "work" / "analysis").mkdir(parents=True)
    (tmp_path / "work" / "analysis" / "summary.md").write_text(SUMMARY, encoding="utf-8")
    text = display.markdown_text("analysis/summary.md")
    assert "![accuracy](work/analysis/accuracy_by_position.png)" in text
