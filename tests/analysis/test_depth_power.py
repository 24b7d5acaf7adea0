"""The power of a depth design: the model's effect is the expected contrast, and each simulated
run is decided by the analysis's own value, interval and rule."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from needlepoint.analysis.depth import contrast_weights
from needlepoint.analysis.depth.power import (
    DepthPowerModel,
    decisions,
    depth_model,
    depth_power_grid,
)
from needlepoint.analysis.power import PowerStudy
from needlepoint.analysis.record import AnalysisParameters
from needlepoint.design.protocol import load_override
from needlepoint.errors import NeedlepointError

ROOT = Path(__file__).resolve().parents[2]
LOW = {"D0": 0.9, "D0.25": 0.7, "D0.5": 0.6, "D0.75": 0.8, "D1": 0.85, "A": 0.95}
HIGH = {"D0": 0.8, "D0.25": 0.3, "D0.5": 0.2, "D0.75": 0.4, "D1": 0.75, "A": 0.9}


def _protocol(contrast: str = "ends-minus-interior", cases: int = 6) -> dict:
    p = load_override(ROOT / "protocols" / "depth-grid.json")
    return dict(p, cases=cases, lengths=[60], analysis=dict(p["analysis"], contrast=contrast))


def _expected(model: DepthPowerModel, effect: float) -> float:
    r = model.rates(effect)
    present = model.conditions[:-1]
    return sum(
        w * (r[("high", c)] - r[("low", c)]) for w, c in zip(model.weights, present, strict=True)
    )


@pytest.mark.parametrize(
    "contrast", ["ends-minus-interior", "ends-minus-centre", "first-minus-last"]
)
@pytest.mark.parametrize("effect", [0.0, 0.1, 0.25])
def test_the_effect_is_the_expected_contrast(contrast: str, effect: float) -> None:
    model = depth_model(_protocol(contrast), LOW, HIGH, 0.0)
    assert _expected(model, effect) == pytest.approx(effect, abs=1e-12)
    rates = model.rates(effect)
    for i, c in enumerate(model.conditions):
        w = model.weights[i] if i < len(model.weights) else 0.0
        if w >= 0:  # ends, zero-weight depths and A keep the model's own high rate
            assert rates[("high", c)] == HIGH[c]
        assert rates[("low", c)] == LOW[c]


def test_the_range_is_where_a_lowered_depth_stays_a_probability() -> None:
    model = depth_model(_protocol(), LOW, HIGH, 0.0)
    # shift = 0.5·(0.8 − 0.9) + 0.5·(0.75 − 0.85) = −0.1; the lowest interior rate 0.6
    assert model.shift == pytest.approx(-0.1)
    assert model.largest_effect == pytest.approx(0.5)
    assert model.smallest_effect == pytest.approx(-0.1 + 0.8 - 1)
    assert model.rates(model.largest_effect)[("high", "D0.5")] == pytest.approx(0.0)
    model.check_effects((0.0, 0.5))
    with pytest.raises(NeedlepointError, match=r"effects must lie in \[0, 0.5\]"):
        model.check_effects((0.51,))
    # The pilot's own: the measured high interior rates' contrast.
    own = -0.1 - ((0.3 - 0.7) + (0.2 - 0.6) + (0.4 - 0.8)) / 3
    assert model.own_effect == pytest.approx(own)


def test_a_missing_high_end_rate_or_a_bad_rate_is_refused() -> None:
    with pytest.raises(NeedlepointError, match="no high-similarity rate at D1"):
        depth_model(_protocol(), LOW, dict(HIGH, D1=None), 0.0)
    with pytest.raises(NeedlepointError, match="low D0 must lie in"):
        depth_model(_protocol(), dict(LOW, D0=1.5), HIGH, 0.0)
    # A lowered depth's high rate may be missing: the effect sets it.
    assert depth_model(_protocol(), LOW, dict(HIGH, **{"D0.5": None}), 0.0).own_effect is None


def _arrays(values: list[list[int]], valid: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """One run: per case, the five depths' answers under high similarity (low all correct)."""
    n = len(values)
    correct = np.ones((1, n, 1, 2, 5), dtype=bool)
    correct[0, :, 0, 1, :] = np.array(values, dtype=bool)
    return correct, np.full(correct.shape, valid)


def test_decisions_use_the_analysis_rule() -> None:
    params = AnalysisParameters.of(_protocol())
    weights = tuple(contrast_weights("ends-minus-interior", [0, 0.25, 0.5, 0.75, 1]))
    # Every case loses the whole interior under high similarity: contrast 1 each → supported.
    sup, dec, k = decisions(*_arrays([[1, 0, 0, 0, 1]] * 6), weights, params)
    assert (sup.tolist(), dec.tolist(), k.tolist()) == ([True], [True], [6])
    # Nothing changes: estimate 0, below the threshold.
    sup, dec, _ = decisions(*_arrays([[1, 1, 1, 1, 1]] * 6), weights, params)
    assert (sup.tolist(), dec.tolist()) == ([False], [True])
    # Mixed cases whose interval reaches below 0: not supported although the mean is high.
    mixed = [[1, 0, 0, 0, 1]] * 3 + [[0, 1, 1, 1, 0]] * 1 + [[1, 1, 1, 1, 1]] * 2
    sup, _, _ = decisions(*_arrays(mixed), weights, params)
    assert sup.tolist() == [False]
    # Too few complete cases: not decided.
    sup, dec, k = decisions(*_arrays([[1, 0, 0, 0, 1]] * 6, valid=False), weights, params)
    assert (sup.tolist(), dec.tolist(), k.tolist()) == ([False], [False], [0])


def test_power_grows_with_the_effect_and_repeats_exactly() -> None:
    protocol = _protocol()
    model = depth_model(protocol, LOW, HIGH, 0.0)
    study = PowerStudy(cases=(6, 12), effects=(0.0, 0.45), simulations=60, seed=7)
    table = depth_power_grid(model, study, protocol)
    again = depth_power_grid(model, study, protocol)
    assert table.equals(again)
    power = {(int(r.cases), float(r.effect)): float(r.power) for r in table.itertuples()}
    # At no effect the rule rarely says supported (60 runs: a loose bound on a noisy rate).
    assert power[(6, 0.0)] <= 0.2 and power[(12, 0.0)] <= 0.2
    assert power[(6, 0.45)] > power[(6, 0.0)]
    assert power[(12, 0.45)] >= power[(6, 0.45)] > 0.5
    assert (table["mean_complete_cases"] == table["cases"]).all()  # no failures: all complete


def test_failures_leave_cases_incomplete_and_the_stop_rule_ends_runs() -> None:
    protocol = _protocol()
    model = depth_model(protocol, LOW, HIGH, 0.5, stop_after=2)
    study = PowerStudy(cases=(6,), effects=(0.3,), simulations=40, seed=3)
    row = depth_power_grid(model, study, protocol).iloc[0]
    assert row["mean_complete_cases"] < 1  # a case needs 10 valid answers at p = 0.5 each
    assert row["not_evaluable"] == 1.0


def test_the_model_must_match_the_design() -> None:
    protocol = _protocol()
    model = depth_model(protocol, LOW, HIGH, 0.0)
    other = json.loads(json.dumps(protocol))
    other["conditions"] = ["D0", "D0.5", "D1", "A"]
    with pytest.raises(NeedlepointError, match="not the design's"):
        depth_power_grid(model, PowerStudy(cases=(6,), effects=(0.1,), simulations=2), other)
