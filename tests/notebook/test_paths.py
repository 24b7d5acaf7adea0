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
