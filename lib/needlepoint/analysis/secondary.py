"""Secondary tables: accuracy cells, refusal on A, error taxonomy, failures, cost, order balance.

None of these feed the decision. Every rate has its denominator next to it, only protocol-valid
responses are in an accuracy denominator, and an unknown latency, token count or cost is counted
as unknown rather than summed as zero.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from needlepoint.analysis.inputs import Outcome
from needlepoint.analysis.record import (
    AccuracyCell,
    ErrorRow,
    FailureRow,
    LatencySummary,
    LatencyUsageCost,
    OrderBalance,
    OrderCount,
    PositionRow,
    RefusalRow,
    Secondary,
    StatusCounts,
    Stratum,
    Total,
)
from needlepoint.run.scoring import ERROR_KINDS, PROTOCOL_FAILURE_KINDS

CATEGORIES = ("valid", "protocol_failure", "indeterminate", "unexecuted")
WRONG_CODE_KINDS = tuple(k for k in ERROR_KINDS if k.endswith("_code"))


# Exact binomial intervals (pilot tables, the comparison grid) are at this level.
CONFIDENCE = 0.95


def clopper_pearson(
    successes: int, trials: int, confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """The exact (Clopper–Pearson) interval for ``successes`` out of ``trials``; None for 0."""
    from scipy.stats import beta

    if trials == 0:
        return None
    if not 0 <= successes <= trials:
        raise ValueError(f"successes {successes} outside 0..{trials}")
    tail = (1 - confidence) / 2
    x, n = successes, trials
    lower = 0.0 if x == 0 else float(beta.ppf(tail, x, n - x + 1))
    upper = 1.0 if x == n else float(beta.ppf(1 - tail, x + 1, n - x))
    return lower, upper


def rate_of(rows: Sequence[Outcome]) -> dict[str, Any]:
    """Correct over protocol-valid, with the excluded responses counted beside it (as fields)."""
    valid = [o for o in rows if o.valid]
    correct = sum(o.status == "correct" for o in valid)
    return {
        "valid": len(valid),
        "correct": correct,
        "accuracy": correct / len(valid) if valid else None,
        "not_valid": len(rows) - len(valid),
    }


def _ordered(values: Sequence[Any], preferred: Sequence[Any]) -> list[Any]:
    present = set(values)
    return [v for v in preferred if v in present] + sorted(present - set(preferred))


def accuracy_cells(outcomes: Sequence[Outcome]) -> tuple[AccuracyCell, ...]:
    """Accuracy for every similarity × length × condition cell (the heatmap's numbers)."""
    sims = _ordered([o.similarity for o in outcomes], ("low", "high"))
    lengths = sorted({o.length for o in outcomes})
    conds = _ordered([o.condition for o in outcomes], ("B", "M", "E", "A"))
    return tuple(
        AccuracyCell(
            similarity=s,
            length=n,
            condition=c,
            **rate_of([o for o in outcomes if (o.similarity, o.length, o.condition) == (s, n, c)]),
        )
        for s in sims
        for n in lengths
        for c in conds
    )


def refusal(outcomes: Sequence[Outcome]) -> tuple[RefusalRow, ...]:
    """Refusal accuracy on condition A: overall, by similarity and by length."""
    absent = [o for o in outcomes if o.condition == "A"]
    rows = [RefusalRow(group="overall", level="all", **rate_of(absent))]
    for sim in _ordered([o.similarity for o in absent], ("low", "high")):
        rows.append(RefusalRow("similarity", sim, **rate_of(_where(absent, similarity=sim))))
    for length in sorted({o.length for o in absent}):
        rows.append(RefusalRow("length", str(length), **rate_of(_where(absent, length=length))))
    return tuple(rows)


def _where(rows: Sequence[Outcome], **match: Any) -> list[Outcome]:
    return [o for o in rows if all(getattr(o, k) == v for k, v in match.items())]


def error_taxonomy(outcomes: Sequence[Outcome]) -> tuple[ErrorRow, ...]:
    """Error kinds by condition × similarity, with the near-distractor share of wrong codes."""
    rows = []
    sims = _ordered([o.similarity for o in outcomes], ("low", "high"))
    for cond in _ordered([o.condition for o in outcomes], ("B", "M", "E", "A")):
        for sim in sims:
            valid = [o for o in _where(outcomes, condition=cond, similarity=sim) if o.valid]
            kinds = Counter(o.kind for o in valid if o.status == "error")
            wrong = sum(kinds[k] for k in WRONG_CODE_KINDS)
            near = kinds["near_distractor_code"] + kinds["code_when_absent:near_distractor_code"]
            rows.append(
                ErrorRow(
                    condition=cond,
                    similarity=sim,
                    valid=len(valid),
                    errors=sum(kinds.values()),
                    wrong_code=wrong,
                    near_distractor=near,
                    near_distractor_share=near / wrong if wrong else None,
                    kinds={k: kinds[k] for k in ERROR_KINDS if kinds[k]},
                )
            )
    return tuple(rows)


def protocol_failures(outcomes: Sequence[Outcome]) -> tuple[FailureRow, ...]:
    """Every kind of protocol failure with its count, then the unexecuted requests."""
    kinds = Counter(o.kind for o in outcomes if o.status == "protocol_failure")
    rows = [
        FailureRow(kind=k, count=kinds[k], indeterminate=k.startswith("indeterminate"))
        for k in _ordered(list(kinds), PROTOCOL_FAILURE_KINDS)
    ]
    unexecuted = sum(o.status == "unexecuted" for o in outcomes)
    if unexecuted:
        rows.append(FailureRow(kind="unexecuted", count=unexecuted, indeterminate=False))
    return tuple(rows)


def _known(outcomes: Sequence[Outcome], get: Callable[[Outcome], Any]) -> tuple[list[Any], int]:
    executed = [o for o in outcomes if o.status != "unexecuted"]
    values = [get(o) for o in executed if get(o) is not None]
    return values, len(executed) - len(values)


def latency_usage_cost(outcomes: Sequence[Outcome]) -> LatencyUsageCost:
    """Latency summary and usage/cost totals over executed requests; unknowns stay unknown."""
    lat, lat_unknown = _known(outcomes, lambda o: o.latency_s)
    totals: dict[str, Total] = {}
    for field in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cost"):
        vals, unknown = _known(outcomes, lambda o, f=field: getattr(o, f))
        known_sum = sum(vals) if vals else 0
        totals[field] = Total(
            known=len(vals),
            unknown=unknown,
            known_sum=known_sum,
            # A total with any unknown part is itself unknown; the known part is a lower bound.
            total=known_sum if unknown == 0 else None,
        )
    return LatencyUsageCost(
        executed=sum(o.status != "unexecuted" for o in outcomes),
        latency_s=LatencySummary(
            known=len(lat),
            unknown=lat_unknown,
            median=statistics.median(lat) if lat else None,
            mean=statistics.fmean(lat) if lat else None,
            min=min(lat) if lat else None,
            max=max(lat) if lat else None,
        ),
        **totals,
    )


def order_balance(outcomes: Sequence[Outcome]) -> OrderBalance:
    """Condition orders per length × similarity stratum, planned and as observed."""
    blocks: dict[tuple[int, str, int], list[Outcome]] = {}
    for o in outcomes:
        blocks.setdefault((o.length, o.similarity, o.block), []).append(o)
    orders = sorted({o.order for o in outcomes})
    strata = []
    for length in sorted({o.length for o in outcomes}):
        for sim in _ordered([o.similarity for o in outcomes], ("low", "high")):
            mine = [b for (n, s, _), b in blocks.items() if (n, s) == (length, sim)]
            counts: dict[str, OrderCount] = {}
            for order in orders:
                with_order = [b for b in mine if b[0].order == order]
                counts[order] = OrderCount(
                    planned=len(with_order),
                    executed=sum(any(o.status != "unexecuted" for o in b) for b in with_order),
                    complete=sum(all(o.valid for o in b) for b in with_order),
                )
            strata.append(Stratum(length=length, similarity=sim, orders=counts))
    positions: Counter[tuple[str, int]] = Counter()
    for b in blocks.values():
        for pos, o in enumerate(sorted(b, key=lambda o: o.seq), start=1):
            if o.valid:
                positions[(o.condition, pos)] += 1
    conds = _ordered([o.condition for o in outcomes], ("B", "M", "E", "A"))
    width = max((len(b) for b in blocks.values()), default=0)
    return OrderBalance(
        orders=tuple(orders),
        strata=tuple(strata),
        valid_by_position=tuple(
            PositionRow(c, {str(p): positions[(c, p)] for p in range(1, width + 1)}) for c in conds
        ),
    )


def status_counts(outcomes: Sequence[Outcome]) -> StatusCounts:
    """How many planned requests ended in each status and category."""
    return StatusCounts(
        planned=len(outcomes),
        status=dict(sorted(Counter(o.status for o in outcomes).items())),
        category={c: sum(o.category == c for o in outcomes) for c in CATEGORIES},
    )


def secondary(outcomes: Sequence[Outcome]) -> Secondary:
    """Every secondary table."""
    return Secondary(
        counts=status_counts(outcomes),
        accuracy=accuracy_cells(outcomes),
        refusal=refusal(outcomes),
        errors=error_taxonomy(outcomes),
        protocol_failures=protocol_failures(outcomes),
        latency_usage_cost=latency_usage_cost(outcomes),
        order_balance=order_balance(outcomes),
    )
