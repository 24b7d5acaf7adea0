"""Per-shard results files and the table in docs/mutation.md that adds them up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.tools import ROOT, load_tool

constant_results = load_tool("constant_results")
report = load_tool("mutation_report")
shards = load_tool("mutation_shards")
run = load_tool("mutation_run")
MutateError = report.MutateError

MODULES = ["needlepoint.run.scoring", "needlepoint.analysis.decision"]


class Entry:
    reason = "codec names are case-insensitive"


def outcomes(module: str) -> list:
    key = f"{module}.x_f__mutmut_{{}}"
    return [
        report.Outcome.of(key.format(1), "killed"),
        report.Outcome.of(key.format(2), "timeout"),
        report.Outcome.of(key.format(3), "survived", ("    a = 1", "    a = 2")),
        report.Outcome.of(key.format(4), "survived", ('    b = "x"', '    b = "X"')),
    ]


def project(tmp_path: Path) -> dict[str, Path]:
    files = {}
    for m in MODULES:
        path = tmp_path / "lib" / f"{m.replace('.', '/')}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {m}\n")
        files[m] = path
    doc = tmp_path / shards.DOC
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(f"# Mutation\n\nBefore.\n\n{shards.BEGIN}\nold\n{shards.END}\n\nAfter.\n")
    return files


def record(tmp_path: Path, files: dict[str, Path], module: str, **ready: bool) -> list[str]:
    items = outcomes(module)
    excused = {items[3].key: Entry()}
    complete = {module: ready.get("complete", True)}
    return shards.record_shards(
        tmp_path, files, items, excused, [], complete, {module: 125.0}, "a" * 40,
        ready.get("clean", True),
    )  # fmt: skip


def test_a_complete_shard_on_committed_code_gets_its_results_file(tmp_path: Path) -> None:
    files = project(tmp_path)
    lines = record(tmp_path, files, "needlepoint.run.scoring")
    assert lines == [
        "run.scoring: killed 2 of 3 (66.7%) -> docs/mutation/needlepoint.run.scoring.json"
    ]
    saved = json.loads((tmp_path / "docs/mutation/needlepoint.run.scoring.json").read_text())
    assert saved["commit"] == "a" * 40 and saved["file"] == "lib/needlepoint/run/scoring.py"
    assert (saved["mutants"], saved["equivalent"], saved["counted"], saved["killed"]) == (
        4,
        1,
        3,
        2,
    )
    assert saved["verdicts"] == {"killed": 1, "survived": 2, "timeout": 1}
    assert saved["timed_out"] == 1 and saved["mutant_seconds"] == 125.0
    assert [s["number"] for s in saved["survivors"]] == [3]
    assert saved["excused"][0]["reason"] == Entry.reason
    assert saved["excused"][0]["before"] == '    b = "x"'
    assert len(saved["measured"]) == 20 and saved["measured"].endswith("Z")


@pytest.mark.parametrize(
    ("ready", "why"),
    [
        ({"complete": False}, "not every mutant has a verdict on the code staged now"),
        ({"clean": False}, "uncommitted changes to code or tests"),
    ],
)
def test_a_partial_or_uncommitted_shard_gets_no_results_file(
    tmp_path: Path, ready: dict, why: str
) -> None:
    files = project(tmp_path)
    assert record(tmp_path, files, "needlepoint.run.scoring", **ready) == [
        f"run.scoring: no results file ({why})"
    ]
    assert not (tmp_path / "docs/mutation").exists()


def test_a_shard_whose_register_entries_fail_gets_no_results_file(tmp_path: Path) -> None:
    files = project(tmp_path)
    items = outcomes("needlepoint.run.scoring")
    problem = "needlepoint.run.scoring.f: '    a = 1' -> '    a = 2': matches 2 mutants"
    lines = shards.record_shards(
        tmp_path, files, items, {}, [problem], {"needlepoint.run.scoring": True},
        {"needlepoint.run.scoring": 1.0}, "a" * 40, True,
    )  # fmt: skip
    assert lines == ["run.scoring: no results file (the register fails)"]


def test_the_summary_labels_a_partial_sum_with_what_it_leaves_out(tmp_path: Path) -> None:
    files = project(tmp_path)
    record(tmp_path, files, "needlepoint.run.scoring")
    text = shards.summary(tmp_path, MODULES, write=True)
    rows = text.splitlines()
    assert rows[2].startswith("| `run.scoring` | `aaaaaaaaaa` | ")
    assert rows[2].endswith("| 4 | 1 | 2 (1) | 1 | 66.7% | 2 min |")
    assert rows[3] == "| **1 of 2 shards (partial)** | | | 4 | 1 | 2 (1) | 1 | **66.7%** | 2 min |"
    assert rows[-1] == "Not measured yet, so left out of the sum: analysis.decision."
    doc = (tmp_path / shards.DOC).read_text()
    assert doc.startswith("# Mutation\n\nBefore.\n\n") and doc.endswith("\n\nAfter.\n")
    assert f"{shards.BEGIN}\n{text}\n{shards.END}" in doc


def test_the_sum_over_every_shard_is_the_complete_score(tmp_path: Path) -> None:
    files = project(tmp_path)
    for m in MODULES:
        record(tmp_path, files, m)
    rows = shards.summary(tmp_path, MODULES, write=False).splitlines()
    assert rows[-1] == "| **all 2 shards** | | | 8 | 2 | 4 (2) | 2 | **66.7%** | 4 min |"


def test_a_module_changed_since_its_shard_is_named(tmp_path: Path) -> None:
    files = project(tmp_path)
    record(tmp_path, files, "needlepoint.run.scoring")
    files["needlepoint.run.scoring"].write_text("# changed\n")
    text = shards.summary(tmp_path, MODULES, write=True)
    assert text.endswith("Changed since measured (run these shards again): needlepoint.run.scoring")
    doc = (tmp_path / shards.DOC).read_text()
    assert f"{text}\n{shards.END}" in doc, "the doc names the changed shard under its table"


def test_results_files_that_are_not_shards_of_the_core_are_refused(tmp_path: Path) -> None:
    project(tmp_path)
    folder = tmp_path / shards.RESULTS
    folder.mkdir(parents=True)
    (folder / "needlepoint.run.loop.json").write_text(
        json.dumps({"format": shards.FORMAT, "module": "needlepoint.run.loop"})
    )
    with pytest.raises(MutateError, match=r"needlepoint\.run\.loop is not a core module"):
        shards.summary(tmp_path, MODULES, write=False)
    (folder / "needlepoint.run.loop.json").write_text("{}")
    with pytest.raises(MutateError, match="not a shard results file"):
        shards.summary(tmp_path, MODULES, write=False)


def test_a_doc_without_its_markers_is_refused(tmp_path: Path) -> None:
    project(tmp_path)
    (tmp_path / shards.DOC).write_text("# Mutation\n")
    with pytest.raises(MutateError, match="needs the shard table's two marker lines"):
        shards.summary(tmp_path, MODULES, write=True)


def test_docs_mutation_md_shows_exactly_the_committed_shards() -> None:
    modules = list(run.core_files(run.mutmut_config()))
    expected = shards.summary(ROOT, modules, write=False)
    doc = (ROOT / shards.DOC).read_text("utf-8")
    assert f"{shards.BEGIN}\n{expected}\n{shards.END}" in doc, "run: make mutate-summary"


def test_docs_mutation_md_shows_exactly_the_committed_constants_files() -> None:
    files = run.core_files(run.mutmut_config())
    expected = constant_results.summary(ROOT, files, write=False)
    doc = (ROOT / shards.DOC).read_text("utf-8")
    assert f"{constant_results.BEGIN}\n{expected}\n{constant_results.END}" in doc, (
        "run: make mutate-summary"
    )
