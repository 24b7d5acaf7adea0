"""make mutate's counting rules, register and configuration, without running a single mutant."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


report = _load("mutation_report")
mutate = _load("mutate")
MutateError = report.MutateError

DIFF = """--- src/needlepoint/analysis/decision.py
+++ src/needlepoint/analysis/decision.py
@@ -1,3 +1,3 @@
 def decide(numerators, denominator, params):
-    if n < minimum:
+    if n <= minimum:
         return None"""


def outcome(key: str, status: str, diff: str = DIFF):
    return report.Outcome.of(key, status, diff)


def entry(function: str = "needlepoint.analysis.decision.decide", **kw: str):
    fields = {"before": "if n < minimum:", "after": "if n <= minimum:", "reason": "r"} | kw
    return report.Entry(function=function, **fields)


@pytest.mark.parametrize(
    ("key", "function", "number"),
    [
        ("needlepoint.run.scoring.x_classify__mutmut_12", "needlepoint.run.scoring.classify", 12),
        (
            "needlepoint.design.java_random.xǁJavaRandomǁnextInt__mutmut_3",
            "needlepoint.design.java_random.JavaRandom.nextInt",
            3,
        ),
        ("a.x__private__mutmut_1", "a._private", 1),
    ],
)
def test_function_of_reads_mutmut_names(key: str, function: str, number: int) -> None:
    assert report.function_of(key) == (function, number)


@pytest.mark.parametrize(
    "key", ["x_f__mutmut_1", "a.f__mutmut_1", "a.x_f", "a.x_f__mutmut_b", "a.xǁCǁDǁf__mutmut_1"]
)
def test_function_of_refuses_other_names(key: str) -> None:
    with pytest.raises(MutateError, match="not a mutmut mutant name"):
        report.function_of(key)


def test_changed_lines_are_stripped_and_headers_skipped() -> None:
    assert report.changed_lines(DIFF) == ("if n < minimum:", "if n <= minimum:")
    two = "-    a = 1\n-    b = 2\n+    a = 2"
    assert report.changed_lines(two) == ("a = 1\nb = 2", "a = 2")
    assert report.changed_lines("") == ("", "")


def test_the_score_counts_kills_among_non_equivalent_mutants() -> None:
    key = "needlepoint.analysis.decision.x_decide__mutmut_{}"
    outcomes = [
        outcome(key.format(1), "killed"),
        outcome(key.format(2), "timeout"),
        outcome(key.format(3), "segfault"),
        outcome(key.format(4), "survived"),  # the registered change: set apart
        outcome(key.format(5), "no tests", "-    x = 1\n+    x = 2"),
        outcome(key.format(6), "survived", "-    y = 1\n+    y = None"),
    ]
    r = report.score(outcomes, (entry(),))
    assert (r.killed, r.counted, r.complete, r.stale) == (3, 5, True, [])
    assert [o.number for o, _ in r.equivalent] == [4]
    assert [o.number for o in r.survivors["needlepoint.analysis.decision.decide"]] == [5, 6]
    assert r.score_line() == "killed 3 of 5 (60.0%)"
    text = report.render(r, "reg.toml")
    assert text.splitlines()[-1] == "killed 3 of 5 (60.0%)"
    assert text.splitlines()[-2] == (
        "1 killed, 1 timed out, 1 crashed, 1 survived, 1 reached by no test; "
        "1 registered as equivalent (reg.toml) and not counted."
    )
    assert "    #5 [reached by no test]  x = 1\n        -> x = 2" in text
    assert "    #6  y = 1\n        -> y = None" in text


def test_a_killed_mutant_is_counted_even_if_registered_and_the_entry_is_stale() -> None:
    r = report.score(
        [outcome("needlepoint.analysis.decision.x_decide__mutmut_1", "killed")], (entry(),)
    )
    assert (r.killed, r.counted, r.equivalent) == (1, 1, [])
    assert r.stale == [entry()]
    assert "Stale register entry (reg.toml): needlepoint.analysis.decision.decide" in (
        report.render(r, "reg.toml")
    )


def test_entries_for_functions_outside_the_selection_are_not_stale() -> None:
    r = report.score(
        [outcome("needlepoint.run.scoring.x_classify__mutmut_1", "killed")], (entry(),)
    )
    assert r.stale == []


def test_an_entry_must_match_function_and_both_lines() -> None:
    o = outcome("needlepoint.analysis.decision.x_decide__mutmut_1", "survived")
    assert entry().matches(o)
    assert not entry(after="if n > minimum:").matches(o)
    assert not entry(before="if n > minimum:").matches(o)
    assert not entry(function="needlepoint.analysis.decision.other").matches(o)


def test_unchecked_mutants_make_the_run_incomplete() -> None:
    r = report.score([outcome("a.x_f__mutmut_1", "not checked")], ())
    assert not r.complete and r.counted == 0
    assert "1 mutants were never checked" in report.render(r, "reg.toml")
    assert r.score_line() == "killed 0 of 0 (no mutants in the selection)"


def test_an_unknown_status_is_refused() -> None:
    with pytest.raises(MutateError, match="unknown mutmut status 'odd'"):
        report.score([outcome("a.x_f__mutmut_1", "odd")], ())


def test_register_entries_need_all_four_fields(tmp_path: Path) -> None:
    path = tmp_path / "reg.toml"
    path.write_text('[[equivalent]]\nfunction = "a.f"\nbefore = "x"\nafter = "y"\n')
    with pytest.raises(MutateError, match=r"^reg.toml: equivalent entry 1 needs reason$"):
        report.load_register(path)
    path.write_text('[[equivalent]]\nfunction="a.f"\nbefore="x"\nafter="y"\nreason="r"\nnote="n"\n')
    with pytest.raises(MutateError, match="entry 1 unknown field note"):
        report.load_register(path)
    path.write_text('[[equivalent]]\nfunction="a.f"\nbefore="x"\nafter="y"\nreason="r"\n' * 2)
    with pytest.raises(MutateError, match=r"a\.f is registered twice for one change"):
        report.load_register(path)
    path.write_text("[[equivalent]\n")
    with pytest.raises(MutateError, match="not valid TOML"):
        report.load_register(path)
    with pytest.raises(MutateError, match="register is missing"):
        report.load_register(tmp_path / "absent.toml")


def test_the_committed_register_names_only_core_functions() -> None:
    core = mutate.core_modules(mutate.mutmut_config())
    entries = report.load_register(mutate.REGISTER)
    for e in entries:
        assert any(e.function.startswith(m + ".") for m in core), e.function
        assert e.before != e.after and len(e.reason) > 20, e


def test_the_core_modules_exist_and_the_config_is_what_staging_expects() -> None:
    table = mutate.mutmut_config()
    assert all((ROOT / p).is_file() for p in table["only_mutate"])
    assert "needlepoint.analysis.decision" in mutate.core_modules(table)
    assert "--ignore-glob=tests/test_*.py" in table["pytest_add_cli_args_test_selection"]


def test_mutmut_config_refuses_what_staging_cannot_handle(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.other]\n")
    with pytest.raises(MutateError, match=r"has no \[tool.mutmut\] table"):
        mutate.mutmut_config(path)
    path.write_text('[tool.mutmut]\nsource_paths = ["src"]\nonly_mutate = ["src/a.py"]\n')
    with pytest.raises(MutateError, match="source_paths must be"):
        mutate.mutmut_config(path)
    path.write_text('[tool.mutmut]\nsource_paths = ["lib"]\n')
    with pytest.raises(MutateError, match="only_mutate must list"):
        mutate.mutmut_config(path)


def test_patterns_name_core_modules_or_pass_globs_through() -> None:
    core = ["needlepoint.run.scoring", "needlepoint.analysis.power"]
    assert mutate.patterns_for([], core) == []
    assert mutate.patterns_for(["needlepoint.run.scoring"], core) == ["needlepoint.run.scoring.*"]
    glob = "needlepoint.run.scoring.x_classify*"
    assert mutate.patterns_for([glob], core) == [glob]
    assert mutate.patterns_for(["needlepoint.analysis*"], core) == ["needlepoint.analysis*"]
    with pytest.raises(MutateError, match=r"'needlepoint.run.loop' names no core module"):
        mutate.patterns_for(["needlepoint.run.loop"], core)


@pytest.mark.parametrize(
    ("log", "line"),
    [
        (
            "x\nFAILED tests/a.py::t - AssertionError: no\nfailed to collect stats. runner",
            "a test failed in mutmut's first run, before any mutant: FAILED tests/a.py::t",
        ),
        (
            "Failed to run clean test\n",
            "a test failed in mutmut's clean run, with no mutant active",
        ),
        ("boom", "mutmut run stopped (exit 3)"),
    ],
)
def test_a_failed_run_is_one_line(log: str, line: str) -> None:
    assert mutate.failure(log, 3) == line


def test_bad_workers_and_unknown_modules_exit_2_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert mutate.main(["--workers", "3", "--report"]) == 2
    assert capsys.readouterr().err == "mutate: --workers must be 1 or 2: the machine is shared\n"
    assert mutate.main(["needlepoint.nope", "--report"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_second_run_in_the_same_checkout_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mutate, "LOCK", tmp_path / "build" / "mutation.lock")
    busy = pytest.raises(MutateError, match="another make mutate is running")
    with mutate._lock(), busy, mutate._lock():
        pass
    with mutate._lock():  # released again
        pass
