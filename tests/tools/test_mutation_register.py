"""The equivalent-mutant register cannot hide a bug: every way an entry can go wrong fails the run.

The entries are checked against mutants that mutmut's own generator makes of a small module, so
these tests see exactly what ``make mutate`` sees, without running a single mutant.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.tools import ROOT, load_tool

report = load_tool("mutation_report")
register = load_tool("mutation_register")
run = load_tool("mutation_run")
mutate = load_tool("mutate")
MutateError = report.MutateError

MODULE = '''"""A module for the register's tests."""

LIMIT = 3


def clip(n):
    if n < LIMIT:
        return n
    return LIMIT


def twice(body, wrap):
    if wrap:
        text = body.decode("ascii")
    text = body.decode("ascii")
    return text
'''
CLIP = "clip"  # as its module names it
BEFORE, AFTER = "    if n < LIMIT:", "    if n <= LIMIT:"


@pytest.fixture
def project(tmp_path: Path) -> tuple[dict[str, Path], Path]:
    """A repository root with one mutated module, pkg.mod, and a file another entry relies on."""
    (tmp_path / "lib" / "pkg").mkdir(parents=True)
    (tmp_path / "lib" / "pkg" / "mod.py").write_text(MODULE)
    (tmp_path / "lib" / "pkg" / "other.py").write_text("ORDER = 'contiguous'\n")
    return {"pkg.mod": tmp_path / "lib" / "pkg" / "mod.py"}, tmp_path


def entry(function: str = CLIP, before: str = BEFORE, after: str = AFTER, **kw: object):
    return register.Entry(function, before, after, "why no input can tell", **kw)


def problems(project: tuple[dict[str, Path], Path], *entries: object) -> list[str]:
    files, root = project
    return register.check_register(entries, files, root)


def test_an_entry_naming_exactly_one_mutant_holds(project) -> None:
    assert problems(project, entry()) == []
    files, root = project
    (found,), none = register.resolve_register([entry()], files, root)
    assert none == [] and found.function == "pkg.mod.clip"  # where it is now


def test_an_entry_follows_its_function_into_another_module(project) -> None:
    files, root = project
    merged = root / "lib" / "pkg" / "merged.py"
    merged.write_text("def other(x):\n    return x + 1\n\n\n" + MODULE)
    files["pkg.mod"].unlink()
    moved = {"pkg.merged": merged}
    (found,), none = register.resolve_register([entry()], moved, root)
    assert none == [] and found.function == "pkg.merged.clip"


def test_an_entry_is_sought_in_every_function_of_its_name(project) -> None:
    files, root = project
    files["pkg.twin"] = root / "lib" / "pkg" / "twin.py"
    files["pkg.twin"].write_text(MODULE.replace("LIMIT", "CAP"))
    assert problems(project, entry()) == []  # the line is only in pkg.mod's clip
    files["pkg.twin"].write_text(MODULE)
    assert problems(project, entry()) == [
        f"{CLIP}: {BEFORE.strip()!r} -> {AFTER.strip()!r}: matches 2 mutants: it must name one"
    ]


def test_a_stale_entry_fails_the_run(project) -> None:
    # The line as it was before someone changed it, or a replacement mutmut never makes.
    assert problems(project, entry(before="    if n < 4:", after="    if n <= 4:")) == [
        f"{CLIP}: 'if n < 4:' -> 'if n <= 4:': matches no mutant: the line changed"
    ]
    assert problems(project, entry(after="    if n == LIMIT:"))[0].endswith("the line changed")


def test_a_line_moved_in_or_out_of_a_block_no_longer_matches(project) -> None:
    assert (
        "matches no mutant"
        in problems(project, entry(before="if n < LIMIT:", after="if n <= LIMIT:"))[0]
    )
    assert "matches no mutant" in problems(project, entry(before="        if n < LIMIT:"))[0]


def test_an_ambiguous_entry_fails_the_run(project) -> None:
    deep = '        text = body.decode("ascii")', '        text = body.decode("ASCII")'
    flat = '    text = body.decode("ascii")', '    text = body.decode("ASCII")'
    # Told apart by their indentation, each line names one mutant...
    assert problems(project, entry("twice", *deep), entry("twice", *flat)) == []
    # ...but the same line twice in one function: an entry cannot say which it excuses.
    files, _ = project
    files["pkg.mod"].write_text(
        MODULE.replace("        text = body", "        pass\n    text = body")
    )
    assert problems(project, entry("twice", *flat)) == [
        "twice: 'text = body.decode(\"ascii\")' -> 'text = body.decode(\"ASCII\")': "
        "matches 2 mutants: it must name one"
    ]


def test_an_entry_outside_the_mutated_modules_or_no_longer_in_the_code_fails(project) -> None:
    _, root = project
    (root / "lib" / "pkg" / "other.py").write_text("def clamp(n):\n    return n < 3\n")
    assert problems(project, entry("clamp")) == [
        f"clamp: {BEFORE.strip()!r} -> {AFTER.strip()!r}: "
        "clamp is in no mutated module ([tool.mutmut] only_mutate)"
    ]


def test_a_non_local_entry_fails_when_the_code_it_relies_on_changes(project) -> None:
    _, root = project
    relies = (register.Depends("lib/pkg/other.py", "ORDER = 'contiguous'"),)
    assert problems(project, entry(depends=relies)) == []
    (root / "lib" / "pkg" / "other.py").write_text("ORDER = 'shuffled'\n")
    assert problems(project, entry(depends=relies)) == [
        f"{CLIP}: {BEFORE.strip()!r} -> {AFTER.strip()!r}: its reason depends on "
        "lib/pkg/other.py: \"ORDER = 'contiguous'\", which changed: re-check the reason"
    ]
    (root / "lib" / "pkg" / "other.py").unlink()
    assert "which changed" in problems(project, entry(depends=relies))[0]


def test_a_line_relied_on_in_a_file_merged_away_is_sought_in_the_library(project) -> None:
    _, root = project
    relies = (register.Depends("lib/pkg/other.py", "ORDER = 'contiguous'"),)
    (root / "lib" / "pkg" / "other.py").unlink()
    (root / "lib" / "pkg" / "merged.py").write_text("X = 1\nORDER = 'contiguous'\n")
    assert problems(project, entry(depends=relies)) == []
    (root / "lib" / "pkg" / "again.py").write_text("ORDER = 'contiguous'\n")
    assert "occurs 2 times: re-check the reason" in problems(project, entry(depends=relies))[0]


def outcome(n: int, status: str, change: tuple[str, str] = (BEFORE, AFTER)):
    return report.Outcome.of(f"pkg.mod.x_clip__mutmut_{n}", status, change)


FOUND = "pkg.mod.clip"  # an entry found in the code: its function's full name


def test_a_surviving_mutant_named_by_one_entry_is_excused() -> None:
    excused, found = register.match_outcomes([entry(FOUND)], [outcome(1, "survived")])
    assert list(excused) == ["pkg.mod.x_clip__mutmut_1"] and found == []


@pytest.mark.parametrize(
    ("status", "says"),
    [
        ("killed", "#1 is killed: remove the entry"),
        ("timeout", "#1 is timed out: remove the entry"),
        ("no tests", "#1 is reached by no test: only a mutant that ran its tests and survived"),
        ("suspicious", "#1 is suspicious: only a mutant that ran its tests and survived"),
        ("skipped", "#1 is skipped: only a mutant that ran its tests and survived"),
    ],
)
def test_no_other_mutant_can_be_excused(status: str, says: str) -> None:
    excused, found = register.match_outcomes([entry(FOUND)], [outcome(1, status)])
    assert excused == {} and len(found) == 1 and says in found[0]


def test_at_run_time_an_entry_matching_zero_or_two_mutants_fails() -> None:
    other = outcome(2, "survived", ("    return LIMIT", "    return None"))
    _, found = register.match_outcomes([entry(FOUND)], [other])
    assert found == [
        f"{FOUND}: {BEFORE.strip()!r} -> {AFTER.strip()!r}: matches no mutant: the line changed"
    ]
    both = [outcome(1, "survived"), outcome(3, "survived")]
    _, found = register.match_outcomes([entry(FOUND)], both)
    assert found[0].endswith("matches 2 mutants")


def test_an_unchecked_mutant_is_neither_excused_nor_a_problem() -> None:
    assert register.match_outcomes([entry(FOUND)], [outcome(1, "not checked")]) == ({}, [])


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "reg.toml"
    path.write_text(text)
    return path


def test_entries_need_their_fields_in_exact_form(tmp_path: Path) -> None:
    full = 'function = "f"\nbefore = "    x"\nafter = "    y"\nreason = "r"\n'
    cases = {
        "[[equivalent]]\n" + full.replace('reason = "r"\n', ""): "entry 1 needs reason",
        f"[[equivalent]]\n{full}note = 'n'\n": "entry 1 unknown field note",
        "[[equivalent]]\n" + full.replace('"    y"', '"  "'): "entry 1 needs after",
        "[[equivalent]]\n" + full.replace('"    x"', '""'): "entry 1 needs before",
        f"[[equivalent]]\n{full}" * 2: r"f is registered twice for one change",
        "[[equivalent]]\n" + full.replace('"f"', '"pkg.mod.f"'): "not by the module's path",
        full.replace('"    x"', '"x"').join(
            ["[[equivalent]]\n", ""]
        ): "exact lines, with their indentation",
        full.replace('"    y"', '"    x"').join(
            ["[[equivalent]]\n", ""]
        ): "before and after are the same",
        f"[[equivalent]]\n{full}depends = []\n": "depends must be a list",
        f"[[equivalent]]\n{full}[[equivalent.depends]]\nfile = 'a'\n": "exactly file and line",
        "[[equivalent]\n": "not valid TOML",
        "[[other]]\nx = 1\n": "unknown table other",
    }
    for text, message in cases.items():
        with pytest.raises(MutateError, match=message):
            register.load_register(write(tmp_path, text))
    with pytest.raises(MutateError, match="register is missing"):
        register.load_register(tmp_path / "absent.toml")


def test_an_empty_after_names_a_removed_line(tmp_path: Path) -> None:
    text = f'[[equivalent]]\nfunction = "{CLIP}"\nbefore = "    x=1,"\nafter = ""\nreason = "r"\n'
    (e,) = register.load_register(write(tmp_path, text))
    assert (e.before, e.after) == ("    x=1,", "")
    removed = outcome(1, "survived", ("    x=1,", ""))
    e = register.replace(e, function=FOUND)
    assert register.match_outcomes([e], [removed]) == ({removed.key: e}, [])


def test_a_stale_entry_stops_make_mutate_before_any_mutant_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = (
        '[[equivalent]]\nfunction = "classify"\n'
        'before = "    if n < 2:"\nafter = "    if n <= 2:"\nreason = "gone"\n'
    )
    monkeypatch.setattr(mutate, "REGISTER", write(tmp_path, stale))
    assert mutate.main(["needlepoint.run.scoring", "--report"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("mutate: ") and "matches no mutant: the line changed" in err[0]
    assert err[-1] == "mutate: the register does not hold for this code (1 entries)"


def test_the_committed_register_holds_for_the_code_as_it_is() -> None:
    entries = register.load_register(run.REGISTER)
    files = run.core_files(run.mutmut_config())
    assert register.check_register(entries, files, ROOT) == []
    for e in entries:
        assert len(e.reason) > 20, e.label
