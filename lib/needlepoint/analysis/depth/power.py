"""Power of a depth design: how often its preregistered decision says "supported" for a
hypothetical model, simulated through the real execution order and the one decision rule.

**The model** (``DepthPowerModel``): P(correct) per similarity and condition (every depth and
A). The added effect is the expected value of the preregistered contrast (high minus low
similarity): the depths the contrast weighs negatively (the interior, for ends minus interior)
are lowered under high similarity, by the same amount at each, so that

    E[contrast] = shift − neg · (shift − effect) / neg = effect,
    shift = Σ_{w>0} w · (high − low),   neg = −Σ_{w<0} w,

and every other cell keeps the rate the model gives it. The rates allow effects from
``smallest_effect`` to ``largest_effect`` only, because each lowered depth must stay a
probability. The high-similarity rates at the lowered depths are a measurement shown beside the
model (``own_effect``), never used.

**The simulation** reuses ``analysis.power.simulate_answers`` (the execution order, failures
and the runner's stop rule), keeps the cases whose every depth is valid under both
similarities (A is not needed, as in the analysis), computes each case's value with
``per_case_values`` and decides with ``decide`` on the analysis's own interval
(``case_interval``: the seeded case-cluster percentile bootstrap). A run whose estimate stays
below the threshold is not supported whatever its interval, so only the others are
bootstrapped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from needlepoint.analysis.depth import (
    SUPPORTED,
    case_interval,
    contrast_weights,
    decide,
    per_case_values,
)
from needlepoint.analysis.power import PowerStudy, check_size, power_row, simulate_answers
from needlepoint.analysis.record import AnalysisParameters
from needlepoint.errors import NeedlepointError

TOLERANCE = 1e-12  # effects are typed decimals; the range is a sum of them


@dataclass(frozen=True)
class DepthPowerModel:
    """A hypothetical model of a depth design: P(correct) per condition and similarity.

    ``conditions`` are the design's (depths, then A); ``low`` and ``high`` are aligned with
    them. ``weights`` are the preregistered contrast's, one per depth. A ``high`` entry at a
    negatively weighted depth is the pilot's measurement, shown and not used (None when the
    pilot had no valid answer there).
    """

    conditions: tuple[str, ...]
    weights: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float | None, ...]
    failure_rate: float
    stop_after: int

    def check(self) -> None:
        """Refuse rates outside [0, 1] and tuples that do not match the conditions."""
        n = len(self.conditions)
        if len(self.low) != n or len(self.high) != n or len(self.weights) != n - 1:
            raise NeedlepointError("power: one rate per condition and one weight per depth")
        for name, values in (("low", self.low), ("high", self.high)):
            for c, v in zip(self.conditions, values, strict=True):
                if v is not None and not 0 <= v <= 1:  # NaN fails too
                    raise NeedlepointError(f"power: {name} {c} must lie in [0, 1], got {v}")
        if not 0 <= self.failure_rate <= 1:
            raise NeedlepointError(
                f"power: failure_rate must lie in [0, 1], got {self.failure_rate}"
            )
        for i, w in enumerate(self.weights):
            if w >= 0 and self.high[i] is None:
                raise NeedlepointError(f"power: no high-similarity rate at {self.conditions[i]}")
        if self.high[-1] is None:
            raise NeedlepointError("power: no high-similarity rate for A")

    @property
    def negative(self) -> float:
        """The total weight the contrast puts below 0 (1 for every named contrast)."""
        return -sum(w for w in self.weights if w < 0)

    @property
    def shift(self) -> float:
        """How much higher the positively weighted depths are under high similarity."""
        return sum(
            w * ((self.high[i] or 0.0) - self.low[i]) for i, w in enumerate(self.weights) if w > 0
        )

    def _lowered(self) -> list[float]:
        return [self.low[i] for i, w in enumerate(self.weights) if w < 0]

    @property
    def largest_effect(self) -> float:
        """The largest expected contrast these rates allow: a lowered depth reaches 0."""
        return self.shift + self.negative * min(self._lowered())

    @property
    def smallest_effect(self) -> float:
        """The smallest expected contrast these rates allow: a lowered depth reaches 1."""
        return self.shift + self.negative * (max(self._lowered()) - 1)

    @property
    def own_effect(self) -> float | None:
        """The contrast the measured high rates imply; None when one is missing."""
        if any(self.high[i] is None for i in range(len(self.weights))):
            return None
        return sum(w * ((self.high[i] or 0.0) - self.low[i]) for i, w in enumerate(self.weights))

    def rates(self, effect: float) -> dict[tuple[str, str], float]:
        """P(correct) per (similarity, condition) for one added effect."""
        out = {("low", c): self.low[i] for i, c in enumerate(self.conditions)}
        drop = (self.shift - effect) / self.negative
        for i, c in enumerate(self.conditions):
            w = self.weights[i] if i < len(self.weights) else 0.0
            rate = self.low[i] + drop if w < 0 else self.high[i]
            # Clamped only against rounding: the effects are checked against the range first.
            out[("high", c)] = min(1.0, max(0.0, float(rate if rate is not None else 0.0)))
        return out

    def check_effects(self, effects: tuple[float, ...]) -> None:
        """Refuse an effect the rates cannot produce (also NaN), naming the range."""
        low, high = max(0.0, self.smallest_effect), self.largest_effect
        if not all(low - TOLERANCE <= e <= high + TOLERANCE for e in effects):
            raise NeedlepointError(
                f"power: effects must lie in [{low:.4g}, {high:.4g}] for these rates (each "
                "lowered depth under high similarity must stay a probability)"
            )


def depth_model(
    protocol: dict[str, Any],
    low: dict[str, float],
    high: dict[str, float | None],
    failure_rate: float,
    stop_after: int | None = None,
) -> DepthPowerModel:
    """The model of ``protocol``'s conditions and contrast from per-condition rates."""
    conditions = tuple(str(c) for c in protocol["conditions"])
    depths = [float(d) for d in protocol["depths"]]
    weights = tuple(contrast_weights(protocol["analysis"]["contrast"], depths))
    stop = stop_after
    if stop is None:
        stop = int(protocol["runner"]["max_consecutive_failures"])
    model = DepthPowerModel(
        conditions=conditions,
        weights=weights,
        low=tuple(float(low[c]) for c in conditions),
        high=tuple(high.get(c) for c in conditions),
        failure_rate=float(failure_rate),
        stop_after=stop,
    )
    model.check()
    return model


def decisions(
    correct: np.ndarray, valid: np.ndarray, weights: tuple[float, ...], params: AnalysisParameters
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per simulated run: supported, decided, and the number of complete cases.

    ``correct`` and ``valid`` are (run, case, length, similarity, depth) arrays of the present
    depths only; the analysis's own value, interval and rule decide each run.
    """
    complete = valid.all(axis=(2, 3, 4))
    runs = correct.shape[0]
    supported = np.zeros(runs, dtype=bool)
    decided = np.zeros(runs, dtype=bool)
    for r in range(runs):
        # (case, length, similarity, depth) -> (case, similarity, length, depth), as analyzed.
        grids = correct[r][complete[r]].transpose(0, 2, 1, 3).astype(float)
        values = per_case_values(grids, weights)
        k = len(values)
        if k < params.min_complete_cases:
            continue
        decided[r] = True
        estimate = float(values.mean())
        if estimate < params.threshold - TOLERANCE:
            continue  # below the threshold: not supported whatever the interval says
        interval = case_interval(values, params, 0)
        supported[r] = decide(interval, params)[0] == SUPPORTED
    return supported, decided, complete.sum(axis=1)


def depth_power_grid(model: DepthPowerModel, study: PowerStudy, protocol: dict[str, Any]) -> Any:
    """P(decision = supported) of a depth design over case counts and effects, as a pandas
    DataFrame with ``analysis.power.POWER_COLUMNS``."""
    import pandas as pd

    model.check()
    model.check_effects(tuple(study.effects))
    check_size(study, protocol)
    params = AnalysisParameters.of(protocol)
    conditions = tuple(str(c) for c in protocol["conditions"])
    if conditions != model.conditions:
        raise NeedlepointError("power: the model's conditions are not the design's")
    present = [i for i, c in enumerate(conditions) if c != "A"]
    rows = []
    for n in study.cases:
        requests = n * len(protocol["lengths"]) * 2 * len(conditions)
        rng = np.random.default_rng([study.seed, n])
        shape = (study.simulations, requests)
        uniforms = (rng.random(shape), rng.random(shape))
        for effect in study.effects:
            correct, valid = simulate_answers(
                protocol, n, model.rates(effect), model.failure_rate, uniforms,
                model.stop_after, None, conditions,
            )  # fmt: skip
            supported, decided, complete = decisions(
                correct[..., present], valid[..., present], model.weights, params
            )
            rows.append(power_row(n, effect, supported, decided, complete))
    return pd.DataFrame(rows)
