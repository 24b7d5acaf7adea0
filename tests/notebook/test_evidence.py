"""evidence-diff: every data file of the reference evidence is compared, and a changed byte fails.

Each test copies the committed reference evidence, changes the copy the way a regression
would (two columns of the contamination report swapped, one PNG byte flipped, a word of the
summary edited, a file lost or added), and checks that the comparison names that file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from needlepoint.cli import main
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes
from needlepoint.notebook.evidence import diff_evidence

REFERENCE = Path(__file__).resolve().parents[2] / "evidence" / "20261130-simulated-reference"

# What the issue names: prepared files, journal, results, analysis, summary, power table,
# contamination report and every figure.
MUST_COMPARE = (
    "prepared/answer_key.jsonl",
    "prepared/manifest.json",
    "prepared/plan.csv",
    "prepared/protocol.json",
    "prepared/requests.jsonl",
    "run/journal.jsonl",
    "run/journal.head.json",
    "run/run.json",
    "run/context_manifest.json",
    "run/results.csv",
    "analysis/analysis.json",
    "analysis/summary.md",
    "power/power.csv",
    "contamination/contamination.json",
    "contamination/contamination.md",
    "contamination/manifest.json",
    "figures/execution-order.png",
    "analysis/accuracy_by_position.png",
    "analysis/bootstrap_distribution.png",
    "analysis/completeness.png",
    "analysis/forest_difference.png",
    "power/power_curve.png",
    "compare/comparison/comparison.json",
    "compare/comparison/comparison.md",
    "compare/comparison/comparison_forest.png",
    "compare/comparison/comparison_accuracy.png",
    "compare/comparison/grid.csv",
    "compare/comparison/grid.md",
    "compare/comparison/grid.png",
    "compare/runs/sim-steady/journal.jsonl",
    "compare/prepared/sim-steady/manifest.json",
    "pilot/pilot.json",
    "pilot/design.json",
    "pilot/prepared/protocol.json",
    "pilot/run/journal.jsonl",
    "pilot/run/run.json",
    "pilot/run/results.csv",
    "calibration/calibrated-protocol.json",
    "calibration/calibration.json",
    "calibration/power.csv",
    "calibration/accuracy_by_length.png",
    "calibration/power_curve.png",
)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    target = tmp_path / "regenerated"
    shutil.copytree(REFERENCE, target)
    return target


def _only_problem(committed: Path, regenerated: Path) -> list[str]:
    diff = diff_evidence(committed, regenerated)
    assert not diff.ok
    return [line for line in diff.lines() if not line.startswith(("compared", "not compared"))]


def test_the_reference_compares_every_data_file_and_skips_only_what_varies(copy: Path) -> None:
    diff = diff_evidence(REFERENCE, copy)
    assert diff.ok, diff.lines()
    assert set(MUST_COMPARE) <= set(diff.compared)
    # everything skipped is a notebook, its rendering, or a run's provenance record
    assert all(
        rel.endswith((".ipynb", ".html", ".css", "provenance.jsonl")) for rel in diff.not_compared
    ), diff.not_compared
    assert len(diff.compared) + len(diff.not_compared) == sum(
        1 for p in REFERENCE.rglob("*") if p.is_file()
    )
    assert diff.lines()[-1] == f"evidence-diff OK: all {len(diff.compared)} files identical"


def _swap_columns(line: str, i: int, j: int) -> str:
    cells = line.split("|")
    cells[i], cells[j] = cells[j], cells[i]
    return "|".join(cells)


def test_swapped_columns_of_the_contamination_report_are_named(copy: Path) -> None:
    md = copy / "contamination" / "contamination.md"
    lines = md.read_text(encoding="utf-8").split("\n")
    start = lines.index("| role | path | sha256 |")
    end = lines.index("", start)
    lines[start:end] = [_swap_columns(line, 2, 3) for line in lines[start:end]]
    md.write_text("\n".join(lines), encoding="utf-8")

    report = copy / "contamination" / "contamination.json"
    document = json.loads(report.read_bytes())
    assert canonical_bytes(document) + b"\n" == report.read_bytes()  # only the swap changes
    for row in document["inputs"]:
        row["path"], row["sha256"] = row["sha256"], row["path"]
    report.write_bytes(canonical_bytes(document) + b"\n")

    problems = _only_problem(REFERENCE, copy)
    assert [p.split(" (")[0] for p in problems[:-1]] == [
        "differs: contamination/contamination.json",
        "differs: contamination/contamination.md",
    ]
    assert problems[-1] == "evidence-diff FAILED: 2 file(s) differ"


def test_one_flipped_png_byte_is_named(copy: Path) -> None:
    png = copy / "analysis" / "forest_difference.png"
    data = bytearray(png.read_bytes())
    data[len(data) // 2] ^= 0x01
    png.write_bytes(bytes(data))
    problems = _only_problem(REFERENCE, copy)
    assert problems[0].startswith("differs: analysis/forest_difference.png (first difference")
    assert f"at byte {len(data) // 2};" in problems[0]


def test_an_edited_summary_is_named(copy: Path) -> None:
    summary = copy / "analysis" / "summary.md"
    text = summary.read_text(encoding="utf-8")
    summary.write_text(text.replace("not supported", "supported", 1), encoding="utf-8")
    assert _only_problem(REFERENCE, copy)[0].startswith("differs: analysis/summary.md")


def test_a_committed_file_not_regenerated_and_an_uncommitted_one_fail(copy: Path) -> None:
    (copy / "power" / "power.csv").unlink()
    (copy / "run" / "extra.json").write_text("{}\n", encoding="utf-8")
    problems = _only_problem(REFERENCE, copy)
    assert problems[:2] == [
        "committed but not regenerated: power/power.csv",
        "regenerated but not committed: run/extra.json",
    ]


def test_the_excluded_files_may_vary(copy: Path) -> None:
    (copy / "run" / "provenance.jsonl").write_text("{}\n", encoding="utf-8")
    (copy / "03-run.ipynb").write_text("{}", encoding="utf-8")
    (copy / "03-run.html").unlink()
    assert diff_evidence(REFERENCE, copy).ok
    # but only at the top level: a notebook inside a data folder is data
    (copy / "run" / "stray.ipynb").write_text("{}", encoding="utf-8")
    lines = diff_evidence(REFERENCE, copy).lines()
    assert "regenerated but not committed: run/stray.ipynb" in lines


def test_the_command_exits_1_naming_the_file_and_2_without_a_folder(
    copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evidence-diff", str(REFERENCE), str(copy)]) == 0
    (copy / "run" / "results.csv").write_bytes(b"changed\n")
    assert main(["evidence-diff", str(REFERENCE), str(copy)]) == 1
    assert "differs: run/results.csv (first difference at byte 0;" in capsys.readouterr().out
    assert main(["evidence-diff", str(REFERENCE), str(tmp_path / "missing")]) == 2
    assert "missing: not a folder" in capsys.readouterr().err
    with pytest.raises(NeedlepointError):
        diff_evidence(tmp_path / "missing", copy)
