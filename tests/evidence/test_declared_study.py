"""The committed declared study re-derives from its own files (issue 20, done when).

Offline and without the model: the declaration came before every run (each journal's first
record carries its SHA-256 and `audit-run` checks it), every planned request was attempted,
results.csv, both calibrations, the main run's analysis and the README's generated tables come
out byte for byte as committed, and the registry lists every run of the folder.

The calibrations are re-derived against the record as it was when they were made: everything
under `evidence/` except the main run, which was prepared from one of them afterwards (its
materials would otherwise be avoided too). A design run under `evidence/` after this study would
have to be left out the same way.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from needlepoint.cli.app import main
from needlepoint.design.prepared import load_prepared
from needlepoint.design.protocol import protocol_bytes
from needlepoint.jsonio import file_sha256, read_json
from needlepoint.local.compare import attempted
from needlepoint.pilot.calibrate import CalibrationOptions, calibrate
from needlepoint.pilot.record import record_bytes
from needlepoint.run.audit import audit_run
from needlepoint.run.declaration import read_declaration
from needlepoint.run.results import RESULTS_NAME, csv_chunks, derive
from needlepoint.study.scan import records_for
from needlepoint.study.readme import fill, marked, study_blocks

EVIDENCE = Path(__file__).resolve().parents[2] / "evidence"
STUDY = EVIDENCE / "20261201-declared-study"
DECLARATION = STUDY / "declarations" / "declaration.json"
RUNS = ("pilots/c1/run", "pilots/c2/run", "main/run")
# The declared calibration options (declarations/plan.md), one version per candidate.
VERSIONS = {"c1": 32, "c2": 33}


def _options(version: int, per_similarity: bool = False) -> CalibrationOptions:
    """The declared options; the band read both similarity arms pooled when they were made."""
    return CalibrationOptions(
        effect=0.2, max_requests=1024, simulations=1000, seed=20260930, version=version,
        band_per_similarity=per_similarity,
    )  # fmt: skip


def _first_record(run: Path) -> dict:
    with (run / "journal.jsonl").open(encoding="utf-8") as f:
        return json.loads(f.readline())


@pytest.mark.parametrize("rel", RUNS)
def test_each_run_is_complete_audited_and_declared_first(rel: str) -> None:
    run = STUDY / rel
    report = audit_run(run)
    assert report.ok, report.lines()
    assert attempted(run) == len(load_prepared(run.parent / "prepared").plan)
    declared = read_declaration(DECLARATION)
    first = _first_record(run)
    assert first["type"] == "session" and first["declaration_sha256"] == declared.sha256
    assert declared.sha256 == file_sha256(DECLARATION)
    # The declaration's own time comes before the run's first session, and it lists no journal
    # of this study: nothing of it had run when it was made.
    assert declared.record.time < first["time"]
    assert not any("20261201-declared-study" in h.path for h in declared.record.heads)


@pytest.mark.parametrize("rel", RUNS)
def test_results_rederive_byte_for_byte(rel: str) -> None:
    run = STUDY / rel
    assert b"".join(csv_chunks(derive(run).rows)) == (run / RESULTS_NAME).read_bytes()


@pytest.fixture(scope="module")
def then() -> tuple:
    """The record as the calibrations saw it: everything but the main run and the designs of
    evidence folders made after the study (the date their names begin with), which the
    calibrations could not avoid."""
    from needlepoint.study.scan import designs_run

    main = read_json(STUDY / "main" / "run" / "run.json")["design_fingerprint"]
    later = [d for d in designs_run(EVIDENCE) if d.path[:8] > STUDY.name[:8]]
    assert "20261205-depth-qwen/prepared" in [d.path for d in later]
    kept = [d.record for d in designs_run(EVIDENCE) if d not in later]
    return tuple(r for r in kept if r.design_fingerprint != main)


@pytest.mark.parametrize("cand", sorted(VERSIONS))
def test_calibrations_rederive_byte_for_byte(cand: str, then: tuple) -> None:
    result = calibrate(STUDY / "pilots" / cand, _options(VERSIONS[cand]), then)
    committed = STUDY / "calibration"
    assert record_bytes(result.record) == (committed / f"{cand}.json").read_bytes()
    assert result.protocol is not None
    assert protocol_bytes(result.protocol) == (committed / f"{cand}-protocol.json").read_bytes()


@pytest.mark.parametrize("cand", sorted(VERSIONS))
def test_today_each_candidate_would_be_refused_with_its_numbers(cand: str, then: tuple) -> None:
    """Issue 34: each similarity arm's end accuracy must be inside the band. C2's low arm sits at
    the ceiling (32/32 at both lengths) and its high arm below the band, C1's high arm too: both
    are refused now, as the README says; the recorded calibrations stay as they were made."""
    result = calibrate(STUDY / "pilots" / cand, _options(VERSIONS[cand], True), then)
    assert result.protocol is None and result.record.verdict == "no length qualifies"
    assert result.record.rules.band_per_similarity is True
    if cand == "c2":
        assert result.record.reason.startswith(
            "12: end accuracy under low similarity 1.000 (32/32) is above the band (ceiling "
            "side); end accuracy under high similarity 0.438 (14/32) is below the band"
        )


def test_the_declared_choice_is_the_main_run() -> None:
    """Fewest planned requests (cases x lengths x 8) among recommended versions; C1 on a tie."""
    planned = {}
    for cand in sorted(VERSIONS):
        protocol = read_json(STUDY / "calibration" / f"{cand}-protocol.json")
        planned[cand] = protocol["cases"] * len(protocol["lengths"]) * 8
    chosen = min(sorted(planned), key=lambda c: planned[c])
    main = load_prepared(STUDY / "main" / "prepared")
    assert main.protocol == read_json(STUDY / "calibration" / f"{chosen}-protocol.json")
    assert len(main.plan) == planned[chosen]


def test_the_analysis_rederives_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`needlepoint analyze main/run --out main/analysis`, run in the study folder as it was:
    the summary's study record names the run relative to it and reads the declaration."""
    study = tmp_path / "evidence" / STUDY.name
    for part in ("main/prepared", "main/run", "declarations"):
        shutil.copytree(STUDY / part, study / part)
    monkeypatch.chdir(study)
    assert main(["analyze", "main/run", "--out", "main/analysis"]) == 0
    for name in ("analysis.json", "summary.md"):
        committed = (STUDY / "main" / "analysis" / name).read_bytes()
        assert (study / "main" / "analysis" / name).read_bytes() == committed, name


def test_the_readme_tables_are_what_the_files_say() -> None:
    text = (STUDY / "README.md").read_text(encoding="utf-8")
    blocks = study_blocks(STUDY, EVIDENCE)
    assert set(blocks) <= set(marked(text))
    assert marked(fill(text, blocks)) == marked(text)


def test_the_registry_lists_every_run_of_the_folder() -> None:
    registry = "\n".join(study_blocks(STUDY, EVIDENCE)["registry"])
    for rel in RUNS:
        kind = "run" if rel.startswith("main") else "pilot"
        assert f"{kind} {STUDY.name}/{rel}:" in registry, rel
    assert f"calibration {STUDY.name}/calibration/c1.json" in registry
    assert f"analysis {STUDY.name}/main/analysis" in registry


def test_the_command_refuses_c2_with_the_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`needlepoint calibrate` on the C2 pilot, whose low arm is at the ceiling: exit 1, the
    numbers of each arm outside the band, and no protocol written."""
    out = tmp_path / "c2-now.json"
    argv = ["calibrate", str(STUDY / "pilots" / "c2"), "--out", str(out), "--effect", "0.2",
            "--max-requests", "1024", "--simulations", "50", "--version", "99"]  # fmt: skip
    assert main(argv) == 1
    printed = capsys.readouterr().out
    assert "end accuracy under low similarity 1.000 (32/32) is above the band (ceiling side)" in (
        printed
    )
    assert "NO PROTOCOL WRITTEN: no length qualifies" in printed
    assert not out.exists()
