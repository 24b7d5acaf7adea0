"""The constant mutants tools/mutate_constants.py makes, and how it picks the tests to run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.tools import ROOT, load_tool

constants = load_tool("constant_mutants")
script = load_tool("mutate_constants")
register = load_tool("mutation_register")
run = load_tool("mutation_run")
MutateError = load_tool("mutation_report").MutateError

MODULE = '''"""Rules."""

import re

__all__ = ["LIMIT"]
LIMIT = 64
_TRIM = "".join(chr(c) for c in range(0x21))
CODE_RE = re.compile(r"[A-Z]{2}-[0-9]{4}")
KINDS = ("bad_format", "extra_text")
NAMES = {"a": "Ä", "b": "—"}
PIECES = [f"-{i:04d}" for i in range(3)]
FLAG = True
PAIR = (1, 1)
Alias = tuple[str, int]


def f():
    return LIMIT
'''


def changes(tmp_path: Path) -> dict[str, list[str]]:
    path = tmp_path / "mod.py"
    path.write_text(MODULE, "utf-8")
    out: dict[str, list[str]] = {}
    for m in constants.constant_mutants(path, "pkg.mod"):
        out.setdefault(m.constant.rpartition(".")[2], []).append(m.change)
        # Each mutant is the file with exactly the constant's value replaced, and still parses.
        text = m.apply(path.read_bytes()).decode("utf-8")
        assert text.replace(m.after, m.before, 1) == MODULE
        compile(text, "mod.py", "exec")
    return out


def test_only_upper_case_module_constants_are_mutated(tmp_path: Path) -> None:
    assert sorted(changes(tmp_path)) == [
        "CODE_RE",
        "FLAG",
        "KINDS",
        "LIMIT",
        "NAMES",
        "PAIR",
        "PIECES",
        "_TRIM",
    ]


def test_numbers_move_by_one_either_way_and_strings_gain_xx(tmp_path: Path) -> None:
    found = changes(tmp_path)
    assert found["LIMIT"] == ["64 -> 65", "64 -> 63"]
    assert found["_TRIM"] == ["\"\" -> 'XXXX'", "0x21 -> 34", "0x21 -> 32"]
    assert found["FLAG"] == ["True -> False"]
    # The same change at two places is told apart by where it is in the value.
    assert found["PAIR"] == [
        "drops 1", "1 -> 2 (at 1)", "1 -> 0 (at 1)", "1 -> 2 (at 4)", "1 -> 0 (at 4)"
    ]  # fmt: skip
    # An f-string's parts have no reliable position: its placeholder's range is mutated instead.
    assert found["PIECES"] == ["3 -> 4", "3 -> 2"]


def test_collections_lose_each_element_and_non_ascii_offsets_are_right(tmp_path: Path) -> None:
    found = changes(tmp_path)
    assert found["KINDS"] == [
        'drops "bad_format"',
        'drops "extra_text"',
        "\"bad_format\" -> 'XXbad_formatXX'",
        "\"extra_text\" -> 'XXextra_textXX'",
    ]
    assert 'drops "a": "Ä"' in found["NAMES"] and "\"—\" -> 'XX—XX'" in found["NAMES"]


def test_a_regular_expression_is_loosened_and_tightened_at_each_boundary(tmp_path: Path) -> None:
    found = changes(tmp_path)["CODE_RE"]
    for loose in ("[A-Z]{2}-[0-9]{3,4}", "[A-Z]{2}-[0-9]{4,5}", "[A-Z]{1,2}-", "[B-Z]", "[0-8]"):
        assert any(loose in c for c in found), loose
    assert len(found) == 12


def test_regex_variants_cover_ranges_anchors_and_alternatives() -> None:
    assert constants.regex_variants("^a{1,2}$") == [
        "^a{0,2}$",
        "^a{2,2}$",
        "^a{1,1}$",
        "^a{1,3}$",
        "a{1,2}$",
        "^a{1,2}",
    ]
    assert constants.regex_variants("ab|cd") == ["cd", "ab"]
    assert "[\ud801-\udfff]" in constants.regex_variants("[\ud800-\udfff]")


def test_the_tests_run_are_the_mutation_selection_that_reads_the_constant() -> None:
    table = run.mutmut_config()
    files = run.core_files(table)
    selection = script.test_files(table)
    assert "tests/run/test_scoring.py" in selection
    assert not any(t.startswith(("tests/notebook/", "tests/tools/")) for t in selection)
    assert "tests/run/test_resume.py" not in selection and "tests/test_limits_docs.py" in selection
    # Read by scoring's tests, and by the tests of modules importing the constant by name.
    readers = script.readers("needlepoint.run.scoring.PROTOCOL_FAILURE_KINDS", files)
    assert {"needlepoint.run.scoring", "needlepoint.analysis.inputs"} <= readers
    own, rest = script.tests_for("needlepoint.run.scoring.CODE_RE", files, selection)
    assert (
        "tests/run/test_scoring_boundaries.py" in own and "tests/run/test_rule_constants.py" in own
    )
    assert "tests/analysis/test_inputs.py" in rest  # inputs imports from scoring
    assert not set(own) & set(rest)


def test_a_module_imported_as_package_plus_name_is_read() -> None:
    # `from needlepoint.design import profiles` never spells the module's dotted name.
    assert script.imported(
        "from needlepoint.design import profiles\n", {"needlepoint.design.profiles"}
    )
    assert script.imported(
        "from needlepoint.design import (\n    protocol,\n    profiles as p,\n)\n",
        {"needlepoint.design.profiles"},
    )
    assert script.imported(
        "import needlepoint.design.profiles.x\n", {"needlepoint.design.profiles"}
    )
    assert script.imported(
        "from needlepoint.design.profiles import A\n", {"needlepoint.design.profiles"}
    )
    assert not script.imported(
        "from needlepoint.design import protocol\n", {"needlepoint.design.profiles"}
    )
    assert not script.imported("from . import profiles\n", {"needlepoint.design.profiles"})
    assert not script.imported(
        "x = 'needlepoint.design.profiles'\n", {"needlepoint.design.profiles"}
    )
    assert not script.imported("def (:\n", {"needlepoint.design.profiles"})
    table = run.mutmut_config()
    files = run.core_files(table)
    assert "needlepoint.design.protocol" in script.readers("needlepoint.design.profiles.X", files)
    own = script.tests_for("needlepoint.design.profiles.X", files, script.test_files(table))[0]
    assert "tests/design/test_profiles_interface.py" in own


def test_every_core_constant_has_tests_to_run() -> None:
    table = run.mutmut_config()
    files = run.core_files(table)
    selection = script.test_files(table)
    for module, path in files.items():
        for m in constants.constant_mutants(path, module):
            assert script.tests_for(m.constant, files, selection), m.constant


class Verdict:
    def __init__(self, mutant: object, status: str) -> None:
        self.mutant, self.status = mutant, status


def test_constant_entries_excuse_exactly_one_surviving_mutant(tmp_path: Path) -> None:
    path = tmp_path / "mod.py"
    path.write_text(MODULE, "utf-8")
    mutants = {m.change: m for m in constants.constant_mutants(path, "pkg.mod")}
    entry = register.ConstantEntry(
        "LIMIT", "64 -> 65", "the limit is never reached", module="pkg.mod"
    )
    reg = register.ConstantRegister((entry,), tmp_path)
    survived = [Verdict(mutants["64 -> 65"], "survived"), Verdict(mutants["64 -> 63"], "killed")]
    assert reg.match(survived, ["pkg.mod"]) == ([], {mutants["64 -> 65"]})
    killed = [Verdict(mutants["64 -> 65"], "killed")]
    assert reg.match(killed, ["pkg.mod"])[0] == [
        "pkg.mod.LIMIT: 64 -> 65: the mutant is killed: remove the entry"
    ]
    assert reg.match([], ["pkg.mod"])[0] == [
        "pkg.mod.LIMIT: 64 -> 65: matches 0 constant mutants, not one"
    ]
    assert reg.match([], ["pkg.other"]) == ([], set())  # not in this run


def test_constant_entries_need_their_fields_and_are_found_by_name(tmp_path: Path) -> None:
    path = tmp_path / "tests" / "reg.toml"
    path.parent.mkdir()
    source = tmp_path / "mod.py"
    source.write_text(MODULE, "utf-8")
    other = tmp_path / "other.py"
    other.write_text("LIMIT = 3\n")
    (tmp_path / "bare.py").write_text("def f():\n    return 1\n")
    path.write_text('[[constant]]\nconstant = "LIMIT"\nchange = "64 -> 65"\n')
    with pytest.raises(MutateError, match="constant entry 1 needs reason"):
        register.load_constant_register(path, {"pkg.mod": source})
    path.write_text('[[constant]]\nconstant = "LIMIT"\nchange = "64 -> 65"\nreason = "r"\n')
    with pytest.raises(MutateError, match="LIMIT is a rule constant of no mutated module"):
        register.load_constant_register(path, {"pkg.bare": tmp_path / "bare.py"})
    # Found wherever it is now; of two modules with a LIMIT, the one that has the change.
    (entry,) = register.load_constant_register(path, {"pkg.o": other, "pkg.m": source}).entries
    assert (entry.module, entry.label) == ("pkg.m", "pkg.m.LIMIT: 64 -> 65")
    other.write_text(MODULE, "utf-8")
    with pytest.raises(MutateError, match="LIMIT is a rule constant of 2 mutated modules"):
        register.load_constant_register(path, {"pkg.o": other, "pkg.m": source})
    path.write_text('[[constant]]\nconstant = "pkg.m.LIMIT"\nchange = "64 -> 65"\nreason = "r"\n')
    with pytest.raises(MutateError, match="not by its path"):
        register.load_constant_register(path, {"pkg.m": source})


def test_unknown_modules_and_too_many_workers_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert script.main(["needlepoint.run.loop", "--list"]) == 2
    assert "'needlepoint.run.loop' is not a core module" in capsys.readouterr().err
    assert script.main(["--workers", "3"]) == 2
    assert capsys.readouterr().err == "mutate: --workers must be 1 or 2: the machine is shared\n"


def test_list_names_each_mutant_by_constant_and_change(capsys: pytest.CaptureFixture[str]) -> None:
    assert script.main(["needlepoint.run.scoring", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        "needlepoint.run.scoring.CODE_RE: r\"[A-Z]{2}-[0-9]{4}\" -> '[A-Z]{2}-[0-9]{3,4}'" in lines
    )
    assert "needlepoint.run.scoring._JAVA_TRIM_CHARS: 0x21 -> 32" in lines
    assert str(ROOT) not in "\n".join(lines)


def test_the_top_level_tests_mutmut_leaves_out_by_name_still_run_for_constants() -> None:
    files = script.test_files(run.mutmut_config())
    assert "tests/test_limits_docs.py" in files and "tests/test_jsonio.py" in files
    assert not any(f.startswith("tests/notebook/") for f in files)


def test_a_run_is_out_of_ctrl_c_reach_yet_what_its_tests_start_can_be_interrupted() -> None:
    """The forked run leaves the terminal's process group, and a process a test starts gets
    SIGINT working even when this run was started in the background (SIGINT ignored), as the
    tests that interrupt a real run need."""
    probe = "import signal, sys; sys.exit(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's code runs in the forked process
        code = 9
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a job started with & inherits it
            script._away_from_ctrl_c()
            started = subprocess.run([sys.executable, "-c", probe], check=False).returncode
            code = started + (2 if os.getpgrp() != os.getpid() else 0)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
