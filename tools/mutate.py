"""``make mutate``: mutation testing of the core with mutmut 3, one module (a shard) at a time.

mutmut finds a package only at the project root or under ``src/``; needlepoint keeps it under
``lib/``. So this script stages the project's files in ``build/mutation/`` with ``lib/`` renamed
``src/``, writes a ``pyproject.toml`` there from this repository's ``[tool.mutmut]`` and pytest
settings, and runs ``mutmut run`` in it (at most two workers). Every verdict is stamped with a
fingerprint of the code and tests it was measured on, so ``--keep`` resumes a stopped run and
re-checks whatever was measured on other code. A module whose mutants all have a verdict on one
committed state gets its results file (docs/mutation/MODULE.json), which records each function
by its name and source hash; ``--summary`` finds each of them in the core as it is now (a merge
of modules moves no measurement) and adds them up into docs/mutation.md, naming every function
that needs measuring, and the constants results files (docs/mutation/constants/, written by
tools/mutate_constants.py) into a second table there.

    python tools/mutate.py [PATTERN ...] [--workers N] [--keep] [--report] [--summary] [--shards]
    python tools/mutate.py --needed [MODULE ...] [--keep]   # what the summary says needs measuring

A PATTERN is a core module (``needlepoint.run.scoring``) or a mutmut glob
(``needlepoint.run.scoring.x_classify*``). docs/mutation.md explains the output.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# Sibling modules of this script, not a package.
from constant_results import summary as constants_summary
from mutation_register import Entry, load_register, match_outcomes, resolve_register
from mutation_report import MutateError, Outcome, mutant_changes, render, score
from mutation_run import (
    REGISTER,
    ROOT,
    STAGE,
    RunState,
    Verdicts,
    add_workers,
    changed_since_staged,
    check_workers,
    core_files,
    generate,
    lock,
    mutmut_config,
    patterns_for,
    read_verdicts,
    reset,
    run_mutmut,
    say,
    selected,
    stage,
    term_as_interrupt,
)
from mutation_shards import needed, record_shards, summary


def _register_name() -> str:
    return REGISTER.relative_to(ROOT).as_posix() if REGISTER.is_relative_to(ROOT) else REGISTER.name


def _module(key: str) -> str:
    return key.rpartition(".")[0]


def outcomes_of(keys: list[str], verdicts: Verdicts) -> list[Outcome]:
    """Each of these mutants with its status and the lines it changes."""
    changes: dict[str, tuple[str, str]] = {}
    for path in sorted({verdicts[k].path for k in keys}):
        code, spans = verdicts.generated(path)
        module = ".".join(Path(path).with_suffix("").parts[1:])
        changes |= {f"{module}.{n}": c for n, c in mutant_changes(code, spans).items()}
    return [Outcome.of(k, verdicts[k].status, changes[k]) for k in keys]


def check(register: tuple[Entry, ...], files: dict[str, Path]) -> tuple[Entry, ...]:
    """The register's entries, each found in the code as it is now; refuse to start when the
    register does not hold for it."""
    found, problems = resolve_register(register, files, ROOT)
    for p in problems:
        say(f"{_register_name()}: {p}")
    if problems:
        raise MutateError(f"the register does not hold for this code ({len(problems)} entries)")
    return found


def _stamp_so_far(state: RunState, todo: list[str]) -> None:
    """Stamp the verdicts written so far; mutmut rewrites a results file in place, so one caught
    half-written is left for the next tick (or the final stamp)."""
    try:
        verdicts = read_verdicts()
    except ValueError:  # json's decode error
        return
    state.stamp(todo, verdicts)


def measure(patterns: list[str], workers: int, keep: bool, table: dict) -> RunState:
    """Stage, then check every selected mutant without a verdict on the staged code."""
    say(f"staging the project in {STAGE.relative_to(ROOT)}")
    state = RunState.load(fresh=not keep, fingerprint=stage(table, keep=keep))
    generate(workers)
    verdicts = read_verdicts()
    todo = state.todo(selected(verdicts, patterns), verdicts)
    if not todo:
        say("every selected mutant already has a verdict on this code and these tests")
        return state
    say(f"{len(todo)} mutants to check")
    reset(todo, verdicts)
    try:
        args = state.mutmut_args(todo, patterns, verdicts)
        run_mutmut(args, workers, len(todo), on_tick=lambda: _stamp_so_far(state, todo))
    finally:  # an interrupted run keeps what it measured, for --keep to resume
        state.stamp(todo, read_verdicts())
    return state


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("patterns", nargs="*", help="core modules or mutmut globs (default: all)")
    add_workers(parser, "mutants")
    parser.add_argument("--keep", action="store_true", help="resume: reuse build/mutation's run")
    parser.add_argument("--report", action="store_true", help="report the previous run again")
    parser.add_argument("--summary", action="store_true", help="add up the results files")
    parser.add_argument("--shards", action="store_true", help="list the shards (core modules)")
    parser.add_argument(
        "--needed",
        action="store_true",
        help="measure only the functions the summary leaves out (changed or never measured), "
        "in the modules named (default: all)",
    )
    args = parser.parse_args(argv)
    try:
        check_workers(args.workers)
        table = mutmut_config()
        files = core_files(table)
        if args.shards:
            print("\n".join(files))
            return 0
        if args.summary:
            print(summary(ROOT, files, write=True))
            print(f"\n{constants_summary(ROOT, files, write=True)}")
            return 0
        if args.needed:
            within = [f"{m}." for m in args.patterns]
            for m in args.patterns:
                if m not in files:
                    raise MutateError(f"--needed takes core modules only, not {m!r}")
            patterns = [p for p in needed(ROOT, files) if not within or p.startswith(tuple(within))]
            if not patterns:
                say("every function of the core is measured; nothing is needed")
                return 0
            say(f"{len(patterns)} functions need measuring")
        else:
            patterns = patterns_for(args.patterns, list(files))
        register = check(load_register(REGISTER), files)
        with lock(), term_as_interrupt():
            if args.report:
                state = RunState.saved()
            else:
                state = measure(patterns, args.workers, args.keep, table)
            verdicts = read_verdicts()
            keys = selected(verdicts, patterns)
            if not keys:
                raise MutateError("no mutant matches the selection")
            shards = {_module(k) for k in keys}
            in_shards = [k for k in sorted(verdicts) if _module(k) in shards]
            everything = outcomes_of(in_shards, verdicts)
            excused, problems = match_outcomes(register, everything)
            chosen = set(keys)
            outcomes = [o for o in everything if o.key in chosen]
            result = score(outcomes, {k: e for k, e in excused.items() if k in chosen})
            result.problems = match_outcomes(register, outcomes)[1]
            if state is not None:
                moved = changed_since_staged(files, shards)
                if moved:
                    raise MutateError(
                        f"{', '.join(moved)}: changed since the run was staged; restore it, "
                        "then --report (or measure again)"
                    )
                complete = {o.function: True for o in everything}
                seconds = {o.function: 0.0 for o in everything}
                for o in everything:
                    complete[o.function] &= state.current(o.key, verdicts)
                    seconds[o.function] += verdicts[o.key].duration or 0.0
                for line in record_shards(
                    ROOT,
                    files,
                    everything,
                    excused,
                    problems,
                    complete,
                    seconds,
                    state.commit,
                    state.clean,
                ):
                    say(line)
    except MutateError as exc:
        say(str(exc))
        return 2
    except KeyboardInterrupt:
        say("interrupted; --report shows what was checked, --keep resumes")
        return 130
    print(render(result, _register_name()))
    if result.problems:
        return 2
    return 0 if result.complete else 1


if __name__ == "__main__":
    sys.exit(main())
