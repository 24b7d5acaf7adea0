"""analysis.json as frozen records: the schema, its one serialiser and its one reader.

The document is built once (``document.build_document``) and read by attribute everywhere
after. ``to_json`` writes sorted, indented UTF-8, so the same analysis gives the same bytes;
``from_json`` refuses another format or version with one line. ``docs/schema.md`` states every
field, and a test checks that it lists exactly these.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.analysis.inference import Diagnostics, Effects, Robustness, RunContext
from needlepoint.analysis.tables import Secondary
from needlepoint.schema import (
    document_bytes,
    fields_plain,
    plain_without_absent,
    read_versioned,
    record_from_plain,
    record_with_absent,
    versioned_from_json,
)

ANALYSIS_FORMAT = "needlepoint-analysis"
ANALYSIS_VERSION = 2


@dataclass(frozen=True)
class AnalysisParameters:
    """The protocol's ``analysis`` block: the preregistered decision rule and bootstrap."""

    threshold: float
    confidence: float
    min_complete_cases: int
    exact_bootstrap_max_cases: int
    bootstrap_resamples: int
    bootstrap_seed: int

    @classmethod
    def of(cls, protocol: dict[str, Any]) -> AnalysisParameters:
        """The parameters of a loaded protocol."""
        return record_from_plain(cls, dict(protocol["analysis"]), "protocol analysis")


@dataclass(frozen=True)
class ProtocolRef:
    """Which protocol the run followed: its prepared (materials) and design fingerprints.

    ``design_fingerprint``, ``model`` and ``body_profile`` came later: an analysis.json written
    before has none of them, read as None and written back without them.
    """

    id: str | None
    version: int | None
    fingerprint: str
    design_fingerprint: str | None = None
    model: str | None = None
    body_profile: str | None = None

    def to_plain(self) -> dict[str, Any]:
        return plain_without_absent(self, _ADDED_LATER)

    @classmethod
    def from_plain(cls, value: dict[str, Any], where: str) -> ProtocolRef:
        return record_with_absent(cls, value, where, _ADDED_LATER)


_ADDED_LATER = ("design_fingerprint", "model", "body_profile")


@dataclass(frozen=True)
class RunRef:
    """Which run was analysed, and from what.

    ``unverified`` says why the rows and the simulation flag are taken on trust when no journal
    re-derived them (an analysis of a results table); absent for a run, and in older files.
    """

    journal_sha256: str | None
    source: str
    unverified: str | None = None

    def to_plain(self) -> dict[str, Any]:
        plain = fields_plain(self)
        if plain["unverified"] is None:
            del plain["unverified"]
        return plain

    @classmethod
    def from_plain(cls, value: dict[str, Any], where: str) -> RunRef:
        return record_from_plain(cls, {"unverified": None} | value, where)


@dataclass(frozen=True)
class Mass:
    """One distinct bootstrap resample mean and its integer weight."""

    value: float
    weight: int


@dataclass(frozen=True)
class Interval:
    """The case-cluster percentile bootstrap interval, with its distribution."""

    confidence: float
    lower: float
    upper: float
    lower_exact: str
    upper_exact: str
    method: str
    seed: int | None
    resamples: int
    cases: int
    degenerate: bool
    quantile: str
    distribution: tuple[Mass, ...]
    total_weight: int


@dataclass(frozen=True)
class Decision:
    """The preregistered decision from the complete cases' values."""

    threshold: float
    estimate: float | None
    estimate_exact: str | None
    interval: Interval | None
    decision: str
    reason: str


@dataclass(frozen=True)
class PairValues:
    """Middle losses and their difference for one case × length; None where incomplete."""

    case: str
    length: int
    loss_low: float | None
    loss_high: float | None
    difference: float | None


@dataclass(frozen=True)
class CaseResult:
    """One complete case: its per-length values and its mean difference."""

    case: str
    lengths: tuple[PairValues, ...]
    difference: float
    exact: str


@dataclass(frozen=True)
class Primary:
    """The primary analysis: per-case values and the decision (``Decision``'s fields)."""

    complete_cases: int
    planned_cases: int
    cases: tuple[CaseResult, ...]
    threshold: float
    estimate: float | None
    estimate_exact: str | None
    interval: Interval | None
    decision: str
    reason: str


@dataclass(frozen=True)
class IncompleteCase:
    """A planned case left out of the primary analysis, and why."""

    case: str
    reason: str


@dataclass(frozen=True)
class Completeness:
    """How many blocks and pairs are complete, and which cases are not."""

    blocks_complete: int
    blocks_planned: int
    pairs_complete: int
    pairs_planned: int
    incomplete_cases: tuple[IncompleteCase, ...]


@dataclass(frozen=True)
class ExploratoryRow:
    """One pair of an incomplete case: its values where known, and the reason it is out."""

    case: str
    length: int
    loss_low: float | None
    loss_high: float | None
    difference: float | None
    reason: str


@dataclass(frozen=True)
class Exclusion:
    """One response that is not protocol-valid, and the case it takes out."""

    seq: int
    case: str
    length: int
    similarity: str
    condition: str
    category: str
    kind: str
    excludes: str


@dataclass(frozen=True)
class AnalysisDocument:
    """The whole analysis.json document, format ``needlepoint-analysis`` version 2.

    Version 2 added ``context``, ``effects``, ``robustness`` and ``diagnostics``.
    """

    format: str
    version: int
    package_version: str
    simulation: bool
    label: str | None
    protocol: ProtocolRef
    run: RunRef
    parameters: AnalysisParameters
    completeness: Completeness
    exploratory: tuple[ExploratoryRow, ...]
    exclusions: tuple[Exclusion, ...]
    caveats: tuple[str, ...]
    primary: Primary
    secondary: Secondary
    figures: dict[str, str]
    context: RunContext
    effects: Effects
    robustness: Robustness
    diagnostics: Diagnostics

    def to_json(self) -> bytes:
        """The analysis.json bytes: sorted keys, two-space indent, UTF-8, final newline."""
        return to_json(self)


def to_json(doc: AnalysisDocument) -> bytes:
    """Sorted, indented, UTF-8 JSON: readable, and the same bytes for the same document."""
    return document_bytes(doc)


def from_json(data: bytes | str, where: str = "analysis.json") -> AnalysisDocument:
    """Read analysis.json bytes, refusing another format or version and any malformed field."""
    return versioned_from_json(data, AnalysisDocument, ANALYSIS_FORMAT, ANALYSIS_VERSION, where)


def read_document(path: str | Path) -> AnalysisDocument:
    """Load a analysis.json file (``from_json`` with the file's name in every message)."""
    return read_versioned(path, AnalysisDocument, ANALYSIS_FORMAT, ANALYSIS_VERSION)
