"""The pilot's records: ``pilot.json`` and the ``rationale`` of a pilot's protocol.

A pilot folder is marked three ways, so that no reader can take it for a main run: its
``pilot.json`` (``pilot: true``), the ``rationale`` of its prepared protocol (``kind: "pilot"``)
and its run's ``run.json`` (``extra.pilot: true``). docs/schema.md states every field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.design.protocol import design_fingerprint
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes, sha256_hex, write_bytes_atomic
from needlepoint.schema import AddedLater, document_bytes, read_versioned

PILOT_FORMAT = "needlepoint-pilot"
PILOT_VERSION = 1
PILOT_NAME = "pilot.json"
PILOT_KIND = "pilot"
# The pilot folder's fixed layout, relative to the folder.
PREPARED_DIR = "prepared"
RUN_DIR = "run"


@dataclass(frozen=True)
class DesignRef(AddedLater):
    """The design a pilot calibrates, as it was given to ``needlepoint pilot``.

    ``depths`` came later: a depth design's grid (absent for a B/M/E design).
    """

    ADDED_LATER = ("depths",)

    protocol_id: str
    version: int
    protocol_sha256: str
    design_fingerprint: str
    materials_seed: int
    lengths: tuple[int, ...]
    cases: int
    depths: tuple[float, ...] | None = None


@dataclass(frozen=True)
class RejectedSeed:
    """A candidate materials seed that was not used, and the first overlap that ruled it out."""

    attempt: int
    seed: int
    overlap: str


@dataclass(frozen=True)
class HeldOutSeed:
    """A materials seed, the attempt that gave it, the derivation rule and every rejection."""

    seed: int
    attempt: int
    rule: str
    rejected: tuple[RejectedSeed, ...]


@dataclass(frozen=True)
class PilotRationale:
    """The ``rationale`` of a pilot's protocol: which design it calibrates, and its seed."""

    kind: str
    design: DesignRef
    materials_seed: HeldOutSeed


@dataclass(frozen=True)
class PilotRecord:
    """pilot.json: what this pilot folder is, written before its first request."""

    format: str
    version: int
    pilot: bool
    package_version: str
    design: DesignRef
    protocol_version: int
    lengths: tuple[int, ...]
    cases: int
    materials_seed: HeldOutSeed
    prepared_dir: str
    run_dir: str
    prepared_fingerprint: str


def protocol_sha256(protocol: dict[str, Any]) -> str:
    """SHA-256 of a merged protocol's canonical JSON: names the design a pilot calibrates."""
    return sha256_hex(canonical_bytes(protocol))


def design_ref(protocol: dict[str, Any]) -> DesignRef:
    """The reference to a design protocol that a pilot and a calibration record."""
    return DesignRef(
        protocol_id=protocol["protocol_id"],
        version=protocol["version"],
        protocol_sha256=protocol_sha256(protocol),
        design_fingerprint=design_fingerprint(protocol),
        materials_seed=protocol["seeds"]["materials"],
        lengths=tuple(protocol["lengths"]),
        cases=protocol["cases"],
        depths=tuple(protocol["depths"]) if "depths" in protocol else None,
    )


# A pilot or calibration record as a file: sorted keys, two-space indent, final newline.
record_bytes = document_bytes


def write_pilot_record(folder: Path, record: PilotRecord) -> None:
    """Write pilot.json (once, when the pilot folder is created)."""
    write_bytes_atomic(folder / PILOT_NAME, record_bytes(record))


def read_pilot_record(folder: str | Path) -> PilotRecord:
    """Load a pilot folder's pilot.json; a folder without one is not a pilot."""
    root = Path(folder)
    if not root.is_dir():
        raise NeedlepointError(f"{root}: no such pilot folder")
    path = root / PILOT_NAME
    if not path.is_file():
        raise NeedlepointError(f"{root}: not a pilot folder (no {PILOT_NAME})")
    record: PilotRecord = read_versioned(path, PilotRecord, PILOT_FORMAT, PILOT_VERSION)
    if record.pilot is not True:
        raise NeedlepointError(f"{path}: field pilot: expected true")
    if record.prepared_dir != PREPARED_DIR or record.run_dir != RUN_DIR:
        raise NeedlepointError(
            f"{path}: prepared_dir and run_dir must be {PREPARED_DIR}, {RUN_DIR}"
        )
    return record
