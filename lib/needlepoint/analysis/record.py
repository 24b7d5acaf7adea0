"""analysis.json as frozen records: the schema, its one serialiser and its one reader.

The document is built once (``document.build_document``) and read by attribute everywhere
after. ``to_json`` writes sorted, indented UTF-8, so the same analysis gives the same bytes;
``from_json`` refuses another format or version with one line. ``docs/schema.md`` states every
field, and a test checks that it lists exactly these. Rows keep their fields in the order the
notebook's tables show them as columns.

Beside the preregistered decision (``Primary``) and the secondary tables (``Secondary``), four
parts answer a reader's next questions, and none of them feeds the decision: ``context`` says
what was run where and when; ``effects`` answers the first question (is there a middle loss?)
and shows where the effect is; ``robustness`` shows how much the verdict depends on missing
cells, single cases and the choice of method; ``diagnostics`` holds the checks a reviewer asks
for. ``PROTOCOL.md`` (*Statistics beside the decision*) defines every statistic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.schema import (
    AddedLater,
    document_bytes,
    fail,
    fields_plain,
    from_plain,
    read_versioned,
    record_from_plain,
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
        """The parameters of a loaded protocol (a depth design's ``contrast`` is read by
        analysis.depth)."""
        values = {k: v for k, v in protocol["analysis"].items() if k != "contrast"}
        return record_from_plain(cls, values, "protocol analysis")


@dataclass(frozen=True)
class ProtocolRef(AddedLater):
    """Which protocol the run followed: its prepared (materials) and design fingerprints.

    ``design_fingerprint``, ``model`` and ``body_profile`` came later (``AddedLater``).
    """

    ADDED_LATER = ("design_fingerprint", "model", "body_profile")

    id: str | None
    version: int | None
    fingerprint: str
    design_fingerprint: str | None = None
    model: str | None = None
    body_profile: str | None = None


@dataclass(frozen=True)
class RunRef(AddedLater):
    """Which run was analysed, and from what.

    ``unverified`` says why the rows and the simulation flag are taken on trust when no journal
    re-derived them (an analysis of a results table); absent for a run, and in older files.
    """

    ADDED_LATER = ("unverified",)

    journal_sha256: str | None
    source: str
    unverified: str | None = None


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
class Decision:
    """The preregistered decision from the complete cases' values."""

    threshold: float
    estimate: float | None
    estimate_exact: str | None
    interval: Interval | None
    decision: str
    reason: str


@dataclass(frozen=True)
class Primary(Decision):
    """The primary analysis: the decision (``Decision``'s fields), then the per-case values."""

    complete_cases: int
    planned_cases: int
    cases: tuple[CaseResult, ...]


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
class ExploratoryRow(PairValues):
    """One pair of an incomplete case: its values where known, and the reason it is out."""

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


# --- the secondary tables ---------------------------------------------------------------------


@dataclass(frozen=True)
class StatusCounts:
    """How many planned requests ended in each status and each category."""

    planned: int
    status: dict[str, int]
    category: dict[str, int]


@dataclass(frozen=True)
class AccuracyCell:
    """Correct over protocol-valid in one similarity × length × condition cell."""

    similarity: str
    length: int
    condition: str
    valid: int
    correct: int
    accuracy: float | None
    not_valid: int


@dataclass(frozen=True)
class RefusalRow:
    """Refusal accuracy on condition A for one group (overall, a similarity or a length)."""

    group: str
    level: str
    valid: int
    correct: int
    accuracy: float | None
    not_valid: int


@dataclass(frozen=True)
class ErrorRow:
    """Error kinds among the valid responses of one condition × similarity."""

    condition: str
    similarity: str
    valid: int
    errors: int
    wrong_code: int
    near_distractor: int
    near_distractor_share: float | None
    kinds: dict[str, int]


@dataclass(frozen=True)
class FailureRow:
    """One protocol-failure kind (or ``unexecuted``) and its count."""

    kind: str
    count: int
    indeterminate: bool


@dataclass(frozen=True)
class LatencySummary:
    """Latency in seconds over the executed requests whose latency is known."""

    known: int
    unknown: int
    median: float | None
    mean: float | None
    min: float | None
    max: float | None


@dataclass(frozen=True)
class Total:
    """A token count or cost summed over executed requests; unknown if any part is."""

    known: int
    unknown: int
    known_sum: float
    total: float | None


@dataclass(frozen=True)
class LatencyUsageCost(AddedLater):
    """Latency, token usage and cost over the executed requests."""

    ADDED_LATER = ("reasoning_tokens",)

    executed: int
    latency_s: LatencySummary
    prompt_tokens: Total
    completion_tokens: Total
    cost: Total
    # usage.completion_tokens_details.reasoning_tokens; None only in an analysis.json written
    # before it was recorded (``AddedLater``).
    reasoning_tokens: Total | None = None


@dataclass(frozen=True)
class OrderCount:
    """Blocks under one condition order in one stratum."""

    planned: int
    executed: int
    complete: int


@dataclass(frozen=True)
class Stratum:
    """One length × similarity stratum; in JSON each order is a key of its own."""

    length: int
    similarity: str
    orders: dict[str, OrderCount]

    def to_plain(self) -> dict[str, Any]:
        plain = fields_plain(self)
        return {"length": self.length, "similarity": self.similarity} | plain["orders"]

    @classmethod
    def from_plain(cls, value: dict[str, Any], where: str) -> Stratum:
        fixed = {k: value[k] for k in ("length", "similarity") if k in value}
        orders = {k: v for k, v in value.items() if k not in fixed}
        return record_from_plain(cls, fixed | {"orders": orders}, where)


@dataclass(frozen=True)
class PositionRow:
    """Valid responses of one condition at each position (1, 2, …) within its block."""

    condition: str
    valid: dict[str, int]

    def to_plain(self) -> dict[str, Any]:
        return {"condition": self.condition} | dict(self.valid)

    @classmethod
    def from_plain(cls, value: dict[str, Any], where: str) -> PositionRow:
        if "condition" not in value:
            fail(f"{where}.condition", "missing")
        counts = {k: v for k, v in value.items() if k != "condition"}
        if not all(k.isdigit() for k in counts):
            fail(where, f"position keys must be numbers, got {sorted(counts)}")
        return cls(
            condition=from_plain(str, value["condition"], f"{where}.condition"),
            valid=from_plain(dict[str, int], counts, where),
        )


@dataclass(frozen=True)
class OrderBalance:
    """Condition orders per stratum, planned and as observed, and valid responses by position."""

    orders: tuple[str, ...]
    strata: tuple[Stratum, ...]
    valid_by_position: tuple[PositionRow, ...]


@dataclass(frozen=True)
class Secondary:
    """Every secondary table; none of them feeds the decision."""

    counts: StatusCounts
    accuracy: tuple[AccuracyCell, ...]
    refusal: tuple[RefusalRow, ...]
    errors: tuple[ErrorRow, ...]
    protocol_failures: tuple[FailureRow, ...]
    latency_usage_cost: LatencyUsageCost
    order_balance: OrderBalance


# --- beside the decision: context, effects, robustness, diagnostics ----------------------------


@dataclass(frozen=True)
class LengthSize:
    """How long the prompts of one background length are, in tokens where known."""

    length: int
    unit: str
    source: str
    requests: int
    minimum: int
    median: float
    maximum: int


@dataclass(frozen=True)
class RunContext:
    """What was run where and when: endpoint host, run dates, sessions, prompt sizes."""

    endpoint_host: str | None
    first_date: str | None
    last_date: str | None
    sessions: int | None
    lengths: tuple[LengthSize, ...]


@dataclass(frozen=True)
class Effect:
    """One descriptive estimate over cases, with the preregistered interval method."""

    measure: str
    similarity: str
    length: int | None
    condition: str | None
    cases: int
    estimate: float | None
    estimate_exact: str | None
    lower: float | None
    upper: float | None
    lower_exact: str | None
    upper_exact: str | None


@dataclass(frozen=True)
class Contrast:
    """One contrast over the complete cases (``B − M``, ``E − M``, or a position's high − low
    change) with its case-cluster interval, its two-sided bootstrap p and that p adjusted
    across its family. ``direction`` is +1 (above 0), −1 (below 0) or 0 (neither) after the
    adjustment; ``analysis.shape`` defines all of it."""

    name: str
    cases: int
    estimate: float | None
    estimate_exact: str | None
    lower: float | None
    upper: float | None
    p: float | None
    p_exact: str | None
    p_adjusted: float | None
    direction: int


@dataclass(frozen=True)
class ShapeRow:
    """The shape verdict of one similarity (all lengths, or one): both contrasts and the
    plain B, M and E counts (correct / valid over every case) it is read beside."""

    similarity: str
    length: int | None
    first: Contrast
    last: Contrast
    counts: dict[str, str]
    verdict: str
    reason: str


@dataclass(frozen=True)
class Shapes:
    """Q1's shape verdicts under one multiplicity method, and where Q2's change sits."""

    method: str
    alpha: float
    rows: tuple[ShapeRow, ...]
    disagreements: tuple[str, ...]
    changes: tuple[Contrast, ...]
    change_method: str
    change_sits: str


@dataclass(frozen=True)
class Effects(AddedLater):
    """Q1 and where the effect is: middle loss, B − M and E − M, and accuracy by position.

    ``shapes`` came later (``AddedLater``): an analysis.json written before it has none.
    """

    ADDED_LATER = ("shapes",)

    cases: int
    measures: tuple[Effect, ...]
    positions: tuple[Effect, ...]
    shapes: Shapes | None = None


@dataclass(frozen=True)
class Scenario:
    """The preregistered decision under one change: imputed missing cells, or a case left out."""

    kind: str
    label: str
    cells: tuple[int, ...]
    complete_cases: int
    estimate: float | None
    estimate_exact: str | None
    lower_exact: str | None
    upper_exact: str | None
    decision: str
    changes: bool


@dataclass(frozen=True)
class SignFlip:
    """The sign-flip (randomisation) test of the complete cases' differences."""

    cases: int
    method: str
    patterns: int
    seed: int | None
    statistic_exact: str
    p_one_sided: float
    p_one_sided_exact: str
    p_two_sided: float
    p_two_sided_exact: str
    agrees: bool


@dataclass(frozen=True)
class SecondInterval:
    """A second interval (BCa) beside the preregistered percentile one."""

    method: str
    confidence: float
    lower: float | None
    upper: float | None
    resamples: int
    seed: int
    note: str
    agrees: bool | None


@dataclass(frozen=True)
class ModelFit:
    """A model-based check: a GEE over the complete cases' B, M and E answers."""

    model: str
    covariance: str
    cases: int
    estimate: float | None
    se: float | None
    df: int
    lower: float | None
    upper: float | None
    p_one_sided: float | None
    note: str
    agrees: bool | None


@dataclass(frozen=True)
class Robustness:
    """How much the verdict depends on what; ``verdict`` is the panel's one-line answer."""

    missing: tuple[Scenario, ...]
    leave_one_out: tuple[Scenario, ...]
    sign_flip: SignFlip | None
    second_interval: SecondInterval | None
    models: tuple[ModelFit, ...]
    changes: tuple[str, ...]
    verdict: str


@dataclass(frozen=True)
class DiagnosticRow:
    """Accuracy of the answer-present conditions (B, M, E) in one group of responses."""

    group: str
    level: str
    valid: int
    correct: int
    accuracy: float | None


@dataclass(frozen=True)
class WrongKindRow:
    """Wrong answers of one kind under one similarity (B, M and E)."""

    similarity: str
    kind: str
    count: int
    share: float | None


@dataclass(frozen=True)
class PrecedingRow:
    """High-similarity answers by how many near names precede the target."""

    length: int
    condition: str
    preceding: int
    valid: int
    wrong: int
    near: int


@dataclass(frozen=True)
class Diagnostics:
    """What a reviewer asks for: accuracy by block position, half and session; wrong answers."""

    accuracy: tuple[DiagnosticRow, ...]
    wrong_kinds: tuple[WrongKindRow, ...]
    preceding: tuple[PrecedingRow, ...]
    notes: tuple[str, ...]


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


def to_json(doc: AnalysisDocument) -> bytes:
    """Sorted, indented, UTF-8 JSON: readable, and the same bytes for the same document."""
    return document_bytes(doc)


def from_json(data: bytes | str, where: str = "analysis.json") -> AnalysisDocument:
    """Read analysis.json bytes, refusing another format or version and any malformed field."""
    return versioned_from_json(data, AnalysisDocument, ANALYSIS_FORMAT, ANALYSIS_VERSION, where)


def read_document(path: str | Path) -> AnalysisDocument:
    """Load an analysis.json file (``from_json`` with the file's name in every message)."""
    return read_versioned(path, AnalysisDocument, ANALYSIS_FORMAT, ANALYSIS_VERSION)
