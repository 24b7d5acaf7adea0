"""The declared depth study (`evidence/20261205-depth-study`) re-derives from its own files.

Offline and without the model: the declaration came before every request (the pilot journal's
first record carries its SHA-256, and it lists no journal of this study), the pilot passes
`audit-run` and attempted every planned request, its results.csv and the calibration record
come out byte for byte as committed, the calibration writes no version (so there is no main
run, as the declared rule says), the README's generated tables and numbers are what the files
say, and the registry lists the pilot and the calibration.

The calibration is re-derived against everything under `evidence/`: nothing was run after it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from needlepoint.design.prepared import load_prepared
from needlepoint.jsonio import file_sha256
from needlepoint.local.compare import attempted
from needlepoint.pilot.calibrate import ABOVE_ATTAINABLE, CalibrationOptions, calibrate
from needlepoint.pilot.record import record_bytes
from needlepoint.run.audit import audit_run
from needlepoint.run.declaration import read_declaration
from needlepoint.run.results import RESULTS_NAME, csv_chunks, derive
from needlepoint.study.readme import fill, marked, study_blocks

EVIDENCE = Path(__file__).resolve().parents[2] / "evidence"
STUDY = EVIDENCE / "20261205-depth-study"
DECLARATION = STUDY / "declaration.json"
CALIBRATION = STUDY / "calibration" / "qwen-1.5b.json"
# The declared calibration options (plan.md).
OPTIONS = CalibrationOptions(
    band_low=0.25, band_high=0.95, effect=0.2, max_cases=6, descriptive_cases=6,
    simulations=1000, seed=20260930,
)  # fmt: skip


def _first_record(run: Path) -> dict:
    with (run / "journal.jsonl").open(encoding="utf-8") as f:
        return json.loads(f.readline())


def test_the_pilot_is_audited_and_declared_first() -> None:
    run = STUDY / "pilot" / "run"
    report = audit_run(run)
    assert report.ok, report.lines()
    # Both sessions ran the commit that added the declaration file: the code is the declared
    # code, and the warning says so.
    code = [w for w in report.warnings if "ran other code" in w]
    if code:  # git can compare the commits in a clone with history
        assert all("identical in the two commits" in w for w in code), code
    declared = read_declaration(DECLARATION)
    assert declared.sha256 == file_sha256(DECLARATION)
    first = _first_record(run)
    assert first["type"] == "session" and first["declaration_sha256"] == declared.sha256
    assert declared.record.time < first["time"]
    assert not any(STUDY.name in h.path for h in declared.record.heads)
    assert declared.record.code is not None and declared.record.code.tree_clean


def test_the_pilot_attempted_every_planned_request() -> None:
    run = STUDY / "pilot" / "run"
    assert attempted(run) == len(load_prepared(STUDY / "pilot" / "prepared").plan) == 144


def test_results_rederive_byte_for_byte() -> None:
    run = STUDY / "pilot" / "run"
    assert b"".join(csv_chunks(derive(run).rows)) == (run / RESULTS_NAME).read_bytes()


def test_the_calibration_rederives_byte_for_byte_and_writes_no_version() -> None:
    from needlepoint.study.scan import records_for

    result = calibrate(STUDY / "pilot", OPTIONS, records_for(EVIDENCE))
    assert record_bytes(result.record) == CALIBRATION.read_bytes()
    rec = result.record
    assert result.protocol is None and rec.verdict == ABOVE_ATTAINABLE
    assert rec.chosen_lengths == (60, 240)  # both inside the declared band in each arm
    assert rec.largest_effect == pytest.approx(-1 / 12)
    m = rec.depth_model
    assert m is not None
    # Near names lower the ends (D0 1 -> 0.75, D1 0.25 -> 0) below an interior already low.
    assert (m.low[0], m.high[0], m.low[4], m.high[4]) == (1.0, 0.75, 0.25, 0.0)
    assert not (STUDY / "main").exists()
    assert sorted(p.name for p in (STUDY / "calibration").iterdir()) == [
        "accuracy_by_length.png",
        "calibrate.txt",
        "qwen-1.5b.json",
    ]


def test_the_readme_tables_are_what_the_files_say() -> None:
    text = (STUDY / "README.md").read_text(encoding="utf-8")
    blocks = study_blocks(STUDY, EVIDENCE)
    assert set(blocks) <= set(marked(text))
    assert marked(fill(text, blocks)) == marked(text)


def test_the_registry_lists_the_pilot_and_the_calibration() -> None:
    registry = "\n".join(study_blocks(STUDY, EVIDENCE)["registry"])
    assert f"pilot {STUDY.name}/pilot/run:" in registry
    assert f"calibration {STUDY.name}/calibration/qwen-1.5b.json" in registry


def test_the_readme_counts_are_the_pilots() -> None:
    from needlepoint.analysis.inputs import from_run

    inp = from_run(STUDY / "pilot" / "run", pilot=True)
    conditions = ("D0", "D0.25", "D0.5", "D0.75", "D1", "A")
    readme = (STUDY / "README.md").read_text("utf-8")
    for sim in ("low", "high"):
        for n in (60, 240):
            cells = []
            for c in conditions:
                rows = [
                    o for o in inp.outcomes if (o.similarity, o.length, o.condition) == (sim, n, c)
                ]
                valid = [o for o in rows if o.valid]
                cells.append(f"{sum(o.status == 'correct' for o in valid)}/{len(valid)}")
            assert f"| {sim} | {n} | {' | '.join(cells)} |" in readme
    wrong = [o for o in inp.outcomes if o.similarity == "high" and o.condition != "A"]
    wrong = [o for o in wrong if o.status == "error"]
    named = sum(o.near_side is not None for o in wrong)
    before = sum(o.near_side == "before" for o in wrong)
    assert (len(wrong), named, before, named - before) == (47, 22, 16, 6)
    flat = " ".join(readme.split())
    assert (
        "Of the 47 wrong answers to a present target under high similarity, 22 give a near "
        "name's code: 16 one placed before the target, 6 one after it" in flat
    )
