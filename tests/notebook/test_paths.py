"""Output redirection: re-executing evidence writes elsewhere and reads its own outputs first."""

from __future__ import annotations

from pathlib import Path

import pytest

from needlepoint.notebook import paths


def test_without_root_paths_are_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(paths.ENV, raising=False)
    assert paths.output("run") == Path("run") and paths.input("run") == Path("run")


def test_with_root_writes_are_redirected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(paths.ENV, str(tmp_path))
    assert paths.output("run") == tmp_path / "run"
    # nothing written there yet: read the committed copy
    assert paths.input("run") == Path("run")
    (tmp_path / "run").mkdir()
    assert paths.input("run") == tmp_path / "run"
    assert paths.output(tmp_path / "abs") == tmp_path / "abs"
