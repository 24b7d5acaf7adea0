"""The results files a constants run leaves (docs/mutation/constants/) and their table.

No mutant runs here: the verdicts are made up, so only what is written from them is tested.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from support.tools import ROOT, load_tool

constants = load_tool("constant_mutants")
results = load_tool("constant_results")
script = load_tool("mutate_constants")
register = load_tool("mutation_register")
shards = load_tool("mutation_shards")
keys = load_tool("mutation_keys")
run = load_tool("mutation_run")
MutateError = load_tool("mutation_report").MutateError

COMMIT = "c" * 40
MODULE = 'LIMIT = 64\nKINDS = ("a", "b")\nNAME = "Ä"\n'
# Made-up verdicts by change; "64 -> 65" survives and is excused by the register below.
STATUSES = {
    "64 -> 65": "survived",
    "64 -> 63": "killed",
    'drops "a"': "timed out",
    'drops "b"': "killed",
    "\"a\" -> 'XXaXX'": "killed",
    "\"b\" -> 'XXbXX'": "no tests",
    "\"Ä\" -> 'XXÄXX'": "survived",
}
REASON = "the limit is never reached"


def project(tmp_path: Path) -> dict[str, Path]:
    """pkg.mod with seven constant mutants, pkg.bare with none, and a doc with both tables."""
    files = {"pkg.mod": tmp_path / "lib/pkg/mod.py", "pkg.bare": tmp_path / "lib/pkg/bare.py"}
    files["pkg.mod"].parent.mkdir(parents=True)
    files["pkg.mod"].write_text(MODULE, "utf-8")
    files["pkg.bare"].write_text("def f():\n    return 1\n")
    doc = tmp_path / shards.DOC
    doc.parent.mkdir(parents=True)
    doc.write_text(
        f"# M\n\n{shards.BEGIN}\nold\n{shards.END}\n\n## C\n\n{results.BEGIN}\nold\n{results.END}\n"
    )
    return files


def measured(files: dict[str, Path], statuses: dict[str, str] = STATUSES) -> tuple:
    mutants = [m for name, p in files.items() for m in constants.constant_mutants(p, name)]
    verdicts = [script.Verdict(m, statuses[m.change]) for m in mutants if m.change in statuses]
    entry = register.ConstantEntry("LIMIT", "64 -> 65", REASON, module="pkg.mod")
    reg = register.ConstantRegister((entry,), files["pkg.mod"].parents[2])
    problems, excused = reg.match(verdicts, list(files))
    return mutants, verdicts[::-1], reg, excused, problems  # verdicts come back in any order


def write(tmp_path: Path, files: dict, before=(COMMIT, True), after=(COMMIT, True), **kw) -> list:
    mutants, verdicts, reg, excused, problems = measured(files, **kw)
    args = (mutants, verdicts, reg, excused, problems, before, after)
    return results.record_constants(tmp_path, files, *args)


def test_a_complete_run_writes_the_modules_file_with_its_counts(tmp_path: Path) -> None:
    files = project(tmp_path)
    assert write(tmp_path, files) == [
        "pkg.mod: killed 4 of 6 constant mutants (1 excused) "
        "-> docs/mutation/constants/pkg.mod.json"
    ]
    path = tmp_path / "docs/mutation/constants/pkg.mod.json"
    text = path.read_text("utf-8")
    saved = json.loads(text)
    assert text == json.dumps(saved, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    assert "XXÄXX" in text  # UTF-8, not escaped
    assert (saved["format"], saved["version"], saved["module"]) == (results.FORMAT, 2, "pkg.mod")
    assert saved["commit"] == COMMIT and saved["file"] == "lib/pkg/mod.py"
    assert len(saved["measured"]) == 20 and saved["measured"].endswith("Z")
    assert saved["counts"] == {
        "mutants": 7,
        "killed": 4,  # timed out included, as in the shard files
        "timed_out": 1,
        "survived": 2,
        "excused": 1,
    }
    assert saved["verdicts"] == {"killed": 3, "no tests": 1, "survived": 2, "timed out": 1}
    # Each constant by name and the hash of its value; in the order the mutants are made,
    # whatever order the verdicts came back in.
    found = saved["constants"]
    assert list(found) == ["KINDS", "LIMIT", "NAME"]
    assert {k: v["mutants"] for k, v in found.items()} == {"KINDS": 4, "LIMIT": 2, "NAME": 1}
    assert found["LIMIT"]["sha256"] == keys.constant_keys(MODULE)["LIMIT"]
    assert found["KINDS"]["survivors"] == [{"change": "\"b\" -> 'XXbXX'", "status": "no tests"}]
    assert found["NAME"]["survivors"] == [{"change": "\"Ä\" -> 'XXÄXX'", "status": "survived"}]
    assert found["LIMIT"]["excused"] == [{"change": "64 -> 65", "reason": REASON}]
    assert not (tmp_path / "docs/mutation/constants/pkg.bare.json").exists()  # no constants


@pytest.mark.parametrize(
    ("before", "after", "why"),
    [
        ((COMMIT, False), (COMMIT, False), "uncommitted changes to code or tests"),
        ((COMMIT, True), (COMMIT, False), "uncommitted changes to code or tests"),
        ((COMMIT, True), ("d" * 40, True), "a commit was made during the run"),
    ],
)
def test_a_run_not_on_one_committed_state_writes_no_file(
    tmp_path: Path, before: tuple, after: tuple, why: str
) -> None:
    files = project(tmp_path)
    assert write(tmp_path, files, before, after) == [f"no constants results files: {why}"]
    assert not (tmp_path / "docs/mutation/constants").exists()


def test_a_module_missing_a_verdict_or_failing_the_register_gets_no_file(tmp_path: Path) -> None:
    files = project(tmp_path)
    fewer = {k: v for k, v in STATUSES.items() if k != 'drops "b"'}
    assert write(tmp_path, files, statuses=fewer) == [
        "pkg.mod: no constants file (not every mutant has a verdict in this run)"
    ]
    killed = STATUSES | {"64 -> 65": "killed"}  # the entry now excuses a killed mutant
    assert write(tmp_path, files, statuses=killed) == [
        "pkg.mod: no constants file (the register fails)"
    ]
    assert not (tmp_path / "docs/mutation/constants").exists()


def test_the_table_adds_the_files_up_and_labels_a_partial_sum(tmp_path: Path) -> None:
    files = project(tmp_path)
    files["pkg.two"] = tmp_path / "lib/pkg/two.py"
    files["pkg.two"].write_text("LIMIT = 1\n")
    write(tmp_path, {k: files[k] for k in ("pkg.mod", "pkg.bare")})
    text = results.summary(tmp_path, files, write=True)
    rows = text.splitlines()
    assert rows[2].startswith("| `pkg.mod` | `cccccccccc` | ")
    assert rows[2].endswith("| 7 | 1 | 4 (1) | 2 |")
    assert rows[3] == "| **1 of 2 modules complete (partial)** | | | 7 | 1 | 4 (1) | 2 |"
    assert rows[5] == "Not measured yet, so left out (1 constants): pkg.two.LIMIT."
    assert rows[7] == "No rule constant, so nothing to measure: pkg.bare."
    doc = (tmp_path / shards.DOC).read_text()
    assert f"{results.BEGIN}\n{text}\n{results.END}\n" in doc
    assert f"{shards.BEGIN}\nold\n{shards.END}" in doc  # the shard table is not its business
    write(tmp_path, files, statuses=STATUSES | {"1 -> 2": "killed", "1 -> 0": "timed out"})
    rows = results.summary(tmp_path, files, write=False).splitlines()
    assert rows[4] == "| **all 2 modules** | | | 9 | 1 | 6 (2) | 2 |"
    assert rows[5:] == ["", "No rule constant, so nothing to measure: pkg.bare."]


def test_a_changed_constant_is_named_and_a_moved_one_still_counts(tmp_path: Path) -> None:
    files = project(tmp_path)
    write(tmp_path, files)
    files["pkg.mod"].write_text(MODULE.replace("64", "0x40").replace("LIMIT = ", "LIMIT =  "))
    text = results.summary(tmp_path, files, write=False)
    assert "left out" not in text and "(partial)" not in text  # the same value: the same key
    files["pkg.mod"].write_text(MODULE.replace("64", "65"), "utf-8")
    text = results.summary(tmp_path, files, write=True)
    assert "\n\nChanged since measured, so left out until measured again (1 constants): " \
        "pkg.mod.LIMIT.\n" in text  # fmt: skip
    assert text.splitlines()[2].startswith("| `pkg.mod` (partial) |")
    doc = (tmp_path / shards.DOC).read_text("utf-8")
    assert f"{text}\n{results.END}" in doc, "the doc names the changed constant under its table"
    # The module merged into pkg.bare: its constants still count there.
    files["pkg.bare"].write_text(MODULE + "\n\ndef f():\n    return 1\n", "utf-8")
    files["pkg.mod"].unlink()
    del files["pkg.mod"]
    rows = results.summary(tmp_path, files, write=False).splitlines()
    assert rows[2].startswith("| `pkg.bare` | `cccccccccc` |") and rows[2].endswith(
        "| 7 | 1 | 4 (1) | 2 |"
    )
    assert rows[3] == "| **all 1 modules** | | | 7 | 1 | 4 (1) | 2 |"


def test_files_that_are_not_constants_results_are_refused(tmp_path: Path) -> None:
    files = project(tmp_path)
    write(tmp_path, files)
    path = tmp_path / results.RESULTS / "pkg.mod.json"
    saved = json.loads(path.read_text("utf-8"))
    path.write_text(json.dumps(saved | {"format": shards.FORMAT}))
    with pytest.raises(MutateError, match="not a version 2 needlepoint-mutation-constants file"):
        results.summary(tmp_path, files, write=False)
    counts = saved["counts"] | {"survived": 1}
    path.write_text(json.dumps(saved | {"counts": counts}))
    with pytest.raises(MutateError, match="its counts are not the sum over its constants"):
        results.summary(tmp_path, files, write=False)
    path.unlink()
    (tmp_path / shards.DOC).write_text("# M\n")
    with pytest.raises(MutateError, match="needs the constants table's two marker lines"):
        results.summary(tmp_path, files, write=True)


# Through the script itself, with the runs replaced by made-up verdicts.
# Two core modules with no constant in the register: the fake run kills what it may excuse.
CORE = ["needlepoint.run.interpret", "needlepoint.analysis.report"]


@pytest.fixture
def fake_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """main() with no test run: each mutant killed but the first, which survives."""
    seen: dict = {"states": [(COMMIT, True), (COMMIT, True)]}

    def measure(work: list, workers: int) -> list:
        verdicts = [
            script.Verdict(m, "survived" if i == 0 else "killed") for i, (m, _) in enumerate(work)
        ]
        if seen.get("stop"):
            raise script.Interrupted(verdicts[:2])
        return verdicts

    def record(root: Path, *rest: object) -> list[str]:
        assert root == ROOT
        return results.record_constants(tmp_path, *rest)

    monkeypatch.setattr(script, "measure", measure)
    monkeypatch.setattr(script, "_warm", lambda: None)
    monkeypatch.setattr(script, "tests_for", lambda *a: [["tests/run/test_answers.py"]])
    monkeypatch.setattr(script, "git_state", lambda: seen["states"].pop(0))
    monkeypatch.setattr(script, "record_constants", record)
    return seen


def test_the_script_writes_a_file_per_module_when_the_run_completes(
    tmp_path: Path, fake_run: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    assert script.main(CORE) == 1  # one survivor
    err = capsys.readouterr().err.splitlines()
    assert err[-2:] == [
        "mutate: run.interpret: killed 31 of 32 constant mutants (0 excused) "
        "-> docs/mutation/constants/needlepoint.run.interpret.json",
        "mutate: analysis.report: killed 4 of 4 constant mutants (0 excused) "
        "-> docs/mutation/constants/needlepoint.analysis.report.json",
    ]
    saved = json.loads((tmp_path / results.RESULTS / "needlepoint.run.interpret.json").read_text())
    assert saved["counts"]["survived"] == 1 and saved["commit"] == COMMIT
    assert (
        saved["source_sha256"]
        == hashlib.sha256((ROOT / "lib/needlepoint/run/interpret.py").read_bytes()).hexdigest()
    )


def test_an_interrupted_run_writes_no_file(
    tmp_path: Path, fake_run: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_run["stop"] = True
    assert script.main(CORE) == 1
    assert "mutate: stopped: 2 of 36 constant mutants checked (partial)" in capsys.readouterr().err
    assert not (tmp_path / "docs").exists()


def test_a_dirty_tree_writes_no_file(
    tmp_path: Path, fake_run: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_run["states"] = [(COMMIT, False), (COMMIT, False)]
    assert script.main(CORE) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == "mutate: no constants results files: uncommitted changes to code or tests"
    assert not (tmp_path / "docs").exists()


def test_only_files_that_can_change_a_verdict_make_the_tree_dirty(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        who = ["-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run(["git", *who, *args], cwd=tmp_path, check=True, capture_output=True)

    for name in ("lib/a.py", "docs/mutation.md", "tools/t.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "x")
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True
    )
    (tmp_path / "docs/mutation/constants").mkdir(parents=True)
    (tmp_path / "docs/mutation/constants/m.json").write_text("{}\n")  # a results file just written
    (tmp_path / "tools/t.py").write_text("y\n")
    assert run.git_state(tmp_path) == (head.stdout.strip(), True)
    (tmp_path / "lib/a.py").write_text("y\n")
    assert run.git_state(tmp_path) == (head.stdout.strip(), False)
