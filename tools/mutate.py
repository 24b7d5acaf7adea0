"""``make mutate``: mutation testing of the statistics and scoring core with mutmut 3.

mutmut finds a package only at the project root or under ``src/``; needlepoint keeps it under
``lib/``. So this script stages the project's files in ``build/mutation/`` with ``lib/`` renamed
``src/``, writes a ``pyproject.toml`` there from this repository's ``[tool.mutmut]`` and pytest
settings, and runs ``mutmut run`` in it (at most two workers). mutmut maps every test onto the
functions it reaches, then runs each mutant against those tests only. Afterwards the results are
read back, the mutants registered as equivalent are set apart, and the score is printed as
``killed K of N (P%)`` with every survivor listed under its function.

    python tools/mutate.py [PATTERN ...] [--workers N] [--keep] [--report]

A PATTERN is a core module (``needlepoint.run.scoring``) or a mutmut glob
(``needlepoint.run.scoring.x_classify*``). docs/mutation.md explains the output.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import fnmatch
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation_report import (  # a sibling module of this script, not a package
    UNCHECKED,
    MutateError,
    Outcome,
    load_register,
    render,
    score,
)

ROOT = Path(__file__).resolve().parents[1]
STAGE = ROOT / "build" / "mutation"
LOCK = ROOT / "build" / "mutation.lock"
REGISTER = ROOT / "tests" / "mutation_equivalents.toml"
MAX_WORKERS = 2  # the machine is shared: never more
MEMORY_LIMIT = 4 << 30  # bytes of address space per process (a worker needs about 1.1 GiB)
# mutmut's progress line, e.g. "120/1563  🎉 100 🫥 2  ⏰ 0  🤔 0  🙁 18  🔇 0  🧙 0"
PROGRESS = re.compile(r"(\d+)/(\d+)\s+🎉 (\d+) 🫥 (\d+)\s+⏰ (\d+)\s+🤔 (\d+)\s+🙁 (\d+)")
PHASES = (
    "Generating mutants",
    "Running stats",
    "Listing all tests",
    "Running clean tests",
    "Running forced fail test",
    "Running mutation testing",
)


def say(text: str) -> None:
    print(f"mutate: {text}", file=sys.stderr, flush=True)


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


def core_modules(table: dict) -> list[str]:
    """Dotted module names of the files in ``only_mutate``."""
    paths = table["only_mutate"]
    return [p.removeprefix("lib/").removesuffix(".py").replace("/", ".") for p in paths]


def patterns_for(args: list[str], modules: list[str]) -> list[str]:
    """mutmut globs for the command-line selection; a bare module name means all its mutants."""
    out = []
    for arg in args:
        prefix = arg.split("*")[0]
        if not any(m.startswith(prefix) or prefix.startswith(m + ".") for m in modules):
            raise MutateError(f"{arg!r} names no core module (core: {', '.join(modules)})")
        out.append(arg if "*" in arg else f"{arg}.*")
    return out


def _toml(value: object) -> str:
    # JSON strings, lists of strings, numbers and booleans are valid TOML values.
    return json.dumps(value, ensure_ascii=False)


def stage(table: dict, keep: bool) -> None:
    """Copy the project into STAGE with lib/ as src/, and write its pyproject.toml."""
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
    # With --keep, files deleted from the project since the last run go from the stage too.
    own = ("mutants", "pyproject.toml", "mutmut.log")
    for old in sorted(STAGE.rglob("*")) if keep else ():
        rel = old.relative_to(STAGE).as_posix()
        if old.is_file() and rel.split("/")[0] not in own and rel not in wanted:
            old.unlink()
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
    (STAGE / "pyproject.toml").write_text("\n".join(lines) + "\n", "utf-8")


def run_mutmut(patterns: list[str], workers: int) -> None:
    """Run ``mutmut run`` in STAGE, with progress on stderr and the full log in mutmut.log."""
    exe = Path(sys.executable).with_name("mutmut")
    if not exe.exists():
        raise MutateError(f"mutmut is not installed beside {sys.executable}: run make setup")
    # One BLAS thread per worker: two workers on a shared 2-core machine are enough.
    threads = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1", **threads)
    env.pop("MUTANT_UNDER_TEST", None)
    log_path = STAGE / "mutmut.log"
    cmd = [str(exe), "run", "--max-children", str(workers), *patterns]
    start = last = time.monotonic()
    phase, buffer = "", ""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=STAGE,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=_limit_memory,
        )
        assert proc.stdout is not None
        while chunk := os.read(proc.stdout.fileno(), 65536):
            log.write(chunk)
            buffer = (buffer + chunk.decode("utf-8", "replace"))[-4096:]
            for name in PHASES:
                if name in buffer and PHASES.index(name) > (PHASES.index(phase) if phase else -1):
                    phase = name
                    say(f"{name.lower()} ({_clock(time.monotonic() - start)})")
            progress = PROGRESS.findall(buffer)
            if progress and phase == PHASES[-1] and time.monotonic() - last >= 20:
                last = time.monotonic()
                done, total, killed, no_tests, _, _, survived = map(int, progress[-1])
                say(
                    f"{done}/{total} mutants checked: {killed} killed, {survived} survived, "
                    f"{no_tests} reached by no test ({_clock(last - start)})"
                )
        code = proc.wait()
    if code != 0:
        log_text = log_path.read_text("utf-8", "replace").replace("\r", "\n")
        raise MutateError(f"{failure(log_text, code)}; full log: {log_path.relative_to(ROOT)}")
    say(f"mutmut finished in {_clock(time.monotonic() - start)}")


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
def _lock() -> Iterator[None]:
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


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def read_outcomes(patterns: list[str]) -> list[Outcome]:
    """Every mutant in the selection with its mutmut status and changed lines."""
    os.chdir(STAGE)  # mutmut's readers resolve "mutants/..." against the working directory
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code

    metas = sorted(Path("mutants").rglob("*.py.meta"))
    if not metas:
        where = STAGE.relative_to(ROOT)
        raise MutateError(f"no mutmut results under {where}: run without --report first")
    outcomes = []
    for meta in metas:
        source = meta.relative_to("mutants").with_suffix("")  # src/needlepoint/....py
        codes = json.loads(meta.read_text("utf-8"))["exit_code_by_key"]
        for key, code in sorted(codes.items()):
            if patterns and not any(fnmatch.fnmatch(key, p) for p in patterns):
                continue
            status = status_by_exit_code[code]
            # Only a mutant the tests missed is shown, or matched against the register.
            shown = status not in ("killed", *UNCHECKED)
            diff = get_diff_for_mutant(key, path=source) if shown else ""
            outcomes.append(Outcome.of(key, status, diff))
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("patterns", nargs="*", help="core modules or mutmut globs (default: all)")
    parser.add_argument("--workers", type=int, default=MAX_WORKERS, help="parallel mutants (max 2)")
    parser.add_argument("--keep", action="store_true", help="reuse build/mutation's previous run")
    parser.add_argument("--report", action="store_true", help="only report the previous run")
    args = parser.parse_args(argv)
    try:
        if not 1 <= args.workers <= MAX_WORKERS:
            raise MutateError(f"--workers must be 1 or {MAX_WORKERS}: the machine is shared")
        table = mutmut_config()
        patterns = patterns_for(args.patterns, core_modules(table))
        register = load_register(REGISTER)
        with _lock():
            if not args.report:
                say(f"staging the project in {STAGE.relative_to(ROOT)}")
                stage(table, keep=args.keep)
                run_mutmut(patterns, args.workers)
            result = score(read_outcomes(patterns), register)
    except MutateError as exc:
        say(str(exc))
        return 2
    except KeyboardInterrupt:
        say("interrupted; --report shows what was checked, --keep resumes")
        return 130
    print(render(result, REGISTER.relative_to(ROOT).as_posix()))
    return 0 if result.complete else 1


if __name__ == "__main__":
    sys.exit(main())
