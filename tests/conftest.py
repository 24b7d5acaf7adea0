"""Shared fixtures: one reference prepared folder per session, copied for tests that mutate it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from needlepoint.design.freeze import prepare

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def reference_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A freshly prepared reference folder; treat as read-only."""
    return prepare(tmp_path_factory.mktemp("ref") / "prepared")


@pytest.fixture
def prepared_copy(reference_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the reference folder that a test may tamper with."""
    return Path(shutil.copytree(reference_dir, tmp_path / "prepared"))
