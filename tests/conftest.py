"""Shared fixtures: one reference prepared folder per session, copied for tests that mutate it."""

from __future__ import annotations

import os
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


# While mutmut checks a mutant (docs/mutation.md) each property test tries at most this many
# examples: a survivor runs every test mapped to its function, and a few hundred examples each
# would make it the most expensive part of the run. mutmut's own first run of the suite, which
# maps tests onto functions, and every ordinary run keep the full budgets, so the cap can only
# let a mutant survive, never kill one that the tests would not.
MUTATION_EXAMPLES = 50
_FULL_BUDGET = ("", "stats", "list_all_tests", "mutant_generation")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("MUTANT_UNDER_TEST", "") in _FULL_BUDGET:
        return
    from hypothesis import settings

    for item in items:
        test = getattr(item, "obj", None)
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is not None and own.max_examples > MUTATION_EXAMPLES:
            test._hypothesis_internal_use_settings = settings(own, max_examples=MUTATION_EXAMPLES)
