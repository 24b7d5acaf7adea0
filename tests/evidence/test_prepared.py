"""The committed reference set must regenerate byte for byte from today's code.

Any change that would alter the frozen materials fails here until a new protocol version is
made (and a new evidence folder committed for it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from needlepoint.cli import main
from needlepoint.design.audit import audit_prepared
from needlepoint.design.generate import generate
from needlepoint.design.protocol import reference_protocol
from needlepoint.design.schema import DATA_FILES
from needlepoint.design.verify import verify_prepared

ROOT = Path(__file__).resolve().parents[2] / "evidence"
EVIDENCE = ROOT / "20261130-offline-prepared"


def test_committed_reference_set_regenerates_exactly() -> None:
    files = generate(reference_protocol())
    for name in DATA_FILES:
        assert (EVIDENCE / name).read_bytes() == files[name], name


def test_committed_reference_set_verifies_and_audits() -> None:
    report = verify_prepared(EVIDENCE)
    assert report.ok, report.problems
    assert audit_prepared(EVIDENCE).ok


@pytest.mark.parametrize("folder", ["20261130-offline-prepared", "20261130-local-smollm2/prepared"])
def test_folders_prepared_before_the_stage_packages_still_verify(
    folder: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Their manifests name the old flat modules: verify says so once and still proves bytes."""
    assert main(["verify", str(ROOT / folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(
        "warning: manifest.json records generating sources of another module layout "
        "(needlepoint/freeze.py, "
    )
    assert lines[0].endswith("they are not compared file by file (materials still identical)")
    # Prepared before design fingerprints too: verify names the one protocol.json gives.
    assert lines[1].startswith("warning: manifest.json has no design_fingerprint")
    assert lines[2].startswith("verify OK: 4 files, ") and lines[2].endswith("2 warnings")


def test_reference_evidence_manifest_records_the_v1_design_fingerprint() -> None:
    import json

    from needlepoint.design.protocol import design_fingerprint

    reference = ROOT / "20261130-simulated-reference"
    manifest = json.loads((reference / "prepared" / "manifest.json").read_text())
    assert manifest["design_fingerprint"] == design_fingerprint(reference_protocol())
    offline = json.loads((EVIDENCE / "manifest.json").read_text())
    assert manifest["files"] == offline["files"]  # the v1 materials and protocol fingerprint
