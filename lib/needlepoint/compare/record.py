"""comparison.json as frozen records: runs of one design, side by side, each analysed alone.

Every number of a run is what `needlepoint analyze` gives for that run by itself; nothing here
combines runs. ``to_json`` writes sorted, indented UTF-8 (the same comparison gives the same
bytes); ``from_json`` refuses another format or version with one line. ``docs/schema.md``
states every field, and a test checks that it lists exactly these.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from needlepoint.analysis.record import AccuracyCell, Effect
from needlepoint.errors import NeedlepointError
from needlepoint.schema import AddedLater, document_bytes, read_versioned, versioned_from_json

COMPARISON_FORMAT = "needlepoint-comparison"
COMPARISON_VERSION = 2
MIXED_LABEL = (
    "MIXED — simulated and live runs side by side; the simulated runs are not model results"
)


@dataclass(frozen=True)
class ComparedCell(AccuracyCell):
    """One similarity × length × condition cell of one run: the analysis's strict correct / valid
    (``AccuracyCell``), and the lenient count over the same valid responses."""

    lenient_correct: int
    lenient_accuracy: float | None


@dataclass(frozen=True)
class ScoreTotal:
    """One run's strict and lenient totals where the answer is present (B, M, E) or absent (A)."""

    group: str
    valid: int
    correct: int
    accuracy: float | None
    lenient_correct: int
    lenient_accuracy: float | None
    not_valid: int


@dataclass(frozen=True)
class ComparedRun(AddedLater):
    """One run, analysed alone by the preregistered analysis, with where it came from."""

    ADDED_LATER = ("name", "shape")

    run_dir: str
    model: str
    body_profile: str
    design_fingerprint: str
    protocol_fingerprint: str
    protocol_version: int | None
    journal_sha256: str | None
    simulation: bool
    label: str | None
    decision: str
    reason: str
    difference: float | None
    difference_exact: str | None
    interval: tuple[float, ...] | None
    complete_cases: int
    planned_cases: int
    protocol_failures: dict[str, int]
    unexecuted: int
    caveats: tuple[str, ...]
    scores: tuple[ScoreTotal, ...]
    accuracy: tuple[ComparedCell, ...]
    headline: tuple[str, ...]
    middle_loss: tuple[Effect, ...]
    positions: tuple[Effect, ...]
    robustness: str
    # How tables and figures name the run: the user's --label, else its model (made unique).
    # Absent from a comparison.json written before it existed: such a run is named by model.
    name: str | None = None
    # Q1's shape verdict per similarity over all lengths ("low: flat; high: decline with
    # position"); absent from a comparison.json written before the shape verdict existed.
    shape: str | None = None

    def __post_init__(self) -> None:
        if self.interval is not None and len(self.interval) != 2:
            raise NeedlepointError(
                f"field interval: expected [low, high], got {len(self.interval)} values"
            )

    @property
    def shown(self) -> str:
        """The run's name as a reader sees it: its name, or (older files) its model."""
        return self.name or self.model


@dataclass(frozen=True)
class ComparisonDocument:
    """The whole comparison.json document, format ``needlepoint-comparison`` version 2.

    Version 2 added each run's ``headline``, ``middle_loss``, ``positions`` and ``robustness``.
    """

    format: str
    version: int
    package_version: str
    simulation: bool
    label: str | None
    design_fingerprint: str
    protocol_id: str | None
    threshold: float
    confidence: float
    runs: tuple[ComparedRun, ...]
    figures: dict[str, str]


def to_json(doc: ComparisonDocument) -> bytes:
    """Sorted, indented, UTF-8 JSON: readable, and the same bytes for the same document."""
    return document_bytes(doc)


def from_json(data: bytes | str, where: str = "comparison.json") -> ComparisonDocument:
    """Read comparison.json bytes, refusing another format or version and any malformed field."""
    return versioned_from_json(
        data, ComparisonDocument, COMPARISON_FORMAT, COMPARISON_VERSION, where
    )


def read_comparison(path: str | Path) -> ComparisonDocument:
    """Load a comparison.json file (``from_json`` with the file's name in every message)."""
    return read_versioned(path, ComparisonDocument, COMPARISON_FORMAT, COMPARISON_VERSION)
