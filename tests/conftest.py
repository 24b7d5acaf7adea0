"""Shared fixtures: one reference prepared folder per session, copied for tests that mutate it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import tqdm

from needlepoint.design.prepared import prepare

ROOT = Path(__file__).resolve().parents[1]

# tqdm guards its bars with a multiprocessing lock: a semaphore shared by every process forked
# after it exists. mutmut forks each mutant's tests from one process, so a mutant killed at its
# time limit while drawing a bar left the semaphore held, and every later mutant that drew a bar
# waited on it until its own limit: counted "timed out", so killed, though never tested (seen in
# run.session at c108375). A thread lock keeps each process's bars to itself.
tqdm.tqdm.set_lock(threading.RLock())


@pytest.fixture(scope="session")
def reference_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A freshly prepared reference folder; treat as read-only."""
    return prepare(tmp_path_factory.mktemp("ref") / "prepared")


@pytest.fixture
def hears_sigint() -> Iterator[None]:
    """Python's own Ctrl-C handler for a test that sends SIGINT to its own process.

    A test session started in the background (`make test &`, `nohup`, a CI step without job
    control) inherits an ignored SIGINT, and Python then installs no KeyboardInterrupt handler:
    the signal was dropped and the test failed with "DID NOT RAISE" only when run that way.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


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
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    if mutant in _FULL_BUDGET:
        return
    from hypothesis import settings

    items[:] = likeliest_killers_first(items, mutant, _recorded_durations())

    for item in items:
        test = getattr(item, "obj", None)
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is not None and own.max_examples > MUTATION_EXAMPLES:
            test._hypothesis_internal_use_settings = settings(own, max_examples=MUTATION_EXAMPLES)


# mutmut hands a mutant's tests to pytest in the order of a Python set, and stops at the first
# failure (-x): a mutant that its own module's unit test kills in a second could wait a minute
# behind CLI and notebook-step tests first. Running the mirrored test files first, then the other
# files cheapest first, changes no verdict (the same tests run, each file's own order is kept, so
# its module fixtures are built once) and only reaches the first failure sooner.
def likeliest_killers_first(
    items: list[pytest.Item], mutant: str, durations: dict[str, float]
) -> list[pytest.Item]:
    """The items grouped by file: the files that mirror the mutant's module, then by cost."""
    if "__mutmut_" not in mutant:
        return items
    *package, name = mutant.split(".x_")[0].split(".xǁ")[0].split(".")[1:] or [""]
    mirror = "/".join(["tests", *package, f"test_{name}"])
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)

    def cost(path: str) -> tuple[bool, float]:
        own = path.removeprefix("mutants/").startswith(mirror)
        return not own, sum(durations.get(item.nodeid, 0.0) for item in files[path])

    return [item for path in sorted(files, key=cost) for item in files[path]]


def _recorded_durations() -> dict[str, float]:
    """mutmut's record of each test's duration (run from its mutants/ folder), or nothing."""
    try:
        return dict(json.loads(Path("mutmut-stats.json").read_text())["duration_by_test"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}
