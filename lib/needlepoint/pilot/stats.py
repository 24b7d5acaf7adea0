"""The pilot's numbers per background length, each with an exact binomial interval.

Accuracies count protocol-valid responses only (a failure is never a wrong answer); the failure
rate counts protocol failures, indeterminate ones included, among the requests that were sent.
Every proportion carries its Clopper–Pearson interval: the exact binomial interval, from the
beta distribution's quantiles.

The ends and the middle are roles (``Roles``): B and E against M in the reference design, and in
a depth design the first and last depth against the interior depths.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from needlepoint.analysis.inputs import Outcome

# The exact interval lives with the accuracy tables (compare's grid uses it too): one copy.
from needlepoint.analysis.secondary import clopper_pearson


@dataclass(frozen=True)
class Proportion:
    """``successes`` of ``trials``, the estimate and its 95% Clopper–Pearson interval."""

    successes: int
    trials: int
    estimate: float | None
    lower: float | None
    upper: float | None

    @classmethod
    def of(cls, successes: int, trials: int) -> Proportion:
        interval = clopper_pearson(successes, trials)
        if interval is None:
            return cls(successes, trials, None, None, None)
        return cls(successes, trials, successes / trials, interval[0], interval[1])

    def text(self) -> str:
        """``27/32 0.844 [0.672, 0.947]``, or ``0/0 —`` without a trial."""
        if self.estimate is None or self.lower is None or self.upper is None:
            return f"{self.successes}/{self.trials} —"
        return (
            f"{self.successes}/{self.trials} {self.estimate:.3f} "
            f"[{self.lower:.3f}, {self.upper:.3f}]"
        )


class Roles(NamedTuple):
    """Which conditions are the ends and which the middle of a design's position curve (in
    memory only, never written)."""

    ends: tuple[str, ...] = ("B", "E")
    middle: tuple[str, ...] = ("M",)
    conditions: tuple[str, ...] = ("B", "M", "E", "A")

    @classmethod
    def of(cls, protocol: dict[str, Any]) -> Roles:
        """The reference roles, or a depth design's: first and last depth, the interior."""
        if "depths" not in protocol:
            return cls()
        conditions = tuple(str(c) for c in protocol["conditions"])
        present = tuple(c for c in conditions if c != "A")
        return cls((present[0], present[-1]), present[1:-1], conditions)


@dataclass(frozen=True)
class LengthCounts:
    """What the pilot measured at one background length (both similarities pooled).

    ``end`` is B and E (a depth design: its first and last depth), ``middle`` M (the interior
    depths).
    """

    length: int
    end: Proportion  # the ends: correct among valid (the band rule reads this one)
    end_low: Proportion  # the ends under low similarity
    end_high: Proportion  # the ends under high similarity
    middle: Proportion  # the middle under low similarity: the power model's baseline
    middle_high: Proportion  # the middle under high similarity: shown, never used to calibrate
    refusal: Proportion  # A: UNKNOWN among valid
    failures: Proportion  # protocol failures among the requests sent
    unexecuted: int
    failure_kinds: dict[str, int]
    error_kinds: dict[str, int]


def _accuracy(rows: Iterable[Outcome]) -> Proportion:
    valid = [r for r in rows if r.valid]
    return Proportion.of(sum(r.status == "correct" for r in valid), len(valid))


def length_counts(
    outcomes: Iterable[Outcome], length: int, roles: Roles | None = None
) -> LengthCounts:
    """The pilot's proportions at one length."""
    r = roles or Roles()
    rows = [o for o in outcomes if o.length == length]
    sent = [o for o in rows if o.status != "unexecuted"]
    failed = [o for o in sent if o.status == "protocol_failure"]
    return LengthCounts(
        length=length,
        end=_accuracy(o for o in rows if o.condition in r.ends),
        end_low=_accuracy(o for o in rows if o.condition in r.ends and o.similarity == "low"),
        end_high=_accuracy(o for o in rows if o.condition in r.ends and o.similarity == "high"),
        middle=_accuracy(o for o in rows if o.condition in r.middle and o.similarity == "low"),
        middle_high=_accuracy(
            o for o in rows if o.condition in r.middle and o.similarity == "high"
        ),
        refusal=_accuracy(o for o in rows if o.condition == "A"),
        failures=Proportion.of(len(failed), len(sent)),
        unexecuted=len(rows) - len(sent),
        failure_kinds=dict(sorted(Counter(o.kind for o in failed).items())),
        error_kinds=dict(sorted(Counter(o.kind for o in rows if o.status == "error").items())),
    )


def pooled(
    outcomes: Iterable[Outcome],
    lengths: Iterable[int],
    conditions: tuple[str, ...] = ("B", "M", "E", "A"),
) -> dict[str, Proportion]:
    """Each condition's accuracy per similarity and the failure rate over several lengths.

    These are the power model's inputs for a design of those lengths: ``B``, ``M``, ``E``, ``A``
    under low similarity, ``high B`` … ``high A`` under high (``high M`` is shown, not used).
    Never an end accuracy pooled over similarities: that pools a ceiling with a floor.
    """
    chosen = set(lengths)
    rows = [o for o in outcomes if o.length in chosen]
    sent = [o for o in rows if o.status != "unexecuted"]
    out = {}
    for sim, prefix in (("low", ""), ("high", "high ")):
        for c in conditions:
            cell = (o for o in rows if o.condition == c and o.similarity == sim)
            out[prefix + c] = _accuracy(cell)
    out["failure"] = Proportion.of(sum(o.status == "protocol_failure" for o in sent), len(sent))
    return out
