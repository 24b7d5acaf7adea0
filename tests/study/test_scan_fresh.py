"""Fresh materials for a new version: `prepare` refuses reused target names, codes or request
bytes of a design already run under the root (unless `--reuse-materials REASON`, recorded), a
version number another design uses is refused, and `calibrate` draws a seed that avoids every
design on record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fuzz import run_cli
from support.pilots import design_file, simulated_pilot

from needlepoint.design.generate import generate_cases
from needlepoint.design.prepared import load_prepared, prepare
from needlepoint.pilot.calibrate import CalibrationOptions, calibrate
from needlepoint.pilot.folder import RECORD_RULE, request_hashes
from needlepoint.run.options import RunOptions
from needlepoint.run.runner import run_protocol
from needlepoint.study.scan import designs_run, records_for


def _override(folder: Path, name: str, **fields) -> Path:
    path = folder / name
    path.write_text(json.dumps(fields), encoding="utf-8")
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An evidence root with one run of a small v2 design (seed 7)."""
    base = tmp_path / "evidence"
    small = _override(tmp_path, "v2.json", version=2, cases=4, lengths=[12], seeds={"materials": 7})
    prepare(base / "prepared", small)
    options = RunOptions(allow=8, simulate="perfect", progress="off", fsync=False)
    run_protocol(base / "prepared", base / "run", options)
    return base


def test_a_new_version_on_the_same_materials_is_refused(root: Path, tmp_path: Path) -> None:
    v3 = _override(tmp_path, "v3.json", version=3, cases=8, lengths=[12], seeds={"materials": 7})
    code, _, err = run_cli(["prepare", "--out", str(root / "v3"), "--protocol", str(v3)])
    assert code == 2 and len(err.splitlines()) == 1
    assert "reuses materials of a design already run under" in err
    assert "the new version's target name of case S1, is `prepared`'s target name of case S1" in err
    assert not (root / "v3").exists()


def test_a_reason_lets_it_through_and_is_recorded(root: Path, tmp_path: Path) -> None:
    v3 = _override(tmp_path, "v3.json", version=3, cases=8, lengths=[12], seeds={"materials": 7})
    code, out, err = run_cli(
        [
            *["prepare", "--out", str(root / "v3"), "--protocol", str(v3)],
            *["--reuse-materials", "a replication of the same questions, on purpose"],
        ]
    )
    assert code == 0, err
    assert "materials reused, recorded with the reason:" in out
    protocol = load_prepared(root / "v3").protocol
    reuse = protocol["materials_reuse"]
    assert reuse["reason"] == "a replication of the same questions, on purpose"
    assert reuse["overlaps"] and "`prepared`" in reuse["overlaps"][0]
    assert run_cli(["verify", str(root / "v3")])[0] == 0  # frozen with the materials


def test_fresh_materials_a_variant_and_a_root_without_runs_pass(root: Path, tmp_path: Path) -> None:
    v3 = _override(tmp_path, "v3.json", version=3, cases=4, lengths=[12], seeds={"materials": 9})
    code, out, _ = run_cli(["prepare", "--out", str(root / "v3"), "--protocol", str(v3)])
    assert code == 0 and "materials: nothing shared with the designs run under" in out
    # The evidence root is named, not its machine path (a printed line goes into logs).
    assert "materials: nothing shared with the designs run under evidence\n" in out
    v2 = tmp_path / "v2.json"
    code, out, _ = run_cli(
        ["prepare", "--out", str(root / "variant"), "--protocol", str(v2), "--model", "m-2"]
    )
    assert code == 0  # a model variant of the design on record: the same materials by design
    code, out, _ = run_cli(["prepare", "--out", str(tmp_path / "elsewhere" / "p")])
    assert code == 0 and "no evidence root given or found" in out


def test_a_version_used_by_another_design_is_refused(root: Path, tmp_path: Path) -> None:
    other = _override(tmp_path, "o.json", version=2, cases=4, lengths=[24], seeds={"materials": 11})
    code, _, err = run_cli(["prepare", "--out", str(root / "o"), "--protocol", str(other)])
    assert code == 2 and "version 2 of context-position-similar is already used by another" in err
    assert "(prepared/protocol.json, design " in err


def test_designs_on_record_hold_what_each_run_asked(root: Path) -> None:
    [design] = designs_run(root)
    prepared = load_prepared(root / "prepared")
    assert design.path == "prepared"
    assert design.record.requests == frozenset(r.request_sha256 for r in prepared.plan)
    names = {c.target_name for c in generate_cases(prepared.protocol)}
    assert names <= set(design.record.materials.asked)
    assert request_hashes(prepared.protocol) == design.record.requests


def test_calibrate_avoids_every_design_on_record(tmp_path: Path) -> None:
    """The calibrated version's own seed (attempt 0) is the design's: a design run under the
    root on that seed makes calibrate take a derived one, which shares nothing with it."""
    base = tmp_path / "evidence"
    design = design_file(tmp_path / "d")
    pilot = simulated_pilot(base / "pilot", design)
    prepare(base / "main", design)  # the design itself, run: same seed as attempt 0
    options = RunOptions(allow=4, simulate="perfect", progress="off", fsync=False)
    run_protocol(base / "main", base / "main-run", options)
    plain = calibrate(pilot.folder, CalibrationOptions(simulations=200))
    assert plain.record.materials_seed.attempt == 0
    records = records_for(base)
    avoided = calibrate(pilot.folder, CalibrationOptions(simulations=200), records)
    seed = avoided.record.materials_seed
    assert seed.attempt >= 1 and seed.rule.endswith(RECORD_RULE)
    assert (
        "the calibrated version's target name of case S1, is `main`'s" in seed.rejected[0].overlap
    )
    mine = generate_cases(avoided.protocol)
    main = generate_cases(load_prepared(base / "main").protocol)
    assert not {c.target_name for c in mine} & {c.target_name for c in main}
    assert not request_hashes(avoided.protocol) & request_hashes(
        load_prepared(base / "main").protocol
    )


def test_calibrate_and_pilot_refuse_a_version_on_record(tmp_path: Path) -> None:
    base = tmp_path / "evidence"
    design = design_file(tmp_path / "d")  # v5: its pilot is v6, its calibration v7
    taken = _override(tmp_path, "t.json", version=7, cases=4, lengths=[12], seeds={"materials": 3})
    prepare(base / "seven", taken)
    simulated_pilot(base / "pilot", design)
    code, _, err = run_cli(["calibrate", str(base / "pilot"), "--out", str(tmp_path / "c.json")])
    assert code == 2 and "version 7 of context-position-similar is already used" in err
    code, out, err = run_cli(
        [
            *["calibrate", str(base / "pilot"), "--out", str(base / "v8.json")],
            *["--version", "8", "--simulations", "100"],
        ]
    )
    assert code == 0 and "designs the new version's materials avoid" in out, err
    pilot = [
        *["pilot", "--protocol", str(taken), "--out", str(base / "p2"), "--lengths", "12"],
        *["--cases", "4", "--allow", "32", "--simulate", "perfect", "--no-progress"],
    ]
    code, _, err = run_cli(pilot)
    assert code == 2 and "version 8 of context-position-similar is already used" in err
    assert "(v8.json, design" in err
    code, out, err = run_cli([*pilot, "--version", "30"])
    assert code == 0, err
    assert json.loads((base / "p2" / "pilot.json").read_text("utf-8"))["protocol_version"] == 30


@pytest.mark.parametrize(
    "value",
    ["because", {"reason": "", "overlaps": []}, {"reason": "r"}, {"reason": "r", "overlaps": [1]}],
)
def test_a_malformed_reuse_record_is_refused(tmp_path: Path, value: object) -> None:
    path = _override(tmp_path, "p.json", version=2, materials_reuse=value)
    code, _, err = run_cli(["prepare", "--out", str(tmp_path / "p"), "--protocol", str(path)])
    assert code == 2 and "materials_reuse must be an object with a non-empty reason" in err
