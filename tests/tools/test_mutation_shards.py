"""Per-shard results files, keyed by function, and the table in docs/mutation.md adding them up.

The modules here are real source, so that the summary finds their functions with mutmut's own
generator as it does for the core; the verdicts are made up (no mutant runs).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.tools import ROOT, load_tool

constant_results = load_tool("constant_results")
keys = load_tool("mutation_keys")
report = load_tool("mutation_report")
shards = load_tool("mutation_shards")
run = load_tool("mutation_run")
MutateError = report.MutateError

ADD = '''def f(a, b):
    """Add one to the smaller."""
    if a < b:
        return a + 1
    return b - 1
'''
SCALE = """class C:
    def g(self, x):
        return x * 2
"""
OTHER = """def h(n):
    return n - 3
"""
A, B = "pkg.a", "pkg.b"


class Entry:
    reason = "codec names are case-insensitive"


def write(tmp_path: Path, module: str, source: str) -> Path:
    path = tmp_path / "lib" / f"{module.replace('.', '/')}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def project(tmp_path: Path, sources: dict[str, str] | None = None) -> dict[str, Path]:
    """pkg.a (f and C.g) and pkg.b (h), and a doc with the shard table's markers."""
    sources = sources or {A: f"{ADD}\n\n{SCALE}", B: OTHER}
    files = {m: write(tmp_path, m, s) for m, s in sources.items()}
    doc = tmp_path / shards.DOC
    doc.parent.mkdir(parents=True, exist_ok=True)
    if not doc.exists():
        doc.write_text(f"# Mutation\n\nBefore.\n\n{shards.BEGIN}\nold\n{shards.END}\n\nAfter.\n")
    return files


def mangled(name: str) -> str:
    klass, _, method = name.rpartition(".")
    return f"xǁ{klass}ǁ{method}" if klass else f"x_{name}"


def outcomes(tmp_path: Path, files: dict[str, Path], module: str) -> tuple[list, dict]:
    """Every mutant of the module, all killed but f's: #2 timed out, #3 survived, #4 excused."""
    path = files[module]
    rel = path.relative_to(tmp_path).as_posix()
    out, excused = [], {}
    for full, changes in keys.generated_changes(path.read_text(), module, rel).items():
        name = full.removeprefix(module + ".")
        for i, change in enumerate(changes, start=1):
            special = {2: "timeout", 3: "survived", 4: "survived"} if name == "f" else {}
            status = special.get(i, "killed")
            o = report.Outcome.of(f"{module}.{mangled(name)}__mutmut_{i}", status, change)
            out.append(o)
            if name == "f" and i == 4:
                excused[o.key] = Entry()
    return out, excused


def record(
    tmp_path: Path,
    files: dict,
    module: str,
    commit: str = "a",
    only: set | None = None,
    **ready: bool,
) -> list:
    """Record the module's made-up verdicts; ``only`` the functions measured whole (all of
    them by default), 125 s of mutant time spread over its functions."""
    items, excused = outcomes(tmp_path, files, module)
    names = sorted({o.function for o in items})
    complete = {f: ready.get("complete", True) and (only is None or f in only) for f in names}
    seconds = {f: 125.0 / len(names) for f in names}
    return shards.record_shards(
        tmp_path, files, items, excused, [], complete, seconds, commit * 40,
        ready.get("clean", True),
    )  # fmt: skip


def both_measured(tmp_path: Path) -> dict[str, Path]:
    """The project with pkg.a and pkg.b each measured whole at commit ``a``."""
    files = project(tmp_path)
    record(tmp_path, files, A)
    record(tmp_path, files, B)
    return files


def counts(tmp_path: Path, files: dict, module: str) -> dict[str, int]:
    path = files[module]
    rel = path.relative_to(tmp_path).as_posix()
    made = keys.generated_changes(path.read_text(), module, rel)
    return {k.removeprefix(module + "."): len(v) for k, v in made.items()}


def test_a_complete_shard_records_each_function_by_name_and_source_hash(tmp_path: Path) -> None:
    files = project(tmp_path)
    n = counts(tmp_path, files, A)
    total = sum(n.values())
    lines = record(tmp_path, files, A)
    score = f"{100 * (total - 2) / (total - 1):.1f}%"
    assert lines == [
        f"pkg.a: killed {total - 2} of {total - 1} ({score}) -> docs/mutation/pkg.a.json"
    ]
    saved = json.loads((tmp_path / "docs/mutation/pkg.a.json").read_text())
    assert (saved["format"], saved["version"], saved["module"]) == (shards.FORMAT, 2, A)
    assert saved["commit"] == "a" * 40 and saved["file"] == "lib/pkg/a.py"
    assert (saved["mutants"], saved["equivalent"], saved["counted"], saved["killed"]) == (
        total, 1, total - 1, total - 2
    )  # fmt: skip
    assert saved["timed_out"] == 1 and saved["mutant_seconds"] == 125.0
    assert set(saved["functions"]) == {"f", "C.g"}
    f = saved["functions"]["f"]
    assert f["sha256"] == keys.function_keys(files[A].read_text())["f"]
    assert f["mutants"] == n["f"]
    assert [s["number"] for s in f["survivors"]] == [3]
    assert f["excused"][0]["reason"] == Entry.reason and f["excused"][0]["number"] == 4
    assert saved["functions"]["C.g"]["survivors"] == []
    assert len(saved["measured"]) == 20 and saved["measured"].endswith("Z")


@pytest.mark.parametrize(
    ("ready", "why"),
    [
        (
            {"complete": False},
            "not every mutant of any function has a verdict on the code staged now",
        ),
        ({"clean": False}, "uncommitted changes to code or tests"),
    ],
)
def test_a_partial_or_uncommitted_shard_gets_no_results_file(
    tmp_path: Path, ready: dict, why: str
) -> None:
    files = project(tmp_path)
    assert record(tmp_path, files, A, **ready) == [f"pkg.a: no results file ({why})"]
    assert not (tmp_path / "docs/mutation").exists()


def test_a_shard_whose_register_entries_fail_gets_no_results_file(tmp_path: Path) -> None:
    files = project(tmp_path)
    items, _ = outcomes(tmp_path, files, A)
    problem = "pkg.a.f: '    a = 1' -> '    a = 2': matches 2 mutants"
    every = {o.function: True for o in items}
    lines = shards.record_shards(
        tmp_path, files, items, {}, [problem], every, dict.fromkeys(every, 1.0), "a" * 40, True
    )
    assert lines == ["pkg.a: no results file (the register fails)"]


def test_the_summary_labels_a_partial_sum_and_names_each_function_not_measured(
    tmp_path: Path,
) -> None:
    files = project(tmp_path)
    record(tmp_path, files, A)
    total = sum(counts(tmp_path, files, A).values())
    text = shards.summary(tmp_path, files, write=True)
    rows = text.splitlines()
    assert rows[0].startswith("| Module | Commit | Date |")
    assert rows[2].startswith("| `pkg.a` | `aaaaaaaaaa` | ")
    score = f"{100 * (total - 2) / (total - 1):.1f}%"
    assert rows[2].endswith(f"| {total} | 1 | {total - 2} (1) | 1 | {score} | 2 min |")
    assert rows[3] == (
        f"| **1 of 2 modules complete (partial)** | | | {total} | 1 | {total - 2} (1) | 1 "
        f"| **{score}** | 2 min |"
    )
    assert "Not complete: 1 functions of the core need measuring" in text
    assert rows[-1] == "Not measured yet, so left out (1 functions): pkg.b.h."
    doc = (tmp_path / shards.DOC).read_text()
    assert doc.startswith("# Mutation\n\nBefore.\n\n") and doc.endswith("\n\nAfter.\n")
    assert f"{shards.BEGIN}\n{text}\n{shards.END}" in doc


def test_the_sum_over_every_function_is_complete_over_the_core(tmp_path: Path) -> None:
    files = both_measured(tmp_path)
    total = sum(counts(tmp_path, files, A).values()) + sum(counts(tmp_path, files, B).values())
    rows = shards.summary(tmp_path, files, write=False).splitlines()
    score = f"{100 * (total - 2) / (total - 1):.1f}%"
    assert rows[4] == (
        f"| **all 2 modules** | | | {total} | 1 | {total - 2} (1) | 1 | **{score}** | 4 min |"
    )
    assert rows[-1] == (
        f"Complete over the core at {score}: {total - 2} of {total - 1} mutants killed "
        "(not counting 1 equivalent), in 3 functions of 2 modules."
    )


def test_a_function_moved_unchanged_into_another_module_keeps_its_measurement(
    tmp_path: Path,
) -> None:
    files = both_measured(tmp_path)
    before = shards.summary(tmp_path, files, write=False).splitlines()
    # pkg.a merged into pkg.b, in another order and at another place: only_mutate names pkg.b.
    (tmp_path / "lib/pkg/a.py").unlink()
    merged = project(tmp_path, {B: f"{OTHER}\n\n# merged from pkg.a\n{SCALE}\n\n{ADD}"})
    rows = shards.summary(tmp_path, merged, write=False).splitlines()
    assert rows[2].startswith("| `pkg.b` | `aaaaaaaaaa` +1 | ")
    assert rows[3].replace("all 1 modules", "x") == before[4].replace("all 2 modules", "x")
    assert rows[-1].startswith("Complete over the core at ")


def test_a_changed_function_needs_a_re_measure_and_a_comment_or_docstring_does_not(
    tmp_path: Path,
) -> None:
    files = both_measured(tmp_path)
    commented = ADD.replace("Add one", "Add 1").replace("b - 1", "b - 1  # the larger, less one")
    files[A].write_text(f"{commented}\n\n{SCALE.replace('* 2', '* 3')}")
    text = shards.summary(tmp_path, files, write=True)
    rows = text.splitlines()
    assert rows[2].startswith("| `pkg.a` (partial) | ")
    assert rows[4].startswith("| **1 of 2 modules complete (partial)** |")
    assert text.endswith("Changed since measured, so left out until measured again "
                         "(1 functions): pkg.a.C.g.")  # fmt: skip
    doc = (tmp_path / shards.DOC).read_text()
    assert f"{text}\n{shards.END}" in doc, "the doc names the changed function under its table"


def test_a_function_gone_is_named_and_a_file_that_counts_nothing_is_pruned(
    tmp_path: Path,
) -> None:
    files = both_measured(tmp_path)
    files[A].write_text(ADD)  # C.g deleted
    text = shards.summary(tmp_path, files, write=False)
    assert text.endswith("Measured but no longer in the core (1): pkg.a.C.g.")
    # Measured on two commits (a file each): still one function gone, named once.
    results = tmp_path / "docs/mutation"
    shutil.copy(results / "pkg.a.json", results / "pkg.a@0000000000.json")
    text = shards.summary(tmp_path, files, write=False)
    assert "\nMeasured but no longer in the core (1): pkg.a.C.g.\n" in text
    (results / "pkg.a@0000000000.json").unlink()
    # pkg.a merged into pkg.b and measured there again: pkg.a's file now counts nothing.
    files[A].unlink()
    merged = project(tmp_path, {B: f"{OTHER}\n\n{ADD}"})
    old = (tmp_path / "docs/mutation/pkg.a.json").read_text()
    lines = record(tmp_path, merged, B, commit="b")
    assert lines[-1] == (
        "deleted docs/mutation/pkg.a.json: each of its entries is measured again or gone"
    )
    assert not (tmp_path / "docs/mutation/pkg.a.json").exists()
    assert shards.summary(tmp_path, merged, write=False).splitlines()[-1].startswith("Complete")
    (tmp_path / "docs/mutation/pkg.old.json").write_text(old)  # left behind by hand
    assert shards.summary(tmp_path, merged, write=False).endswith(
        "Results files that count nothing now (make mutate deletes them): "
        "docs/mutation/pkg.old.json."
    )


def test_a_module_measured_again_keeps_aside_what_moved_out_of_it(tmp_path: Path) -> None:
    files = both_measured(tmp_path)
    files[A].write_text(ADD)  # C moved from pkg.a to pkg.b
    files[B].write_text(f"{OTHER}\n\n{SCALE}")
    lines = record(tmp_path, files, A, commit="b")
    assert (
        lines[0]
        == "kept docs/mutation/pkg.a@aaaaaaaaaa.json: entries measured there moved elsewhere"
    )
    assert (tmp_path / "docs/mutation/pkg.a@aaaaaaaaaa.json").is_file()
    assert shards.summary(tmp_path, files, write=False).splitlines()[-1].startswith("Complete")


def test_a_run_limited_to_some_functions_records_those_beside_the_modules_file(
    tmp_path: Path,
) -> None:
    files = both_measured(tmp_path)
    files[A].write_text(f"{ADD}\n\n{SCALE.replace('* 2', '* 3')}")  # C.g changed
    assert shards.needed(tmp_path, files) == ["pkg.a.x\u01c1C\u01c1g__mutmut_*"]
    lines = record(tmp_path, files, A, commit="b", only={"pkg.a.C.g"})
    n = counts(tmp_path, files, A)["C.g"]
    assert lines == [
        "pkg.a: 1 functions not measured whole, left to other files",
        f"pkg.a: killed {n} of {n} (100.0%) -> docs/mutation/pkg.a@bbbbbbbbbb.json",
    ]
    saved = json.loads((tmp_path / "docs/mutation/pkg.a@bbbbbbbbbb.json").read_text())
    assert set(saved["functions"]) == {"C.g"} and saved["mutants"] == n
    assert saved["mutant_seconds"] == 62.5 and saved["timed_out"] == 0
    # the module's own file still counts f; nothing is needed now, and the sum is complete
    assert (tmp_path / "docs/mutation/pkg.a.json").is_file()
    assert shards.needed(tmp_path, files) == []
    rows = shards.summary(tmp_path, files, write=False).splitlines()
    assert rows[2].startswith("| `pkg.a` | `aaaaaaaaaa` +1 | ")
    assert rows[-1].startswith("Complete over the core at ")
    # the same functions measured again on the same commit: a new file, none overwritten
    again = record(tmp_path, files, A, commit="b", only={"pkg.a.C.g"})
    assert again[1].endswith("-> docs/mutation/pkg.a@bbbbbbbbbb-2.json")
    # of two measurements of the same code, one counts and the other is pruned
    left = {p.name for p in (tmp_path / "docs/mutation").glob("pkg.a@*.json")}
    gone = {"pkg.a@bbbbbbbbbb.json", "pkg.a@bbbbbbbbbb-2.json"} - left
    assert len(left) == 1 and len(gone) == 1
    assert again[-1] == (
        f"deleted docs/mutation/{gone.pop()}: each of its entries is measured again or gone"
    )


def test_results_files_of_another_format_or_with_wrong_totals_are_refused(tmp_path: Path) -> None:
    files = project(tmp_path)
    record(tmp_path, files, A)
    path = tmp_path / "docs/mutation/pkg.a.json"
    saved = json.loads(path.read_text())
    path.write_text(json.dumps(saved | {"killed": saved["killed"] + 1}))
    with pytest.raises(MutateError, match="its totals are not the sum over its functions"):
        shards.summary(tmp_path, files, write=False)
    path.write_text(json.dumps(saved | {"version": 1}))
    with pytest.raises(MutateError, match="not a version 2 needlepoint-mutation-shard file"):
        shards.summary(tmp_path, files, write=False)
    del saved["functions"]["f"]["sha256"]
    path.write_text(json.dumps(saved))
    with pytest.raises(MutateError, match="f needs its sha256 and a count of mutants"):
        shards.summary(tmp_path, files, write=False)


def test_a_doc_without_its_markers_is_refused(tmp_path: Path) -> None:
    files = project(tmp_path)
    (tmp_path / shards.DOC).write_text("# Mutation\n")
    with pytest.raises(MutateError, match="needs the shard table's two marker lines"):
        shards.summary(tmp_path, files, write=True)


def test_docs_mutation_md_shows_exactly_the_committed_shards() -> None:
    files = run.core_files(run.mutmut_config())
    expected = shards.summary(ROOT, files, write=False)
    doc = (ROOT / shards.DOC).read_text("utf-8")
    assert f"{shards.BEGIN}\n{expected}\n{shards.END}" in doc, "run: make mutate-summary"


def test_docs_mutation_md_shows_exactly_the_committed_constants_files() -> None:
    files = run.core_files(run.mutmut_config())
    expected = constant_results.summary(ROOT, files, write=False)
    doc = (ROOT / shards.DOC).read_text("utf-8")
    assert f"{constant_results.BEGIN}\n{expected}\n{constant_results.END}" in doc, (
        "run: make mutate-summary"
    )
