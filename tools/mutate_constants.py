"""``make mutate-constants``: change each rule constant of the core in turn and run its tests.

mutmut never mutates module-level constants, so the code pattern, the trim set, the failure
kinds and the limits would otherwise go unproven. For every module in ``[tool.mutmut]
only_mutate`` this script makes the constant mutants (tools/constant_mutants.py), writes each
into a private copy of ``lib/`` under ``build/constants/``, and runs the tests that read the
module (the test files that import it or a module importing from it) until one fails. A
mutant no test fails is a survivor, unless the register excuses it (``[[constant]]`` in
tests/mutation_equivalents.toml, held to the same rules as function mutants). A run that is not
interrupted writes docs/mutation/constants/MODULE.json for each module it measured on committed
code and tests (tools/constant_results.py); ``make mutate-summary`` adds those files up.

    python tools/mutate_constants.py [MODULE ...] [--workers N] [--list]

Exit status: 0 when every constant mutant was killed or excused, 1 when one survived, 2 on bad
input or when the tests fail with no mutant at all.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import fnmatch
import functools
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# Sibling modules of this script, not a package.
from constant_mutants import ConstantMutant, constant_mutants
from constant_results import record_constants, report
from mutation_register import load_constant_register
from mutation_report import MutateError
from mutation_run import (
    REGISTER,
    ROOT,
    add_workers,
    check_workers,
    core_files,
    git_state,
    mutmut_config,
    say,
    term_as_interrupt,
)

STAGE = ROOT / "build" / "constants"
TIME_LIMIT = (4.0, 60.0)  # a mutant's tests may take 4x their clean time plus a minute


@dataclass(frozen=True)
class Verdict:
    mutant: ConstantMutant
    status: str  # killed, timed out, survived


def _top_level(path: str) -> bool:
    """A top-level tests/test_*.py (mutmut's selection leaves some out by name)."""
    return path.startswith("tests/test_") and path.count("/") == 1


def test_files(table: dict, root: Path = ROOT) -> list[str]:
    """The test files mutmut's selection runs (the same ignores), relative to the root.

    Plus the top-level tests/test_*.py: mutmut leaves them out because they read the source it
    rewrites, but a changed constant is plain source, and some of them check a limit against
    the documentation.
    """
    args = table.get("pytest_add_cli_args_test_selection", ["tests"])
    ignored = [a.split("=", 1)[1] for a in args if a.startswith("--ignore=")]
    ignored = [i for i in ignored if not _top_level(i)]
    globs = [a.split("=", 1)[1] for a in args if a.startswith("--ignore-glob=")]
    globs = [g for g in globs if g != "tests/test_*.py"]
    out = []
    for path in sorted((root / "tests").rglob("test_*.py")):
        rel = path.relative_to(root).as_posix()
        if any(rel == i or rel.startswith(i.rstrip("/") + "/") for i in ignored):
            continue
        if not any(fnmatch.fnmatch(rel, g) for g in globs):
            out.append(rel)
    return out


@functools.cache
def _imported_names(text: str) -> frozenset[str]:
    """Every dotted name an absolute import in the text names (parsed once per text)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return frozenset(names)


def imported(text: str, modules: set[str]) -> bool:
    """Whether source text imports one of the modules, in any absolute form.

    ``from needlepoint.design import profiles`` names the module only as package plus name, so a
    plain text search for ``needlepoint.design.profiles`` misses it: the tests and library modules
    written that way would never run for the module's constants.
    """
    prefixes = tuple(m + "." for m in modules)
    return any(n in modules or n.startswith(prefixes) for n in _imported_names(text))


def readers(constant: str, files: dict[str, Path]) -> set[str]:
    """The module of a constant and every library module importing from that module."""
    return set(_readers(constant.rpartition(".")[0]))


@functools.cache
def _readers(module: str) -> frozenset[str]:
    # Cached per module: every constant of a module has the same readers, and the run asks once
    # per mutant.
    out = {module}
    for path in sorted((ROOT / "lib").rglob("*.py")):
        if imported(path.read_text("utf-8"), {module}):
            rel = path.relative_to(ROOT / "lib").with_suffix("")
            out.add(".".join(rel.parts))
    return frozenset(out)


def tests_for(constant: str, files: dict[str, Path], tests: list[str]) -> list[list[str]]:
    """The test files that read the constant's module, then those reading an importer of it.

    Two groups, run one after the other: the module's own tests fail soonest when its constant
    changes, and most mutants then never pay for collecting the rest.
    """
    module = constant.rpartition(".")[0]
    names = readers(constant, files)
    texts = {t: (ROOT / t).read_text("utf-8") for t in tests}
    own = [t for t in tests if module in texts[t] or imported(texts[t], {module})]
    rest = [
        t
        for t in tests
        if t not in own and (any(n in texts[t] for n in names) or imported(texts[t], names))
    ]
    return [group for group in (own, rest) if group]


def _away_from_ctrl_c() -> None:
    """Keep a terminal's Ctrl-C from the test run, and SIGINT working inside it.

    Ctrl-C is the parent's to handle (it kills the runs): an interrupted test run must not read
    as a kill, so the run gets a process group of its own, which a terminal's Ctrl-C does not
    reach. SIGINT itself is left working, Python's way: ignoring it here was inherited by every
    process a test starts (an ignored signal survives exec), and so was a backgrounded parent's
    ignored SIGINT, so the tests that interrupt a real run failed, or passed without interrupting.
    """
    os.setpgrp()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent's stop handler is not the run's


def _child(stage: Path, tests: list[str]) -> None:
    """In a forked process: import the staged lib/ first, run the tests, exit with pytest's code."""
    os.chdir(ROOT)
    _away_from_ctrl_c()
    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.path.insert(0, str(stage / "lib"))
    os.environ["PYTHONPATH"] = str(stage / "lib")  # and in any process a test starts
    import pytest

    args = [*tests, "-x", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    os._exit(int(pytest.main([*args, "--hypothesis-seed=0"])))


class Pool:
    """At most ``workers`` forked test runs, each on its own copy of lib/."""

    def __init__(self, workers: int) -> None:
        shutil.rmtree(STAGE, ignore_errors=True)
        self.free = []
        for i in range(workers):
            shutil.copytree(ROOT / "lib", STAGE / f"w{i}" / "lib")
            self.free.append(STAGE / f"w{i}")
        self.running: dict[int, tuple[Path, ConstantMutant | None, float, float]] = {}

    def start(self, mutant: ConstantMutant | None, tests: list[str], limit: float) -> None:
        stage = self.free.pop()
        if mutant is not None:
            target = stage / mutant.path.relative_to(ROOT)
            target.write_bytes(mutant.apply(mutant.path.read_bytes()))
        pid = os.fork()
        if pid == 0:
            _child(stage, tests)
        self.running[pid] = (stage, mutant, time.monotonic(), limit)

    def wait(self) -> tuple[ConstantMutant | None, str, float]:
        """The next finished run: its mutant, verdict and seconds; overdue runs are killed."""
        while True:
            pid, status = os.waitpid(-1, os.WNOHANG)
            now = time.monotonic()
            if pid == 0:
                for p, (_, _, began, limit) in self.running.items():
                    if now - began > limit:
                        os.kill(p, signal.SIGKILL)
                time.sleep(0.05)
                continue
            stage, mutant, began, limit = self.running.pop(pid)
            if mutant is not None:  # put the copy back as it was
                shutil.copy2(mutant.path, stage / mutant.path.relative_to(ROOT))
            self.free.append(stage)
            code = os.waitstatus_to_exitcode(status)
            if code == -signal.SIGKILL and now - began > limit:
                return mutant, "timed out", now - began
            if code == 5:
                return mutant, "no tests", now - began
            return mutant, ("survived" if code == 0 else "killed"), now - began


def measure(work: list[tuple[ConstantMutant, list[list[str]]]], workers: int) -> list[Verdict]:
    """Run each group of tests once clean, then every mutant group by group; progress on stderr.

    A mutant is killed by the first group that fails; it survives only if every group passes.
    """
    pool = Pool(workers)
    clean: dict[tuple[str, ...], float] = {}
    waiting: list[tuple[ConstantMutant | None, str, float]] = []  # finished while a baseline ran

    def timed(tests: list[str]) -> float:
        """A group's own time with no mutant, measured once, when a mutant first needs it (the
        second groups, importers' tests, are needed only by the few mutants surviving the first)."""
        key = tuple(tests)
        if key not in clean:
            while pool.running:  # alone, so that the baseline is not measured under contention
                waiting.append(pool.wait())
            pool.start(None, tests, 1800)
            _, status, seconds = pool.wait()
            if status != "survived":
                raise MutateError(f"the tests fail with no mutant at all: {' '.join(tests)[:200]}")
            clean[key] = seconds
        return TIME_LIMIT[0] * clean[key] + TIME_LIMIT[1]

    out: list[Verdict] = []
    try:
        return _measure(pool, work, out, timed, waiting)
    except KeyboardInterrupt:
        for pid in list(pool.running):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        raise Interrupted(out) from None


class Interrupted(Exception):
    """Ctrl-C during the runs: the verdicts measured until then."""

    def __init__(self, verdicts: list[Verdict]) -> None:
        super().__init__("interrupted")
        self.verdicts = verdicts


def _measure(
    pool: Pool,
    work: list[tuple[ConstantMutant, list[list[str]]]],
    out: list[Verdict],
    timed: Callable[[list[str]], float],
    waiting: list[tuple[ConstantMutant | None, str, float]],
) -> list[Verdict]:
    """The runs themselves; verdicts are appended to ``out`` as they come back."""
    queue, last = list(work), time.monotonic()
    later: dict[ConstantMutant, list[list[str]]] = {}
    while queue or pool.running or waiting:
        while queue and pool.free and not waiting:
            mutant, (tests, *rest) = queue.pop(0)
            later[mutant] = rest
            limit = timed(tests)
            if waiting:  # runs finished while the baseline waited: take them first
                queue.insert(0, (mutant, [tests, *rest]))
                break
            pool.start(mutant, tests, limit)
        mutant, status, _ = waiting.pop(0) if waiting else pool.wait()
        assert mutant is not None
        if status == "survived" and later[mutant]:
            queue.insert(0, (mutant, later.pop(mutant)))
            continue
        out.append(Verdict(mutant, status))
        if time.monotonic() - last >= 20 or not (queue or pool.running):
            last = time.monotonic()
            killed = sum(v.status in ("killed", "timed out") for v in out)
            say(f"{len(out)}/{len(work)} constant mutants checked: {killed} killed")
    return out


def _warm() -> None:
    """Import the heavy libraries once, before forking, so that each run starts quickly."""
    import importlib

    for name in ("pytest", "hypothesis", "numpy", "pandas", "scipy.stats", "jsonschema"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    if any(m == "needlepoint" or m.startswith("needlepoint.") for m in sys.modules):
        raise MutateError("needlepoint was imported before forking: the mutants would not load")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="core modules (default: all)")
    add_workers(parser, "test runs")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    args = parser.parse_args(argv)
    try:
        check_workers(args.workers)
        table = mutmut_config()
        files = core_files(table)
        unknown = [m for m in args.modules if m not in files]
        if unknown:
            raise MutateError(f"{unknown[0]!r} is not a core module (core: {', '.join(files)})")
        mutants = [m for mod in args.modules or files for m in constant_mutants(files[mod], mod)]
        register = load_constant_register(REGISTER, files)
        if args.list:
            print("\n".join(f"{m.constant}: {m.change}" for m in mutants))
            return 0
        tests = test_files(table)
        work = [(m, tests_for(m.constant, files, tests)) for m in mutants]
        if no_tests := sorted({m.constant for m, t in work if not t}):
            raise MutateError(f"no test reads {no_tests[0]}: give it one")
        _warm()
        say(f"{len(mutants)} constant mutants in {len(args.modules or files)} modules")
        before = git_state()  # what the results files will name, if it is still so at the end
        with term_as_interrupt():  # a plain kill stops the runs as Ctrl-C does
            verdicts, stopped = measure(work, args.workers), False
    except MutateError as exc:
        say(str(exc))
        return 2
    except Interrupted as stop:  # Ctrl-C: what was measured is reported, labelled partial
        verdicts, stopped = stop.verdicts, True
    problems, excused = register.match(verdicts, args.modules or list(files), partial=stopped)
    code = report(verdicts, excused, problems, REGISTER.relative_to(ROOT).as_posix())
    if stopped:  # and no results file: a record names every mutant of its module
        say(f"stopped: {len(verdicts)} of {len(mutants)} constant mutants checked (partial)")
        return 1
    measured = (ROOT, files, mutants, verdicts, register, excused, problems, before, git_state())
    for line in record_constants(*measured):
        say(line)
    return code


if __name__ == "__main__":
    if os.environ.get("PYTHONHASHSEED") != "0":  # the same hash order in every forked run
        os.execve(sys.executable, [sys.executable, *sys.argv], dict(os.environ, PYTHONHASHSEED="0"))
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    sys.exit(main())
