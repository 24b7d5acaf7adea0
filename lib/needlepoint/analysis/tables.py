"""The secondary tables of analysis.json as frozen records (``docs/schema.md`` states each field).

Rows keep their fields in the order the notebook's tables show them as columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from needlepoint.schema import fail, fields_plain, from_plain, record_from_plain


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
class LatencyUsageCost:
    """Latency, token usage and cost over the executed requests."""

    executed: int
    latency_s: LatencySummary
    prompt_tokens: Total
    completion_tokens: Total
    cost: Total
    # usage.completion_tokens_details.reasoning_tokens; None only in an analysis.json written
    # before it was recorded (read as None, written back without it).
    reasoning_tokens: Total | None = None

    def to_plain(self) -> dict[str, Any]:
        plain = fields_plain(self)
        if plain["reasoning_tokens"] is None:
            del plain["reasoning_tokens"]
        return plain

    @classmethod
    def from_plain(cls, value: dict[str, Any], where: str) -> LatencyUsageCost:
        return record_from_plain(cls, {"reasoning_tokens": None} | value, where)


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
