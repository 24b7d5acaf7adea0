"""Every sub-command against damaged input files: exit 0, 1 or 2 (3 for a run a stop rule
ended), one line when refused, never a traceback, and never the last-resort guard (exit 70).

A property-based test (hypothesis, derandomized, a fixed example budget) copies a fixture (a
small prepared folder, a faulty simulated run with results.csv, a second run of the same
design, a sweep file, the contamination inputs with a frozen manifest), damages one file in one
way (support.mutations: truncation, bit flips, a BOM, bytes that are not UTF-8, a value of the
wrong type, a forger's re-chained journal, 100,000-deep nesting, an empty file, a missing file,
a folder in its place) and runs in-process every sub-command that reads it (support.fuzz's
COMMANDS, the one list to extend when a sub-command is added).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from support import fuzz, mutations

from needlepoint.cli.app import build_parser

# Examples per group, fixed: each runs every command that reads the group (about 0.3-1 s each
# on an idle core), so the whole file stays near a minute on two busy cores under -n 2.
BUDGET = {"prepared": 12, "run": 16, "contamination": 30, "sweep": 3, "declaration": 8}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> fuzz.Paths:
    return fuzz.build_fixture(tmp_path_factory.mktemp("fuzz") / "pristine")


def _check(pristine: fuzz.Paths, work: Path, group: str, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(fuzz.GROUPS[group]), label="file")
    how = data.draw(st.sampled_from(mutations.MUTATIONS), label="mutation")
    odd = data.draw(st.sampled_from(mutations.ODD_VALUES), label="value")
    paths = fuzz.copy_fixture(pristine, work / "copy")
    target = paths.file(group, name)
    mutations.mutate(target, how, lambda n: data.draw(st.integers(0, max(n - 1, 0))), odd)
    scratch = work / "scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    for argv in fuzz.commands(paths, group, scratch):
        code, out, err = fuzz.run_cli(argv)
        bad = fuzz.bad_outcome(argv, code, out, err)
        assert bad is None, f"{name} ({how}, {odd!r:.40}): `{' '.join(argv[:2])}` {bad}"


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


def _sub_commands(parser, prefix: str = "") -> set[str]:
    import argparse

    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {prefix.strip()}
    return set().union(*(_sub_commands(p, f"{prefix} {n}") for n, p in subs[0].choices.items()))


def test_every_sub_command_is_fuzzed_or_excused() -> None:
    """A sub-command added later fails here until COMMANDS or NOT_FUZZED lists it."""
    fuzzed = {c.name for c in fuzz.COMMANDS}
    assert not fuzzed & set(fuzz.NOT_FUZZED)
    assert fuzzed | set(fuzz.NOT_FUZZED) == _sub_commands(build_parser())
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
