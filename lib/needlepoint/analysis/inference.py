"""The parts of analysis.json beside the preregistered decision, as frozen records.

``context`` says what was run where and when; ``effects`` answers the reader's first question
(is there a middle loss?) and shows where the effect is; ``robustness`` shows how much the
verdict depends on missing cells, single cases and the choice of method; ``diagnostics`` holds
the checks a reviewer asks for. None of them feeds the decision. ``docs/schema.md`` states every
field, and ``PROTOCOL.md`` (*Statistics beside the decision*) defines every statistic.
"""

from __future__ import annotations

from dataclasses import dataclass


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
class Effects:
    """Q1 and where the effect is: middle loss, B − M and E − M, and accuracy by position."""

    cases: int
    measures: tuple[Effect, ...]
    positions: tuple[Effect, ...]


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
