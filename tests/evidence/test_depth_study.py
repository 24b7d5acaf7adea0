"""The declared live depth study (`evidence/20261205-depth-qwen`) re-derives from its journal.

Offline and without the model: the run passes `audit-run`, attempted every planned request and
started under the amended declaration, which amends the first; results.csv, depth.json and
summary.md come out byte for byte as committed; and the numbers its README states are the
analysis's.
"""

from __future__ import annotations

import json
from pathlib import Path

from needlepoint.analysis.depth import analyze_depth
from needlepoint.analysis.depth.report import summary_markdown, to_json
from needlepoint.analysis.inputs import from_run
from needlepoint.jsonio import file_sha256
from needlepoint.run.audit import audit_run
from needlepoint.run.folder import read_run_record
from needlepoint.run.results import RESULTS_NAME, csv_chunks, derive

FOLDER = Path(__file__).resolve().parents[2] / "evidence" / "20261205-depth-qwen"


def test_the_run_is_complete_audited_and_started_under_the_amended_declaration() -> None:
    report = audit_run(FOLDER / "run")
    assert report.ok, report.lines()
    rows = derive(FOLDER / "run").rows
    assert len(rows) == 72 and all(r["status"] in ("correct", "error") for r in rows)
    run = read_run_record(FOLDER / "run")
    amended = FOLDER / "declaration-amended.json"
    assert run.declaration is not None and run.declaration.sha256 == file_sha256(amended)
    first = json.loads((FOLDER / "declaration.json").read_text("utf-8"))
    second = json.loads(amended.read_text("utf-8"))
    assert second["amends"]["sha256"] == file_sha256(FOLDER / "declaration.json")
    with (FOLDER / "run" / "journal.jsonl").open(encoding="utf-8") as journal:
        session = json.loads(journal.readline())
    assert session["declaration_sha256"] == file_sha256(amended)
    assert first["time"] < second["time"] < session["time"]


def test_results_and_analysis_rederive_byte_for_byte() -> None:
    results = derive(FOLDER / "run")
    assert b"".join(csv_chunks(results.rows)) == (FOLDER / "run" / RESULTS_NAME).read_bytes()
    d = analyze_depth(from_run(FOLDER / "run"))
    assert to_json(d) == (FOLDER / "analysis" / "depth.json").read_bytes()
    committed = (FOLDER / "analysis" / "summary.md").read_text("utf-8")
    assert summary_markdown(d, figures=True) == committed


def test_the_readme_states_the_analysis_numbers() -> None:
    d = analyze_depth(from_run(FOLDER / "run"))
    verdicts = {r.similarity: r.verdict for r in d.shapes}
    assert verdicts == {"low": "decline with position", "high": "flat"}
    assert d.near_named == {"low": (0, 0, 15), "high": (10, 4, 20)}
    assert d.absent == {"low": (6, 6), "high": (3, 6)}
    assert d.decision == "not supported"
    readme = (FOLDER / "README.md").read_text("utf-8")
    assert "| low | 6/6 | 3/6 | 2/6 | 2/6 | 2/6 | decline with position | 6/6 |" in readme
    assert "| high | 4/6 | 2/6 | 3/6 | 0/6 | 1/6 | flat | 3/6 |" in readme
    assert "14 give a near name's code: 10 one placed before the target, 4 one after it" in readme
    assert "−0.14 [−0.47, 0.19], *not\n  supported*" in readme
