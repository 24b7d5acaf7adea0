"""A Markdown document shown in a notebook: the notebook's own sections left out, images found.

The design notebook's tables and order figure, computed from a prepared folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from needlepoint.design.audit import audit_prepared
from needlepoint.design.prepared import load_prepared
from needlepoint.notebook import paths, views
from needlepoint.notebook import views as dv

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
    text = views.markdown_text("analysis/summary.md", drop=("Figures",))
    assert "## Figures" not in text and "accuracy_by_position" not in text
    assert "![inline](analysis/inline.png)" in text  # resolves from where the notebook runs
    assert "| S1 | 0 |" in text
    full = views.markdown_text("analysis/summary.md")
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
    text = views.markdown_text("analysis/summary.md")
    assert "![accuracy](work/analysis/accuracy_by_position.png)" in text


def test_excerpt_has_one_near_name_of_each_kind(reference_dir: Path) -> None:
    table = dv.excerpt_table(load_prepared(reference_dir), "S1")
    assert list(table.index) == [
        "Target",
        "One-character change",
        "Reordered words",
        "Changed qualifier",
    ]
    target = table.loc["Target", "project name"]
    one_char = table.loc["One-character change", "project name"]
    assert sum(a != b for a, b in zip(target, one_char, strict=True)) == 1
    assert table["code"].str.fullmatch(r"[A-Z]{2}-[0-9]{4}").all()


def test_positions_and_lengths(reference_dir: Path) -> None:
    prepared = load_prepared(reference_dir)
    positions = dv.positions_table(prepared.protocol)
    assert positions.loc[60, "near-name slots floor((2k+1)N/12)"] == "5, 15, 25, 35, 45, 55"
    assert positions.loc[240, "M at"] == 120
    lengths = dv.equal_length_table(prepared)
    assert len(lengths) == 16 and lengths["all equal"].all()


def test_order_figure_is_byte_stable(reference_dir: Path, tmp_path: Path) -> None:
    prepared = load_prepared(reference_dir)
    a = dv.order_figure(prepared, tmp_path / "a.png").read_bytes()
    b = dv.order_figure(prepared, tmp_path / "b.png").read_bytes()
    assert a == b and a.startswith(b"\x89PNG")


def test_manifest_and_audit_tables(reference_dir: Path) -> None:
    prepared = load_prepared(reference_dir)
    manifest = dv.manifest_table(prepared)
    by_name = dict(zip(manifest["name"], manifest["sha256"], strict=True))
    assert by_name["manifest.json (protocol fingerprint)"] == prepared.fingerprint
    design = by_name["design fingerprint (protocol.json's design fields)"]
    assert design == prepared.manifest["design_fingerprint"]
    audit = dv.audit_table(audit_prepared(reference_dir))
    assert (audit["failed"] == 0).all() and (audit["items"] > 0).all()


def test_preview_matches_a_prepared_folder(reference_dir: Path) -> None:
    assert dv.preview().fingerprint == load_prepared(reference_dir).fingerprint
