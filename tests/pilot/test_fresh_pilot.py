"""A new pilot is fresh against everything on record (issue 20: pilot on fresh held-out
materials), except a model variant's pilot of the same design at the same lengths and cases.

Without the record, two pilots of one design at lengths 12 with 4 and with 8 cases both take
candidate 0, so the second re-asks the first's four cases, which a deterministic model would
answer the same way again.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.pilots import design_file

from needlepoint.cli import main
from needlepoint.design.generate import generate_cases
from needlepoint.pilot import folder
from needlepoint.pilot.record import read_pilot_record

ROOT = Path(__file__).resolve().parents[2]


def _pilot(root: Path, name: str, design: Path, cases: int, *extra: str) -> int:
    """A simulated pilot under ``root``, which is the evidence root when it is named so."""
    recorded = ["--evidence-root", str(root)] if root.name == "evidence" else []
    return main(
        [
            *["pilot", "--protocol", str(design), "--out", str(root / name)],
            *["--lengths", "12", "--cases", str(cases), "--allow", str(cases * 8)],
            *["--simulate", "perfect", "--no-progress", *recorded, *extra],
        ]
    )


def _asked(pilot: Path) -> tuple[set[str], set[str]]:
    protocol = json.loads((pilot / "prepared" / "protocol.json").read_text(encoding="utf-8"))
    cases = generate_cases(protocol)
    return {c.target_name for c in cases}, {c.target_code for c in cases}


def test_a_second_pilot_avoids_the_first_and_records_why(tmp_path: Path) -> None:
    root = tmp_path / "evidence"
    root.mkdir()
    design = design_file(tmp_path / "d")
    assert _pilot(root, "p4", design, 4) == 0
    assert _pilot(root, "p8", design, 8, "--version", "7") == 0  # v6 is p4's
    first, second = read_pilot_record(root / "p4"), read_pilot_record(root / "p8")
    assert first.materials_seed.attempt == 0 and first.materials_seed.rule == folder.PILOT_RULE
    seed = second.materials_seed
    assert seed.attempt >= 1 and seed.rule == folder.PILOT_RULE + folder.PILOT_RECORD_RULE
    assert "`p4/prepared`" in seed.rejected[0].overlap
    names4, codes4 = _asked(root / "p4")
    names8, codes8 = _asked(root / "p8")
    assert not names4 & names8 and not codes4 & codes8


def test_without_a_record_the_second_pilot_would_repeat_the_first(tmp_path: Path) -> None:
    design = design_file(tmp_path / "d")
    assert _pilot(tmp_path, "p4", design, 4) == 0  # no folder named evidence: nothing on record
    assert _pilot(tmp_path, "p8", design, 8, "--version", "7") == 0
    assert read_pilot_record(tmp_path / "p8").materials_seed.attempt == 0
    names4, _ = _asked(tmp_path / "p4")
    names8, _ = _asked(tmp_path / "p8")
    assert names4 <= names8


def test_a_model_variant_pilot_shares_the_materials(tmp_path: Path) -> None:
    root = tmp_path / "evidence"
    root.mkdir()
    design = design_file(tmp_path / "d")
    variant = design_file(tmp_path / "v", model="another-model")
    assert _pilot(root, "p4", design, 4) == 0
    assert _pilot(root, "v4", variant, 4) == 0
    assert read_pilot_record(root / "v4").materials_seed.attempt == 0
    assert _asked(root / "p4") == _asked(root / "v4")


def test_a_version_another_design_uses_is_refused_before_anything_is_written(
    tmp_path: Path, capsys
) -> None:
    root = tmp_path / "evidence"
    root.mkdir()
    design = design_file(tmp_path / "d")
    assert _pilot(root, "p4", design, 4) == 0
    assert _pilot(root, "p8", design, 8) == 2  # its default version 6 is p4's
    assert "version 6 of context-position-similar is already used" in capsys.readouterr().err
    assert not (root / "p8").exists()


def test_the_documented_pilot_record_rule_is_the_one_recorded() -> None:
    doc = (ROOT / "docs" / "pilot.md").read_text(encoding="utf-8")
    assert f"```text\n{folder.PILOT_RECORD_RULE}\n```" in doc
