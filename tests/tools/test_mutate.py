"""make mutate's counting rules, configuration and resume logic, without running a single mutant."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.tools import ROOT, load_tool

report = load_tool("mutation_report")
run = load_tool("mutation_run")
mutate = load_tool("mutate")
MutateError = report.MutateError

ORIG = """
def x_decide__mutmut_orig(numerators, denominator, params):
    if n < minimum:
        return None
    return n
"""


def generated(*mutants: str) -> tuple[str, dict[str, tuple[int, int]]]:
    """A file as mutmut writes it: the unchanged copy, then each mutant, with their spans."""
    code, spans = "", {}
    for i, body in enumerate([ORIG, *mutants]):
        name = "x_decide__mutmut_orig" if i == 0 else f"x_decide__mutmut_{i}"
        text = body.replace("x_decide__mutmut_orig", name)
        start = code.count("\n") + 1
        code += text
        spans[name] = (start, code.count("\n"))
    return code, spans


def outcome(key: str, status: str, change: tuple[str, str] = ("", "")):
    return report.Outcome.of(key, status, change)


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


def test_a_mutants_change_keeps_the_lines_exactly_with_their_indentation() -> None:
    code, spans = generated(ORIG.replace("if n < minimum", "if n <= minimum"))
    changes = report.mutant_changes(code, spans)
    assert changes == {"x_decide__mutmut_1": ("    if n < minimum:", "    if n <= minimum:")}


def test_a_change_over_several_lines_keeps_each_and_a_moved_line_differs() -> None:
    two = ORIG.replace("if n < minimum", "if n <= minimum").replace("return n\n", "return None\n")
    moved = ORIG.replace("        return None", "    return None")  # out of the block
    code, spans = generated(two, moved)
    changes = report.mutant_changes(code, spans)
    assert changes["x_decide__mutmut_1"] == (
        "    if n < minimum:\n    return n",
        "    if n <= minimum:\n    return None",
    )
    assert changes["x_decide__mutmut_2"] == ("        return None", "    return None")


def test_a_default_arguments_mutant_shows_the_def_line_under_the_functions_own_name() -> None:
    code, spans = generated(ORIG.replace("params)", "params=2)"))
    assert report.mutant_changes(code, spans)["x_decide__mutmut_1"] == (
        "def decide(numerators, denominator, params):",
        "def decide(numerators, denominator, params=2):",
    )


def test_a_generated_file_without_the_unchanged_copy_is_refused() -> None:
    with pytest.raises(MutateError, match="no unchanged copy of x_decide"):
        report.mutant_changes(
            "def x_decide__mutmut_1():\n    pass\n", {"x_decide__mutmut_1": (1, 2)}
        )


def test_the_score_counts_kills_among_the_mutants_not_excused() -> None:
    key = "needlepoint.analysis.decision.x_decide__mutmut_{}"
    outcomes = [
        outcome(key.format(1), "killed"),
        outcome(key.format(2), "timeout"),
        outcome(key.format(3), "segfault"),
        outcome(key.format(4), "survived"),  # excused below
        outcome(key.format(5), "no tests", ("    x = 1", "    x = 2")),
        outcome(key.format(6), "survived", ("    y = 1", "    y = None")),
    ]
    r = report.score(outcomes, {key.format(4): "entry"})
    assert (r.killed, r.counted, r.complete) == (3, 5, True)
    assert [o.number for o, _ in r.equivalent] == [4]
    assert [o.number for o in r.survivors["needlepoint.analysis.decision.decide"]] == [5, 6]
    text = report.render(r, "reg.toml")
    assert text.splitlines()[-1] == "killed 3 of 5 (60.0%)"
    assert text.splitlines()[-2] == (
        "1 killed, 1 timed out, 1 crashed, 1 survived, 1 reached by no test; "
        "1 registered as equivalent (reg.toml) and not counted."
    )
    assert "    #5 [reached by no test]  x = 1\n        -> x = 2" in text
    assert "    #6  y = 1\n        -> y = None" in text


@pytest.mark.parametrize("status", ["killed", "timeout", "no tests", "suspicious", "skipped"])
def test_only_a_surviving_mutant_can_be_excused_even_by_mistake(status: str) -> None:
    o = outcome("a.x_f__mutmut_1", status)
    with pytest.raises(MutateError, match="only a surviving mutant can be excused"):
        report.score([o], {o.key: "entry"})


def test_unchecked_mutants_make_the_run_incomplete() -> None:
    r = report.score([outcome("a.x_f__mutmut_1", "not checked")], {})
    assert not r.complete and r.counted == 0
    assert "1 mutants were never checked" in report.render(r, "reg.toml")
    assert r.score_line() == "killed 0 of 0 (no mutants in the selection)"


def test_an_unknown_status_is_refused() -> None:
    with pytest.raises(MutateError, match="unknown mutmut status 'odd'"):
        report.score([outcome("a.x_f__mutmut_1", "odd")], {})


def test_the_core_modules_exist_and_the_config_is_what_staging_expects() -> None:
    table = run.mutmut_config()
    files = run.core_files(table)
    assert all(path.is_file() for path in files.values())
    for module in ("jsonio", "run.scoring", "run.runner", "analysis.primary"):
        assert f"needlepoint.{module}" in files
    selection = table["pytest_add_cli_args_test_selection"]
    # The top-level tests that read the package's source are left out by name; the others run.
    reading = sorted(a for a in selection if a.startswith("--ignore=tests/test_"))
    assert reading == [
        "--ignore=tests/test_layers.py", "--ignore=tests/test_limits_docs.py",
        "--ignore=tests/test_schema_docs.py", "--ignore=tests/test_typed_records.py",
    ]  # fmt: skip
    assert not any(a.startswith("--ignore-glob=tests/test_") for a in selection)


def test_mutmut_config_refuses_what_staging_cannot_handle(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.other]\n")
    with pytest.raises(MutateError, match=r"has no \[tool.mutmut\] table"):
        run.mutmut_config(path)
    path.write_text('[tool.mutmut]\nsource_paths = ["src"]\nonly_mutate = ["src/a.py"]\n')
    with pytest.raises(MutateError, match="source_paths must be"):
        run.mutmut_config(path)
    path.write_text('[tool.mutmut]\nsource_paths = ["lib"]\n')
    with pytest.raises(MutateError, match="only_mutate must list"):
        run.mutmut_config(path)


def test_patterns_name_core_modules_or_pass_globs_through() -> None:
    core = ["needlepoint.run.scoring", "needlepoint.analysis.power"]
    assert run.patterns_for([], core) == []
    assert run.patterns_for(["needlepoint.run.scoring"], core) == ["needlepoint.run.scoring.*"]
    glob = "needlepoint.run.scoring.x_classify*"
    assert run.patterns_for([glob], core) == [glob]
    assert run.patterns_for(["needlepoint.analysis*"], core) == ["needlepoint.analysis*"]
    with pytest.raises(MutateError, match=r"'needlepoint.run.loop' names no core module"):
        run.patterns_for(["needlepoint.run.loop"], core)


def test_the_fingerprint_covers_code_and_tests_but_not_docs_or_this_tooling(tmp_path: Path) -> None:
    names = ["src/a.py", "tests/test_a.py", "docs/mutation.md", "tools/mutate.py"]
    for n in names:
        (tmp_path / n).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / n).write_text("x")
    first = run.fingerprint(tmp_path, names)
    (tmp_path / "docs/mutation.md").write_text("a new shard table")
    (tmp_path / "tools/mutate.py").write_text("y")
    assert run.fingerprint(tmp_path, names) == first
    (tmp_path / "tests/test_a.py").write_text("a new test")
    assert run.fingerprint(tmp_path, names) != first


def verdicts(**codes: int | None):
    v = run.Verdicts()
    for key, code in codes.items():
        v[key.replace("_", ".", 1)] = run.Verdict("src/m.py", code, 1.0)
    return v


def test_resume_checks_exactly_what_has_no_verdict_on_the_current_fingerprint() -> None:
    v = verdicts(m_x_f__mutmut_1=1, m_x_f__mutmut_2=0, m_x_f__mutmut_3=None, m_x_g__mutmut_1=1)
    state = run.RunState("new", stamps={"m.x_f__mutmut_1": "new", "m.x_f__mutmut_2": "old"})
    keys = run.selected(v, ["m.x_f*"])
    assert keys == ["m.x_f__mutmut_1", "m.x_f__mutmut_2", "m.x_f__mutmut_3"]
    todo = state.todo(keys, v)
    assert todo == ["m.x_f__mutmut_2", "m.x_f__mutmut_3"]  # measured on older code; never
    assert state.current("m.x_f__mutmut_1", v) and not state.current("m.x_g__mutmut_1", v)


def test_resume_names_each_mutant_and_globs_those_no_test_reaches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stats = tmp_path / "mutmut-stats.json"
    stats.write_text(json.dumps({"tests_by_mangled_function_name": {"m.x_f": ["t"]}}))
    monkeypatch.setattr(run, "STATS", stats)
    v = verdicts(m_x_f__mutmut_1=None, m_x_f__mutmut_2=1, m_x_g__mutmut_1=None)
    state = run.RunState("fp")
    assert state.mutmut_args(["m.x_f__mutmut_1", "m.x_g__mutmut_1"], ["m.*"], v) == [
        "m.x_f__mutmut_1",
        "*m.x_g__mutmut_1",
    ]
    # Everything selected is to be checked: the patterns themselves.
    assert state.mutmut_args(["m.x_f__mutmut_1"], ["m.x_f__mutmut_1"], v) == ["m.x_f__mutmut_1"]
    assert state.mutmut_args(list(v), [], v) == []


def test_a_report_names_each_core_file_changed_since_the_run_was_staged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run, "ROOT", tmp_path / "root")
    monkeypatch.setattr(run, "STAGE", tmp_path / "stage")
    lib, src = tmp_path / "root" / "lib" / "needlepoint", tmp_path / "stage" / "src" / "needlepoint"
    lib.mkdir(parents=True)
    src.mkdir(parents=True)
    files = {f"needlepoint.{name}": lib / f"{name}.py" for name in "abc"}
    for name, now, staged in [("a", "x = 1\n", "x = 1\n"), ("b", "x = 2\n", "x = 1\n")]:
        (lib / f"{name}.py").write_text(now)
        (src / f"{name}.py").write_text(staged)
    (lib / "c.py").write_text("")  # new since the run: never staged
    changed = run.changed_since_staged(files, set(files))
    assert changed == ["lib/needlepoint/b.py", "lib/needlepoint/c.py"]
    assert run.changed_since_staged(files, {"needlepoint.a"}) == []  # only the run's modules


def test_only_verdicts_reached_get_the_stamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run, "STATE", tmp_path / "state.json")
    v = verdicts(m_x_f__mutmut_1=1, m_x_f__mutmut_2=None)
    state = run.RunState("fp")
    state.stamp(["m.x_f__mutmut_1", "m.x_f__mutmut_2"], v)  # the run stopped before the second
    assert state.stamps == {"m.x_f__mutmut_1": "fp"}
    assert json.loads((tmp_path / "state.json").read_text())["stamps"] == state.stamps


def test_verdicts_are_stamped_while_mutmut_runs_so_a_killed_run_keeps_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "mutmut"  # prints two progress lines, as mutmut does while it checks
    fake.write_text(
        "#!/bin/sh\necho 'Running mutation testing'\n"
        'for n in 1 2; do echo "$n/2  🎉 $n 🫥 0  ⏰ 0  🤔 0  🙁 0"; sleep 0.2; done\n'
    )
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(run, "STAGE", tmp_path)
    monkeypatch.setattr(run, "TICK_S", 0.0)
    ticks: list[int] = []
    run.run_mutmut([], 1, 2, on_tick=lambda: ticks.append(1))
    assert len(ticks) >= 2  # once per progress line at least, not only when mutmut ends
    assert "2/2" in (tmp_path / "mutmut.log").read_text()

    monkeypatch.setattr(run, "STATE", tmp_path / "state.json")
    (tmp_path / "mutants").mkdir()
    meta = tmp_path / "mutants" / "m.py.meta"
    meta.write_text('{"exit_code_by_key": {"m.x_f__mutmut_1": 1}, "durations_by_key": {}}')
    state = run.RunState("fp")
    mutate._stamp_so_far(state, ["m.x_f__mutmut_1"])
    assert json.loads((tmp_path / "state.json").read_text())["stamps"] == {"m.x_f__mutmut_1": "fp"}
    assert not (tmp_path / "state.json.part").exists()
    meta.write_text('{"exit_code_by_key": {"m.x_f__mut')  # caught while mutmut rewrites it
    mutate._stamp_so_far(run.RunState("fp2"), ["m.x_f__mutmut_1"])  # skipped, not a crash
    assert json.loads((tmp_path / "state.json").read_text())["stamps"] == {"m.x_f__mutmut_1": "fp"}


def test_a_plain_kill_stops_mutmut_as_ctrl_c_does_so_the_final_stamp_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sys.executable
    fake = tmp_path / "mutmut"  # checks mutants until it is interrupted, as mutmut does
    fake.write_text(
        f"#!{real}\nimport time\nprint('Running mutation testing', flush=True)\n"
        "try:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n"
        f"    open({str(tmp_path / 'stopped')!r}, 'w').write('INT')\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(run, "STAGE", tmp_path)
    before = signal.getsignal(signal.SIGTERM)
    kill = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    start = time.monotonic()
    # Started with SIGINT ignored, as a job started with & from a script (or an xdist worker) is.
    interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt), run.term_as_interrupt():  # measure's finally stamps
            kill.start()
            run.run_mutmut([], 1, 1)
    finally:
        signal.signal(signal.SIGINT, interrupt)
    kill.join()
    assert time.monotonic() - start < 30  # mutmut ended on SIGINT, not killed after the wait
    assert (tmp_path / "stopped").read_text() == "INT"
    assert signal.getsignal(signal.SIGTERM) is before


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
    assert run.failure(log, 3) == line


def test_bad_workers_and_unknown_modules_exit_2_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert mutate.main(["--workers", "3", "--report"]) == 2
    assert capsys.readouterr().err == "mutate: --workers must be 1 or 2: the machine is shared\n"
    assert mutate.main(["needlepoint.nope", "--report"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert mutate.main(["--needed", "needlepoint.run.scoring.x_*"]) == 2
    assert capsys.readouterr().err == (
        "mutate: --needed takes core modules only, not 'needlepoint.run.scoring.x_*'\n"
    )


def test_a_second_run_in_the_same_checkout_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run, "LOCK", tmp_path / "build" / "mutation.lock")
    busy = pytest.raises(MutateError, match="another make mutate is running")
    with run.lock(), busy, run.lock():
        pass
    with run.lock():  # released again
        pass


@pytest.mark.parametrize(
    ("args", "keep"),
    [
        (["MODULES=needlepoint.run.scoring", "--keep"], True),  # make reads it as -k
        (["MODULES=needlepoint.run.scoring", "KEEP=1"], True),
        (["MODULES=needlepoint.run.scoring"], False),
    ],
)
def test_make_mutate_passes_keep_and_the_modules_through(args: list[str], keep: bool) -> None:
    out = subprocess.run(
        ["make", "-n", "mutate", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    command = next(line for line in out.splitlines() if "tools/mutate.py" in line)
    assert command.split()[2:] == [*(["--keep"] if keep else []), "needlepoint.run.scoring"]


def test_property_tests_get_a_small_budget_only_while_mutmut_checks_a_mutant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util
    from types import SimpleNamespace

    from hypothesis import given, settings
    from hypothesis import strategies as st

    spec = importlib.util.spec_from_file_location("suite_conftest", ROOT / "tests" / "conftest.py")
    assert spec and spec.loader
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)

    def budgets(mutant: str) -> list[int]:
        @settings(max_examples=300, derandomize=True)
        @given(st.integers())
        def big(x: int) -> None: ...

        @settings(max_examples=10)
        @given(st.integers())
        def small(x: int) -> None: ...

        items = [
            SimpleNamespace(obj=big, nodeid="tests/test_a.py::big"),
            SimpleNamespace(obj=small, nodeid="tests/test_a.py::small"),
            SimpleNamespace(obj=None, nodeid="tests/test_b.py::none"),
        ]
        monkeypatch.setenv("MUTANT_UNDER_TEST", mutant)
        conftest.pytest_collection_modifyitems(items)
        return [
            big._hypothesis_internal_use_settings.max_examples,
            small._hypothesis_internal_use_settings.max_examples,
        ]

    assert budgets("needlepoint.run.scoring.x_classify__mutmut_3") == [50, 10]
    for ordinary in ("", "stats", "list_all_tests"):
        assert budgets(ordinary) == [300, 10]


def test_a_mutants_tests_run_its_own_module_first_then_the_cheapest_files() -> None:
    import importlib.util
    from types import SimpleNamespace

    spec = importlib.util.spec_from_file_location("suite_conftest", ROOT / "tests" / "conftest.py")
    assert spec and spec.loader
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    ids = [
        "tests/cli/test_app.py::slow",
        "tests/run/test_results.py::one",
        "tests/run/test_journal_chain.py::a",
        "tests/cli/test_app.py::quick",
        "tests/run/test_journal_chain.py::b",
        "tests/run/test_journal.py::c",
        "tests/test_jsonio.py::d",
    ]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    durations = {ids[0]: 30.0, ids[1]: 2.0, ids[3]: 0.1, ids[6]: 0.5}

    def order(mutant: str) -> list[str]:
        return [i.nodeid for i in conftest.likeliest_killers_first(items, mutant, durations)]

    # the mirrored files first (each file's own order kept), then by each file's total time
    assert order("needlepoint.run.journal.x_walk__mutmut_3") == [
        ids[2],
        ids[4],
        ids[5],
        ids[6],
        ids[1],
        ids[0],
        ids[3],
    ]
    assert order("needlepoint.run.journal.xǁJournalStateǁadd__mutmut_1")[:3] == [
        ids[2],
        ids[4],
        ids[5],
    ]
    assert order("needlepoint.jsonio.x_parse_json__mutmut_2")[0] == ids[6]
    # not a mutant (the clean run, the forced failure): the order pytest collected
    assert order("fail") == ids


TWICE = """
import sys
import threading
import time
import pytest

class Ids:
    def pytest_collection_modifyitems(self, items):
        self.ids = [item.nodeid for item in items]

runs = [Ids(), Ids()]
for ids in runs:
    args = ["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *sys.argv[1:]]
    assert pytest.main(args, plugins=[ids]) == 0
first, second = runs[0].ids, set(runs[1].ids)
print("COUNT", len(first))
print("".join(f"CHANGED {i}\\n" for i in first if i not in second))
"""


def test_every_test_id_mutmut_selects_is_the_same_when_collected_twice_in_one_process() -> None:
    # mutmut collects the suite more than once in one process, and pytest escapes an explicit
    # id holding a backslash or a non-ASCII character again each time: the second collection
    # cannot find the test by its first id, and make mutate stops before any mutant runs.
    # tests/support/ids.py's plain_id keeps such ids stable.
    selection = run.mutmut_config()["pytest_add_cli_args_test_selection"]
    out = subprocess.run(
        [sys.executable, "-c", TWICE, *selection],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    count = int(next(line for line in out if line.startswith("COUNT ")).split()[1])
    assert count > 1000
    changed = [line for line in out if line.startswith("CHANGED ")]
    assert changed == [], "give these tests plain_id ids"
