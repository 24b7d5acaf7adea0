"""The parts of ``make mutate`` that touch files and processes: staging, mutmut, verdicts, resume.

Every verdict is stamped with a fingerprint of what it was measured on (the staged code and
tests, not the docs or this tooling). ``--keep`` checks exactly the selected mutants without a
verdict on the current fingerprint, so a stopped run resumes where it stopped, and a verdict
measured on other code or tests is measured again instead of being mixed in.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import fnmatch
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from mutation_report import MutateError

ROOT = Path(__file__).resolve().parents[1]
STAGE = ROOT / "build" / "mutation"
LOCK = ROOT / "build" / "mutation.lock"
STATE = STAGE / "needlepoint-run.json"
REGISTER = ROOT / "tests" / "mutation_equivalents.toml"
STATS = STAGE / "mutants" / "mutmut-stats.json"
MAX_WORKERS = 2  # the machine is shared: never more
MEMORY_LIMIT = 4 << 30  # bytes of address space per process (a worker needs about 1.1 GiB)
# What only the mutation tooling reads: a change there changes no verdict.
NOT_MEASURED = ("docs/", "tools/", "tests/tools/", "tests/mutation_equivalents.toml")
# mutmut's progress line, e.g. "120/1563  🎉 100 🫥 2  ⏰ 0  🤔 0  🙁 18  🔇 0  🧙 0"
PROGRESS = re.compile(r"(\d+)/(\d+)\s+🎉 (\d+) 🫥 (\d+)\s+⏰ (\d+)\s+🤔 (\d+)\s+🙁 (\d+)")
# How often the progress line is printed, and the verdicts so far stamped (seconds).
TICK_S = 20.0
PHASES = (
    "Generating mutants",
    "Running stats",
    "Listing all tests",
    "Running clean tests",
    "Running forced fail test",
    "Running mutation testing",
)
# mutmut's first step alone: copy the sources and write the mutants (mutmut.__main__._run).
GENERATE = """import os, sys
import mutmut.__main__ as m
m.set_mutant_under_test("mutant_generation")
os.makedirs("mutants", exist_ok=True)
m.copy_src_dir(); m.copy_also_copy_files(); m.setup_source_paths(); m.store_lines_covered_by_tests()
m.create_mutants(int(sys.argv[1]))
"""


def say(text: str) -> None:
    print(f"mutate: {text}", file=sys.stderr, flush=True)


def add_workers(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--workers", type=int, default=MAX_WORKERS, help=f"{what} at a time (at most 2)"
    )


def check_workers(workers: int) -> None:
    if not 1 <= workers <= MAX_WORKERS:
        raise MutateError(f"--workers must be 1 or {MAX_WORKERS}: the machine is shared")


def mutmut_config(pyproject: Path = ROOT / "pyproject.toml") -> dict:
    """This repository's ``[tool.mutmut]`` table, checked for what the staging relies on."""
    table = tomllib.loads(pyproject.read_text("utf-8")).get("tool", {}).get("mutmut")
    if not table:
        raise MutateError(f"{pyproject.name} has no [tool.mutmut] table")
    if table.get("source_paths") != ["lib"]:
        raise MutateError('[tool.mutmut] source_paths must be ["lib"]: staging maps lib/ to src/')
    if not table.get("only_mutate"):
        raise MutateError("[tool.mutmut] only_mutate must list the core modules")
    return table


def core_files(table: dict, root: Path = ROOT) -> dict[str, Path]:
    """Each core module (a shard) by dotted name, with its source file, in only_mutate's order."""
    paths = table["only_mutate"]
    return {p.removeprefix("lib/").removesuffix(".py").replace("/", "."): root / p for p in paths}


def patterns_for(args: list[str], modules: list[str]) -> list[str]:
    """mutmut globs for the command-line selection; a bare module name means all its mutants."""
    out = []
    for arg in args:
        prefix = arg.split("*")[0]
        if not any(m.startswith(prefix) or prefix.startswith(m + ".") for m in modules):
            raise MutateError(f"{arg!r} names no core module (core: {', '.join(modules)})")
        out.append(arg if "*" in arg else f"{arg}.*")
    return out


def changed_since_staged(files: dict[str, Path], modules: set[str]) -> list[str]:
    """The core files of ``modules`` whose checkout copy differs from the one staged (and
    measured): a results file keys each verdict by its function's source in the checkout, so a
    verdict must never be recorded against code other than the code it was measured on."""
    out = []
    for module in sorted(modules):
        path = files[module]
        staged = STAGE / "src" / path.relative_to(ROOT / "lib")
        if not staged.is_file() or staged.read_bytes() != path.read_bytes():
            out.append(path.relative_to(ROOT).as_posix())
    return out


def measured(rel: str) -> bool:
    """Whether a file can change a verdict (everything but the docs and this tooling)."""
    return not rel.startswith(NOT_MEASURED)


def fingerprint(stage: Path, names: list[str]) -> str:
    """SHA-256 over the names and contents of the staged files that can change a verdict."""
    digest = hashlib.sha256()
    for rel in sorted(n for n in names if measured(n)):
        digest.update(f"{rel}\0{hashlib.sha256((stage / rel).read_bytes()).hexdigest()}\n".encode())
    return digest.hexdigest()


def git_state(root: Path = ROOT) -> tuple[str, bool]:
    """``(HEAD commit, whether every file that can change a verdict is as committed)``."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
    status = subprocess.run(
        ["git", "status", "--porcelain", "-z", "--untracked-files=all"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    if head.returncode != 0 or status.returncode != 0:
        raise MutateError("git failed: run make mutate inside a git checkout")
    changed = [e[3:] for e in status.stdout.split("\0") if len(e) > 3]
    return head.stdout.strip(), not any(measured(c) for c in changed)


def _toml(value: object) -> str:
    # JSON strings, lists of strings, numbers and booleans are valid TOML values.
    return json.dumps(value, ensure_ascii=False)


def stage(table: dict, keep: bool) -> str:
    """Copy the project into STAGE with lib/ as src/, write its pyproject.toml; the fingerprint."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        raise MutateError("git ls-files failed: run make mutate inside a git checkout")
    files = sorted(f for f in listed.stdout.decode().split("\0") if f and (ROOT / f).is_file())
    if not keep and STAGE.exists():
        shutil.rmtree(STAGE)
    wanted = set()
    for name in files:
        rel = "src/" + name.removeprefix("lib/") if name.startswith("lib/") else name
        if rel == "pyproject.toml":
            continue
        wanted.add(rel)
        target = STAGE / rel
        # copy2 keeps the mtime, which mutmut uses (with --keep) to reuse unchanged mutants.
        if not target.exists() or target.read_bytes() != (ROOT / name).read_bytes():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target)
    # With --keep, files deleted from the project since the last run go, from mutmut's copy too.
    own = ("mutants", "pyproject.toml", "mutmut.log", STATE.name)
    for old in sorted(STAGE.rglob("*")) if keep else ():
        rel = old.relative_to(STAGE).as_posix()
        if old.is_file() and rel.split("/")[0] not in own and rel not in wanted:
            old.unlink()
            (STAGE / "mutants" / rel).unlink(missing_ok=True)
    pytest_ini = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["pytest"]
    config = {k: v for k, v in table.items() if k not in ("source_paths", "only_mutate")}
    config["source_paths"] = ["src"]
    config["only_mutate"] = ["src/" + p.removeprefix("lib/") for p in table["only_mutate"]]
    # Everything the tests read beside src/ and tests/ (PROTOCOL.md, protocols/, evidence/ ...).
    tops = sorted({rel.split("/")[0] for rel in wanted} - {"src", "tests"})
    config["also_copy"] = [*table.get("also_copy", []), *tops]
    lines = ["# Written by tools/mutate.py from the repository's pyproject.toml; do not edit."]
    sections = (("tool.pytest.ini_options", pytest_ini["ini_options"]), ("tool.mutmut", config))
    for section, values in sections:
        lines += ["", f"[{section}]", *(f"{k} = {_toml(v)}" for k, v in values.items())]
    text = "\n".join(lines) + "\n"
    if not (STAGE / "pyproject.toml").is_file() or (STAGE / "pyproject.toml").read_text() != text:
        (STAGE / "pyproject.toml").write_text(text, "utf-8")
    return fingerprint(STAGE, [*wanted, "pyproject.toml"])


def _env() -> dict[str, str]:
    # One BLAS thread per worker: two workers on a shared 2-core machine are enough.
    threads = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1", **threads)
    env.pop("MUTANT_UNDER_TEST", None)
    return env


def generate(workers: int) -> None:
    """mutmut's first step alone: write the mutants, so that the verdicts to redo are known."""
    say("generating mutants")
    with open(STAGE / "mutmut.log", "wb") as log:
        code = subprocess.run(
            [sys.executable, "-c", GENERATE, str(workers)],
            cwd=STAGE,
            env=_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_limit_memory,
        ).returncode
    if code != 0:
        raise MutateError(f"mutmut could not generate the mutants; full log: {_log_name()}")


@dataclass(frozen=True)
class Verdict:
    path: str  # the source file, relative to STAGE (src/needlepoint/...)
    exit_code: int | None
    duration: float | None

    @property
    def status(self) -> str:
        from mutmut.stats import status_by_exit_code

        return status_by_exit_code[self.exit_code]


class Verdicts(dict):
    """Every mutant's verdict by key, read from mutmut's ``.meta`` files."""

    def generated(self, path: str) -> tuple[str, dict[str, tuple[int, int]]]:
        """The file mutmut generated for ``path`` and where each function copy lies in it."""
        code = (STAGE / "mutants" / path).read_text("utf-8")
        index = json.loads((STAGE / "mutants" / f"{path}.spans").read_text("utf-8"))
        return code, {k: (v[0], v[1]) for k, v in index["spans"].items()}


def read_verdicts() -> Verdicts:
    out = Verdicts()
    metas = sorted((STAGE / "mutants").rglob("*.py.meta"))
    if not metas:
        raise MutateError(f"no mutmut results under {_log_name().parent}: run without --report")
    for meta in metas:
        path = meta.relative_to(STAGE / "mutants").with_suffix("").as_posix()
        data = json.loads(meta.read_text("utf-8"))
        for key, code in data["exit_code_by_key"].items():
            out[key] = Verdict(path, code, data["durations_by_key"].get(key))
    return out


def selected(verdicts: Verdicts, patterns: list[str]) -> list[str]:
    """The keys a run's patterns select (every mutant without patterns), sorted."""
    chosen = (k for k in verdicts if not patterns or any(fnmatch.fnmatch(k, p) for p in patterns))
    return sorted(chosen)


def reset(keys: list[str], verdicts: Verdicts) -> None:
    """Forget the verdicts of ``keys`` (as mutmut does for a changed function)."""
    for path in sorted({verdicts[k].path for k in keys if verdicts[k].exit_code is not None}):
        meta = STAGE / "mutants" / f"{path}.meta"
        data = json.loads(meta.read_text("utf-8"))
        for k in keys:
            if k in data["exit_code_by_key"]:
                data["exit_code_by_key"][k] = None
        meta.write_text(json.dumps(data, indent=4), "utf-8")


@dataclass
class RunState:
    """What build/mutation's verdicts were measured on: fingerprints, commit, stamps."""

    fingerprint: str
    commit: str = ""
    clean: bool = False
    stats_fingerprint: str | None = None
    stamps: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, fresh: bool, fingerprint: str) -> RunState:
        state = cls(fingerprint)
        before = None if fresh else cls.saved()
        if before is not None:
            state.stats_fingerprint, state.stamps = before.stats_fingerprint, before.stamps
        state.commit, state.clean = git_state()
        if state.stats_fingerprint != fingerprint:
            # mutmut maps only new tests onto functions; after any change, map them all again.
            STATS.unlink(missing_ok=True)
            state.stats_fingerprint = fingerprint
        state.save()
        return state

    @classmethod
    def saved(cls) -> RunState | None:
        """The state of the last run as it was staged (for --report), if there is one."""
        keys = ("fingerprint", "commit", "clean", "stats_fingerprint", "stamps")
        saved = json.loads(STATE.read_text("utf-8")) if STATE.is_file() else {}
        return cls(**{k: saved[k] for k in keys}) if all(k in saved for k in keys) else None

    def save(self) -> None:
        data = {
            "fingerprint": self.fingerprint,
            "commit": self.commit,
            "clean": self.clean,
            "stats_fingerprint": self.stats_fingerprint,
            "stamps": self.stamps,
        }
        # Written aside and renamed: a run killed mid-write still leaves the last whole state.
        part = STATE.with_name(STATE.name + ".part")
        part.write_text(json.dumps(data, sort_keys=True), "utf-8")
        part.replace(STATE)

    def current(self, key: str, verdicts: Verdicts) -> bool:
        """Whether a mutant's verdict was measured on the code and tests staged now."""
        return verdicts[key].exit_code is not None and self.stamps.get(key) == self.fingerprint

    def todo(self, keys: list[str], verdicts: Verdicts) -> list[str]:
        return [k for k in keys if not self.current(k, verdicts)]

    def mutmut_args(self, todo: list[str], patterns: list[str], verdicts: Verdicts) -> list[str]:
        """mutmut's arguments to check exactly ``todo``: the patterns, or each mutant by name."""
        if len(todo) == len(selected(verdicts, patterns)):
            return patterns
        tested = set()
        if STATS.is_file():
            tested = set(json.loads(STATS.read_text("utf-8"))["tests_by_mangled_function_name"])
        # mutmut looks a plain name's tests up directly (and fails on a function no test reaches);
        # a leading * makes it a glob that matches that one mutant all the same.
        return [k if k.rpartition("__mutmut_")[0] in tested else f"*{k}" for k in todo]

    def stamp(self, todo: list[str], verdicts: Verdicts) -> None:
        for key in todo:
            if verdicts[key].exit_code is not None:
                self.stamps[key] = self.fingerprint
        self.save()


def run_mutmut(
    args: list[str], workers: int, count: int, on_tick: Callable[[], None] = lambda: None
) -> None:
    """Run ``mutmut run`` in STAGE, with progress on stderr and the full log in mutmut.log.

    mutmut counts every mutant it knows; the progress line counts the ``count`` checked now.
    ``on_tick`` runs with each progress line, so a run killed outright (a session that ends, no
    ``finally``) still keeps what it had measured.
    """
    exe = Path(sys.executable).with_name("mutmut")
    if not exe.exists():
        raise MutateError(f"mutmut is not installed beside {sys.executable}: run make setup")
    cmd = [str(exe), "run", "--max-children", str(workers), *args]
    start = time.monotonic()
    with open(STAGE / "mutmut.log", "ab") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=STAGE,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=_mutmut_child,
        )
        assert proc.stdout is not None
        try:
            _follow(proc, log, start, count, on_tick)
        except BaseException:  # a stop: mutmut must not go on staging under the next run
            _stop(proc)
            raise
        code = proc.wait()
    if code != 0:
        log_text = (STAGE / "mutmut.log").read_text("utf-8", "replace").replace("\r", "\n")
        raise MutateError(f"{failure(log_text, code)}; full log: {_log_name()}")
    say(f"mutmut finished in {_clock(time.monotonic() - start)}")


def _follow(
    proc: subprocess.Popen, log: BinaryIO, start: float, count: int, on_tick: Callable[[], None]
) -> None:
    """Copy mutmut's output to the log, saying each phase and, every TICK_S, the progress."""
    assert proc.stdout is not None
    last = start
    phase, buffer, base = "", "", None
    while chunk := os.read(proc.stdout.fileno(), 65536):
        log.write(chunk)
        buffer = (buffer + chunk.decode("utf-8", "replace"))[-4096:]
        for name in PHASES:
            if name in buffer and PHASES.index(name) > (PHASES.index(phase) if phase else -1):
                phase = name
                say(f"{name.lower()} ({_clock(time.monotonic() - start)})")
        progress = PROGRESS.findall(buffer)
        if progress and phase == PHASES[-1]:
            now = [int(n) for i, n in enumerate(progress[-1]) if i != 1]
            base = base or now  # what had a verdict before this run
            if time.monotonic() - last >= TICK_S:
                last = time.monotonic()
                delta = [a - b for a, b in zip(now, base, strict=True)]
                done, killed, no_tests, _, _, survived = delta
                say(
                    f"{done}/{count} mutants checked: {killed} killed, {survived} survived, "
                    f"{no_tests} reached by no test ({_clock(last - start)})"
                )
                on_tick()


def _stop(proc: subprocess.Popen) -> None:
    """End mutmut within 30 s, or kill it. SIGINT, not SIGTERM: on Ctrl-C mutmut stops its
    workers without recording their results, whereas a worker ended by SIGTERM that mutmut
    still drained would be recorded as a verdict ("suspicious")."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def term_as_interrupt() -> Iterator[None]:
    """A plain ``kill`` (SIGTERM) stops a run as Ctrl-C does, so the ``finally`` that stamps
    the verdicts written since the last tick still runs: the default handler exits without it,
    and those verdicts would be left unstamped ("not measured")."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _log_name() -> Path:
    return (STAGE / "mutmut.log").relative_to(ROOT)


# mutmut's own words for a run that stops before any mutant is judged, and what they mean.
FAILURES = {
    "failed to collect stats": "a test failed in mutmut's first run, before any mutant",
    "Failed to run clean test": "a test failed in mutmut's clean run, with no mutant active",
    "Unable to force test failures": "no test failed when mutmut forced every function to raise",
    "Failed to collect list of tests": "pytest could not collect the tests",
}


def failure(log_text: str, code: int) -> str:
    """One line for a failed mutmut run: which step stopped, and the first failing test."""
    lines = log_text.splitlines()
    step = next((m for key, m in FAILURES.items() if any(key in x for x in lines)), None)
    failed = next((x.split(" - ")[0] for x in lines if x.startswith(("FAILED ", "ERROR "))), "")
    what = step or f"mutmut run stopped (exit {code})"
    return f"{what}: {failed[:200]}" if failed else what


@contextlib.contextmanager
def lock() -> Iterator[None]:
    """One run per checkout: a second would rebuild build/mutation under the first."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise MutateError("another make mutate is running in this checkout") from None
        yield


def _limit_memory() -> None:
    """Cap mutmut and every worker it forks at MEMORY_LIMIT of address space.

    A mutant can turn a bounded loop into an unbounded allocation; on a shared machine it must
    fail with MemoryError (its tests fail: the mutant is killed), not take the machine down.
    """
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _mutmut_child() -> None:
    """In mutmut's process, before it starts: the memory cap, and SIGINT taken as Ctrl-C (how
    ``_stop`` ends it) even when this run was started with SIGINT ignored, as a job started with
    ``&`` from a script is: an ignored signal survives exec, and mutmut would run on."""
    _limit_memory()
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
