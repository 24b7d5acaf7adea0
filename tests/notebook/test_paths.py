"""Output redirection: re-executing evidence writes elsewhere and reads its own outputs first."""

from __future__ import annotations

from pathlib import Path

import pytest

from needlepoint.notebook import paths


def test_without_root_paths_are_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(paths.ENV, raising=False)
    assert paths.write_path("run") == Path("run") and paths.read_path("run") == Path("run")


def test_with_root_writes_are_redirected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(paths.ENV, str(tmp_path))
    assert paths.write_path("run") == tmp_path / "run"
    # nothing written there yet: read the committed copy
    assert paths.read_path("run") == Path("run")
    (tmp_path / "run").mkdir()
    assert paths.read_path("run") == tmp_path / "run"
    assert paths.write_path(tmp_path / "abs") == tmp_path / "abs"


def test_in_the_sources_folder_reads_and_writes_go_under_work(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(paths.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert paths.write_path("run") == Path("run")  # no marker: an evidence folder
    (tmp_path / paths.SOURCES_MARKER).write_text("sources\n")
    (tmp_path / "prepared").mkdir()  # never read: nothing beside the sources is an input
    assert paths.write_path("run") == Path("work/run")
    assert paths.read_path("prepared") == Path("work/prepared")
    monkeypatch.setenv(paths.ENV, str(tmp_path / "elsewhere"))  # an explicit root wins
    assert paths.write_path("run") == tmp_path / "elsewhere" / "run"


def test_the_repository_notebooks_folder_is_marked() -> None:
    notebooks = Path(__file__).resolve().parents[2] / "notebooks"
    assert (notebooks / paths.SOURCES_MARKER).is_file()
