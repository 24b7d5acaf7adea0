"""Every committed evidence page, opened from disk in headless Chromium with the network blocked.

A reader opens `evidence/*/*.html` from a clone, offline: no request may fail (no CDN script, no
module script refused from ``file://``, no missing figure), nothing may be logged as an error,
every image must decode, nothing may reach past the right edge of a 1280-pixel page, the title
names the notebook and its folder, and Chinese text is drawn with a font that has its glyphs.

Chromium and a CJK font come from the operating system (docs/pipeline.md: "The browser
check"); where either is missing the whole module is skipped with one line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.browser import Browser, cjk_families, find_chromium

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "evidence").rglob("*.html"))
CHROMIUM = find_chromium()
CJK = cjk_families()
if CHROMIUM is None or not CJK:
    pytest.skip(
        "browser check skipped: needs chromium and a CJK font (docs/pipeline.md: the browser check)",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def browser():
    with Browser(str(CHROMIUM)) as b:
        yield b


def test_there_are_pages_to_open() -> None:
    assert len(PAGES) >= 18


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT / "evidence")))
def test_the_page_renders_offline(browser: Browser, page: Path) -> None:
    report = browser.open(page)
    assert report.failed == [], f"failed requests: {report.failed}"
    assert report.errors == [], f"console errors: {report.errors}"
    probe = report.probe
    assert probe["broken"] == [], f"broken images: {probe['broken']}"
    assert probe["wide"] == [] and probe["overflow"] <= 0, f"past the right edge: {probe['wide']}"
    folder = page.parent.name
    title = probe["title"]
    assert title.endswith(f" — {folder}") and len(title) > len(folder) + 6, title
    if probe["cjk"]:
        assert set(report.cjk_fonts) & CJK, f"{probe['cjk']!r} drawn with {report.cjk_fonts}"


def test_the_probe_sees_what_a_reader_would(browser: Browser, tmp_path: Path) -> None:
    """The checks can fail: a CDN script, a missing image and a wide table are each reported."""
    page = tmp_path / "bad.html"
    wide = "<table><tr>" + "<td>column_with_a_long_name</td>" * 60 + "</tr></table>"
    page.write_text(
        "<html><head><title>t</title>"
        '<script src="https://cdn.example/x.js"></script></head><body>'
        f'<img src="missing.png"><p>松塔北站试验项目</p>{wide}'
        "<script>console.error('boom')</script></body></html>",
        encoding="utf-8",
    )
    report = browser.open(page)
    assert any("cdn.example" in f for f in report.failed), report.failed
    assert any("missing.png" in f for f in report.failed), report.failed
    assert any("boom" in e for e in report.errors), report.errors
    assert report.probe["broken"] == ["missing.png"]
    assert report.probe["wide"] and report.probe["overflow"] > 0
    assert report.probe["cjk"] == "松塔北站试验项目" and set(report.cjk_fonts) & CJK
