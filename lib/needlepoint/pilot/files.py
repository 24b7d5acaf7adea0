"""The calibration's files: the new protocol version and the calibration record.

Neither is ever overwritten: a calibrated version is a frozen decision. Writing the very same
bytes again is allowed (a notebook re-executed in its folder); different bytes are refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from needlepoint.design.protocol import protocol_bytes
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import write_bytes_atomic
from needlepoint.pilot.calibration_record import (
    CALIBRATION_FORMAT,
    CALIBRATION_VERSION,
    CalibrationRecord,
)
from needlepoint.pilot.record import read_versioned, record_bytes


def _write_once(path: Path, data: bytes) -> Path:
    if path.is_dir() or (path.exists() and path.read_bytes() != data):
        raise NeedlepointError(f"{path}: exists; a calibration never overwrites a file")
    if not path.parent.is_dir():
        raise NeedlepointError(f"{path.parent}: no such folder")
    if not path.exists():
        write_bytes_atomic(path, data)
    return path


def write_protocol(protocol: dict[str, Any], out: str | Path) -> Path:
    """Write the calibrated protocol as a protocol file, ready for `needlepoint prepare`."""
    return _write_once(Path(out), protocol_bytes(protocol))


def write_report(record: CalibrationRecord, out: str | Path) -> Path:
    """Write the calibration record on its own (also when no protocol is recommended)."""
    return _write_once(Path(out), record_bytes(record))


def read_report(path: str | Path) -> CalibrationRecord:
    """Read a calibration record file, refusing another format or version."""
    return read_versioned(Path(path), CalibrationRecord, CALIBRATION_FORMAT, CALIBRATION_VERSION)


def rationale_record(protocol: dict[str, Any], where: str = "protocol") -> CalibrationRecord:
    """The calibration record a calibrated protocol carries as its rationale."""
    from needlepoint.schema import from_plain

    value = protocol.get("rationale")
    if not isinstance(value, dict) or value.get("kind") != "calibration":
        raise NeedlepointError(f"{where}: has no calibration rationale")
    return from_plain(CalibrationRecord, value, f"{where}: rationale")


def check_new(out: str | Path) -> Path:
    """Refuse an output file that exists already or whose folder does not: before any work."""
    path = Path(out)
    if path.exists():
        raise NeedlepointError(f"{path}: exists; a calibration never overwrites a file")
    if not path.parent.is_dir():
        raise NeedlepointError(f"{path.parent}: no such folder")
    return path
