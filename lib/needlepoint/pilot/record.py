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
from needlepoint.design.schema import MAX_SIMULATIONS
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


# What a calibration may be asked for: the rules' parameters in range, and a search whose
# size is known before it starts.
#
# The search simulates ``simulations`` designs at every multiple of the order count up to
# ``max_cases`` (512 cases once took 51 s; 10^9 ran until killed), so its work is bounded in
# simulated cases before the first simulation.

REQUESTS_PER_PAIR = 8  # two similarity blocks of four conditions
# The work bound is in simulated cases (about 0.65 million a second on a shared 2-core machine).
MAX_SEARCH_CASES = 1024
MAX_SEARCH_WORK = 40_000_000


@dataclass(frozen=True)
class CalibrationOptions:
    """What `calibrate` is asked for: the rules' parameters and the new version number."""

    band_low: float = 0.6
    band_high: float = 0.95
    min_pair_complete: float = 0.5
    effect: float = 0.2
    target_power: float = 0.8
    complete_margin: int = 2
    max_cases: int = 128
    max_requests: int | None = None
    simulations: int = 1000
    seed: int = 20260930
    version: int | None = None
    # Each similarity arm's end accuracy must be inside the band (issue 34). Off only to
    # re-derive a calibration made before, when the band read both arms pooled.
    band_per_similarity: bool = True
    # When no count within the bound reaches the target power, write a protocol at this many
    # cases anyway, labelled descriptive (declared before the pilot; None: write nothing).
    descriptive_cases: int | None = None


def check_options(o: CalibrationOptions) -> None:
    """Refuse parameters the rules cannot use, with one line naming the parameter."""
    if not 0 <= o.band_low < o.band_high <= 1:
        raise NeedlepointError(f"--band {o.band_low:g},{o.band_high:g}: need 0 <= LOW < HIGH <= 1")
    if not 0 < o.min_pair_complete <= 1 or not 0 < o.target_power < 1:
        raise NeedlepointError("min_pair_complete and target_power must lie in (0, 1)")
    if o.max_cases < 1 or o.simulations < 1 or o.complete_margin < 1 or (o.max_requests or 1) < 1:
        raise NeedlepointError("--max-cases, --simulations and the margin must be positive")
    if o.max_cases > MAX_SEARCH_CASES or o.simulations > MAX_SIMULATIONS:
        raise NeedlepointError(
            f"--max-cases {o.max_cases} / --simulations {o.simulations}: at most "
            f"{MAX_SEARCH_CASES} cases and {MAX_SIMULATIONS:,} simulations per count"
        )
    if not 0 <= o.seed < 2**63:
        raise NeedlepointError(f"--seed {o.seed}: must lie in 0 to 2^63 - 1")


def check_search(o: CalibrationOptions, step: int, lengths: int = 1) -> None:
    """Refuse a search that would simulate more than MAX_SEARCH_WORK cases, before it starts."""
    bound = case_bound(o, (0,) * lengths)
    counts = bound // max(step, 1)
    work = o.simulations * step * counts * (counts + 1) // 2
    if work > MAX_SEARCH_WORK:
        raise NeedlepointError(
            f"--max-cases {o.max_cases} with --simulations {o.simulations} would simulate about "
            f"{work:,} cases in the search (limit {MAX_SEARCH_WORK:,}); lower one of them"
        )


def check_descriptive(o: CalibrationOptions, step: int, bound: int) -> None:
    """A descriptive count must be a positive multiple of the order count within the bound."""
    n = o.descriptive_cases
    if n is not None and (n < 1 or n % step or n > bound):
        raise NeedlepointError(
            f"--descriptive-cases {n}: must be a positive multiple of the {step} orders and at "
            f"most {bound} (the search bound at the qualifying lengths)"
        )


def check_effect(o: CalibrationOptions, threshold: float) -> None:
    """The effect must exceed the design's threshold, or 80% power is out of reach."""
    if not threshold < o.effect <= 1:
        raise NeedlepointError(
            f"--effect {o.effect:g} must exceed the threshold {threshold:g}: at an effect equal "
            "to the threshold the estimate falls below it about half the time, so power "
            "never reaches 80% there, whatever the count"
        )


def case_bound(
    o: CalibrationOptions, lengths: tuple[int, ...], per_pair: int = REQUESTS_PER_PAIR
) -> int:
    """The largest count the search may try: ``max_cases``, or fewer within ``max_requests``
    (``per_pair``: a case's requests at one length, 8 in the reference design)."""
    per_case = len(lengths) * per_pair
    return o.max_cases if o.max_requests is None else min(o.max_cases, o.max_requests // per_case)
