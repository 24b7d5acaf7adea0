"""The committed reference set must regenerate byte for byte from today's code.

Any change that would alter the frozen materials fails here until a new protocol version is
made (and a new evidence folder committed for it).
"""

from __future__ import annotations

from pathlib import Path

from needlepoint.design.audit import audit_prepared
from needlepoint.design.freeze import generate
from needlepoint.design.prepared import DATA_FILES
from needlepoint.design.protocol import reference_protocol
from needlepoint.design.verify import verify_prepared

EVIDENCE = Path(__file__).resolve().parents[2] / "evidence" / "20261130-offline-prepared"


def test_committed_reference_set_regenerates_exactly() -> None:
    files = generate(reference_protocol())
    for name in DATA_FILES:
        assert (EVIDENCE / name).read_bytes() == files[name], name


def test_committed_reference_set_verifies_and_audits() -> None:
    report = verify_prepared(EVIDENCE)
    assert report.ok, report.problems
    assert audit_prepared(EVIDENCE).ok
