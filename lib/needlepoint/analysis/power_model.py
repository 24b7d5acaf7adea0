"""The hypothetical model the power simulation runs: P(correct) per similarity and position.

B, E and A have one accuracy per similarity (``acc_*`` under low, ``high_*`` under high; a high
rate left None is the low one), M one under low similarity. The added middle loss ``effect``
then fixes M under high similarity so that the expected primary metric is exactly ``effect``:

    high M = acc_m + shift − effect,   shift = (high B + high E)/2 − (acc_b + acc_e)/2

so with equal edge rates high M = acc_m − effect. Because high M must be a probability, the
rates allow effects from ``smallest_effect`` to ``largest_effect`` only. ``high_m``, when
given, is a measured high-similarity middle accuracy: it names the rates' own difference
(``own_effect``) and is otherwise not used. ``case_sd`` spreads the cases: each case's answers
share one shift on the logit scale, drawn from N(0, case_sd²) per simulated run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from needlepoint.errors import NeedlepointError

CONDITIONS = ("B", "M", "E", "A")
MAX_CASE_SD = 10.0  # on the logit scale: beyond it every case is at 0 or 1 anyway


@dataclass(frozen=True)
class PowerModel:
    """A hypothetical model: P(correct) by similarity and position, spread, failures, stops."""

    acc_b: float = 0.95
    acc_m: float = 0.9
    acc_e: float = 0.95
    acc_a: float = 0.95
    failure_rate: float = 0.0
    stop_after: int | None = None  # consecutive failures that end a run; None: the protocol's
    high_b: float | None = None
    high_m: float | None = None
    high_e: float | None = None
    high_a: float | None = None
    case_sd: float = 0.0

    def check(self) -> None:
        """Refuse probabilities outside [0, 1] and a spread outside [0, 10], with the name."""
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("stop_after", "case_sd") or value is None:
                continue
            if not 0 <= value <= 1:  # NaN fails too
                raise NeedlepointError(f"power: {f.name} must lie in [0, 1], got {value}")
        if not 0 <= self.case_sd <= MAX_CASE_SD:
            raise NeedlepointError(
                f"power: case_sd must lie in [0, {MAX_CASE_SD:g}] (logit scale), got {self.case_sd}"
            )

    def high(self, condition: str) -> float:
        """P(correct) under high similarity at B, E or A (the low rate where none is given)."""
        own = {"B": self.high_b, "E": self.high_e, "A": self.high_a}[condition]
        low = {"B": self.acc_b, "E": self.acc_e, "A": self.acc_a}[condition]
        return low if own is None else own

    @property
    def shift(self) -> float:
        """How much higher the ends are under high similarity than under low, on average."""
        return (self.high("B") + self.high("E")) / 2 - (self.acc_b + self.acc_e) / 2

    @property
    def largest_effect(self) -> float:
        """The largest expected difference these rates allow: high M at 0."""
        return self.acc_m + self.shift

    @property
    def smallest_effect(self) -> float:
        """The smallest expected difference these rates allow: high M at 1."""
        return self.acc_m + self.shift - 1

    @property
    def own_effect(self) -> float | None:
        """The expected difference at the given ``high_m``; None without one."""
        return None if self.high_m is None else self.largest_effect - self.high_m

    def rates(self, effect: float) -> dict[tuple[str, str], float]:
        """P(correct) per (similarity, condition) for one added middle loss."""
        out = {("low", "B"): self.acc_b, ("low", "M"): self.acc_m}
        out |= {("low", "E"): self.acc_e, ("low", "A"): self.acc_a}
        out |= {("high", c): self.high(c) for c in ("B", "E", "A")}
        # Clamped only against rounding: the grid's effects are checked against the range first.
        out[("high", "M")] = min(1.0, max(0.0, self.largest_effect - effect))
        return out

    def check_effects(self, effects: tuple[float, ...]) -> None:
        """Refuse an effect the rates cannot produce (also NaN), naming the range."""
        low, high = max(0.0, self.smallest_effect), self.largest_effect
        tol = 1e-12  # effects are typed decimals; the range is a sum of them
        if not all(low - tol <= e <= high + tol for e in effects):
            raise NeedlepointError(
                f"power: added middle losses must lie in [{low:.4g}, {high:.4g}] for these rates "
                "(the middle accuracy under high similarity they imply must be a probability)"
            )


def expit_shifted(p: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """P(correct) after a per-case shift on the logit scale; 0 and 1 stay where they are."""
    with np.errstate(divide="ignore"):  # log(0) is -inf and log1p(-1) is -inf, on purpose
        logit = np.log(p) - np.log1p(-p)
    return 1 / (1 + np.exp(-(logit + shift)))


def mc_se(power: float, simulations: int) -> float:
    """Monte Carlo standard error of a simulated proportion: sqrt(p(1 − p)/runs)."""
    return math.sqrt(power * (1 - power) / simulations)
