"""Every sub-command against damaged input files: exit 0, 1 or 2 (3 for a run a stop rule
ended), one line when refused, never a traceback, and never the last-resort guard (exit 70).

A property-based test (hypothesis, derandomized, a fixed example budget) copies a fixture (a
small prepared folder, a faulty simulated run with results.csv, a second run of the same
design, a sweep file, the contamination inputs with a frozen manifest, a simulated pilot),
damages one file in one way (support.mutations: truncation, bit flips, a BOM, bytes that are not
UTF-8, a value of the wrong type, a forger's re-chained journal, 100,000-deep nesting, an empty
file, a missing file, a folder in its place, a link to an outside copy, a FIFO, 96 MiB more)
and runs in-process every sub-command that reads it (support.fuzz's COMMANDS, the one list to
extend when a sub-command is added). Besides the exit contract: nothing is written through a
planted link, a FIFO blocks nobody, a 96 MiB file costs no command more than PEAK_LIMIT, and a
command that would serve a packaged model refuses a damaged input before serving one.
"""

from __future__ import annotations

import shutil
import signal
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from support import fuzz, mutations

from needlepoint.cli.app import build_parser

# Examples per group, fixed: each runs every command that reads the group (about 0.3-1 s each
# on an idle core), so the whole file stays near a minute on two busy cores under -n 2.
BUDGET = {
    "prepared": 14,
    "run": 18,
    "contamination": 30,
    "sweep": 4,
    "declaration": 8,
    "pilot": 12,
    "inspect": 10,
    "transcripts": 16,
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> fuzz.Paths:
    return fuzz.build_fixture(tmp_path_factory.mktemp("fuzz") / "pristine")


# Peak Python memory one command may use on a file extended by 96 MiB (``bloat``): a reader
# refuses the file by its size, or streams it one record (at most 64 MiB) at a time.
PEAK_LIMIT = 192 << 20
# Seconds one command may take on a damaged copy: a FIFO read blindly would block forever.
STUCK_S = 240


class Stuck(Exception):
    """A command ran past STUCK_S (a FIFO read blindly, say)."""


def _stuck(signum: int, frame: object) -> None:
    raise Stuck(f"still running after {STUCK_S} s")


def _run(argv: list[str], measure: bool) -> tuple[int, str, str, int]:
    """One command, bounded in time, with its peak traced memory when ``measure``."""
    old = signal.signal(signal.SIGALRM, _stuck)
    signal.alarm(STUCK_S)
    if measure:
        tracemalloc.start()
    try:
        code, out, err = fuzz.run_cli(argv)
        peak = tracemalloc.get_traced_memory()[1] if measure else 0
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        if measure:
            tracemalloc.stop()
    return code, out, err, peak


def _outside(work: Path) -> dict[str, bytes]:
    folder = work / mutations.OUTSIDE
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.is_dir() else {}


def _check(pristine: fuzz.Paths, work: Path, group: str, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(fuzz.GROUPS[group]), label="file")
    how = data.draw(st.sampled_from(mutations.MUTATIONS), label="mutation")
    odd = data.draw(st.sampled_from(mutations.ODD_VALUES), label="value")
    paths = fuzz.copy_fixture(pristine, work / "copy")
    target = paths.file(group, name)
    mutations.mutate(target, how, lambda n: data.draw(st.integers(0, max(n - 1, 0))), odd)
    outside = _outside(work)
    scratch = work / "scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    codes: dict[str, int] = {}
    with fuzz.no_servers():
        for command in [c for c in fuzz.COMMANDS if group in c.reads]:
            argv = command.argv(paths, scratch)
            code, out, err, peak = _run(argv, how == "bloat")
            what = f"{name} ({how}, {odd!r:.40}): `{' '.join(argv[:2])}`"
            bad = fuzz.bad_outcome(argv, code, out, err)
            assert bad is None, f"{what} {bad}"
            assert peak < PEAK_LIMIT, f"{what} peaked at {peak / 2**20:.0f} MiB"
            served = fuzz.NO_SERVER in err
            reader = fuzz.REFUSES_BEFORE_SERVING.get(command.name)
            if reader is not None and codes.get(reader, 0) != 0:
                assert not served, f"{what} started a server on input {reader} refuses"
            if command.name == "local-compare" and code == 2 and not served:
                assert not (scratch / "lc").exists(), f"{what} created its folder, then refused"
            codes.setdefault(command.name, code)
    assert _outside(work) == outside, f"{name} ({how}): a command wrote through a link"


def _make(group: str):
    # No shrinking: a failure already names the file, the mutation and every draw, and
    # shrinking a multi-command example can take minutes.
    @settings(
        max_examples=BUDGET[group],
        derandomize=True,
        deadline=None,
        phases=(Phase.explicit, Phase.generate),
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(data=st.data())
    def test(pristine: fuzz.Paths, tmp_path: Path, data: st.DataObject) -> None:
        _check(pristine, tmp_path, group, data)

    test.__name__ = f"test_damaged_{group}_inputs_never_crash_a_command"
    test.__doc__ = f"Each {group} input file, damaged, under every command that reads it."
    return test


test_damaged_prepared_inputs_never_crash_a_command = _make("prepared")
test_damaged_run_inputs_never_crash_a_command = _make("run")
test_damaged_contamination_inputs_never_crash_a_command = _make("contamination")
test_damaged_sweep_inputs_never_crash_a_command = _make("sweep")
test_damaged_declaration_inputs_never_crash_a_command = _make("declaration")
test_damaged_pilot_inputs_never_crash_a_command = _make("pilot")
test_damaged_inspect_inputs_never_crash_a_command = _make("inspect")
test_damaged_transcripts_inputs_never_crash_a_command = _make("transcripts")


def _sub_commands(parser, prefix: str = "") -> set[str]:
    import argparse

    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {prefix.strip()}
    return set().union(*(_sub_commands(p, f"{prefix} {n}") for n, p in subs[0].choices.items()))


def test_every_sub_command_is_fuzzed() -> None:
    """A sub-command added later fails here until COMMANDS (or NO_INPUT) lists it."""
    fuzzed = {c.name for c in (*fuzz.COMMANDS, *fuzz.NO_INPUT)}
    assert not fuzzed & set(fuzz.NOT_FUZZED) and not fuzz.NOT_FUZZED
    assert fuzzed == _sub_commands(build_parser())
    # Every group's files are read by at least one command besides evidence-diff.
    for group in fuzz.GROUPS:
        assert any(group in c.reads and c.name != "evidence-diff" for c in fuzz.COMMANDS)


def test_evidence_diff_sees_the_damage(pristine: fuzz.Paths, tmp_path: Path) -> None:
    paths = fuzz.copy_fixture(pristine, tmp_path / "copy")
    mutations.mutate(paths.file("run", "journal.jsonl"), "truncate", lambda n: n // 2, None)
    code, out, _ = fuzz.run_cli(["evidence-diff", str(pristine.root), str(paths.root)])
    assert code == 1 and "differs: run/journal.jsonl" in out


def test_the_last_resort_guard_is_one_line_with_its_own_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The guard works (so the assertions above can tell when it is reached)."""
    from needlepoint.cli import design

    def boom(args: object) -> int:
        raise RuntimeError("unforeseen\nsecond line")

    monkeypatch.setattr(design, "_cmd_verify", boom)
    code, out, err = fuzz.run_cli(["verify", "x"])
    assert code == 70 and err.count("\n") == 1 and "internal error: RuntimeError" in err
    assert fuzz.bad_outcome(["verify"], code, out, err) is not None


def test_a_stop_rule_status_is_accepted_from_a_run_only() -> None:
    assert fuzz.bad_outcome(["run"], 3, "", "") is None
    assert fuzz.bad_outcome(["audit-run"], 3, "", "") is not None
    assert fuzz.bad_outcome(["verify"], 2, "", "a\nb\n") is not None
    assert fuzz.bad_outcome(["verify"], 1, "Traceback (most recent call last):", "") is not None


def test_commands_without_an_input_file_keep_the_contract(
    pristine: fuzz.Paths, tmp_path: Path
) -> None:
    with fuzz.no_servers():
        for command in fuzz.NO_INPUT:
            argv = command.argv(pristine, tmp_path)
            code, out, err = fuzz.run_cli(argv)
            assert fuzz.bad_outcome(argv, code, out, err) is None, (argv, code, err)
    assert not (tmp_path / "pe").exists(), "pipeline refused before it made a folder"


# Values no numeric flag accepts: each is refused before any work (one line, exit 2).
HOSTILE_NUMBERS = ("1e308", "-1e308", "-1", "nan", "inf", "9" * 400)
# Flags whose numbers are parsed after argparse (lists, shapes): they are checked too.
NUMBER_LISTS = ("--lengths", "--cases", "--effects")


def _numeric_flags() -> list[tuple[str, str]]:
    """(sub-command, flag) for every flag of every sub-command that takes a number."""
    import argparse

    out = []

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs:
            for name, child in subs[0].choices.items():
                walk(child, f"{prefix} {name}".strip())
            return
        for action in parser._actions:
            flag = next((o for o in action.option_strings if o.startswith("--")), None)
            typed = (
                action.type not in (None, str) and getattr(action.type, "__name__", "") != "Path"
            )
            if flag and (typed or flag in NUMBER_LISTS) and flag != "--help":
                out.append((prefix, flag))

    walk(build_parser(), "")
    return sorted(out)


NUMERIC_FLAGS = _numeric_flags()


def _base(pristine: fuzz.Paths, scratch: Path, name: str) -> list[str]:
    command = next(c for c in (*fuzz.COMMANDS, *fuzz.NO_INPUT) if c.name == name)
    return command.argv(pristine, scratch)


@settings(
    max_examples=60,
    derandomize=True,
    deadline=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(pair=st.sampled_from(NUMERIC_FLAGS), value=st.sampled_from(HOSTILE_NUMBERS))
def test_every_numeric_flag_refuses_hostile_numbers_before_any_work(
    pristine: fuzz.Paths, tmp_path: Path, pair: tuple[str, str], value: str
) -> None:
    name, flag = pair
    scratch = tmp_path / "scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    argv = _base(pristine, scratch, name)
    if flag in argv:
        argv[argv.index(flag) + 1] = value
    else:
        argv = [*argv, f"{flag}={value}"]
    with fuzz.no_servers():
        code, out, err, _ = _run(argv, False)
    assert fuzz.bad_outcome(argv, code, out, err) is None, (argv, err)
    assert code == 2 and fuzz.NO_SERVER not in err, (name, flag, value, code, err)
    assert not [p for p in scratch.iterdir()], f"{name} {flag} {value} wrote before refusing"


def test_the_flag_fuzz_sees_every_numeric_flag() -> None:
    flags = set(NUMERIC_FLAGS)
    assert {("run", "--timeout-s"), ("run", "--min-gap-s"), ("calibrate", "--max-cases")} <= flags
    assert {
        ("local-pilot", "--allow"),
        ("local-model serve", "--port"),
        ("power", "--seed"),
    } <= flags
