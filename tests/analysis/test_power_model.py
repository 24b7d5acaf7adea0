"""The power model's per-similarity rates, spread and standard errors, and the two fixed defects.

- ``decide_runs`` once multiplied exact counts by alpha's denominator in int64: with 13 exact
  cases and a non-round confidence that overflowed silently (wrong decisions) or raised.
- ``simulate_runs`` once built a sliding window longer than the run when the stop count
  exceeded the request slots, and numpy raised.
Both are pinned at the schema's extremes: 13 exact cases (``exact_bootstrap_max_cases``' top),
confidences that are not round, and stop counts at and above the slots.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from support.analysis import analysis_params

from needlepoint.analysis.clustered import quick_decision
from needlepoint.analysis.decision import SUPPORTED
from needlepoint.analysis.power import (
    PowerModel,
    PowerStudy,
    decide_runs,
    design_index,
    power_grid,
    simulate_runs,
)
from needlepoint.analysis.power_model import expit_shifted, mc_se
from needlepoint.analysis.sensitivity import sensitivity_lines
from needlepoint.cli import main
from needlepoint.design.protocol import reference_protocol
from needlepoint.errors import NeedlepointError

PROTOCOL = reference_protocol()


def _reference(numerators: np.ndarray, complete: np.ndarray, p) -> list[bool]:
    # decide() enumerates C(25, 13) = 5.2 million multisets per 13-case run; quick_decision
    # counts the same distribution by polynomial powers (test_clustered pins it to decide()).
    return [
        quick_decision([int(x) for x in numerators[r][complete[r]]], 4, p).decision == SUPPORTED
        for r in range(len(numerators))
    ]


@pytest.mark.parametrize("confidence", [0.9512345, 0.95, 1e-20, 0.999999999, 0.5000001])
def test_decide_runs_agrees_with_the_analysis_at_13_exact_cases(confidence: float) -> None:
    rng = np.random.default_rng(2024)
    numerators = rng.integers(-2, 5, (200, 13))
    complete = np.ones((200, 13), dtype=bool)
    complete[:40, 12] = False  # 12 cases in some runs, 13 in the rest: both exact
    p = analysis_params(confidence=confidence, exact_bootstrap_max_cases=13, threshold=0.0)
    supported, _ = decide_runs(numerators, complete, 4, p)
    assert supported.tolist() == _reference(numerators, complete, p)
    if confidence == 0.9512345:
        assert 0 < supported.sum() < 200  # both decisions occur, so a wrong one would show


def test_the_need_is_at_least_one_unit_of_weight() -> None:
    # Confidence 1e-20: alpha is a hair under 1/2, so the need is about half of 13**13; a run
    # with every case positive has no weight at or below 0 and is supported, one zero case not.
    p = analysis_params(confidence=1e-20, exact_bootstrap_max_cases=13, threshold=0.0)
    numerators = np.array([[1] * 13, [0] + [1] * 12, [-1] * 7 + [1] * 6])
    everything = np.ones((3, 13), dtype=bool)
    supported, _ = decide_runs(numerators, everything, 4, p)
    assert supported.tolist() == _reference(numerators, everything, p)
    assert supported.tolist()[0] is True and supported.tolist()[2] is False


@pytest.mark.parametrize("extra", [0, 1, 1000])
def test_a_stop_count_at_or_above_the_slots_never_raises(extra: int) -> None:
    n = 1
    _, slots = design_index(PROTOCOL, n)
    rng = np.random.default_rng(5)
    uniforms = (rng.random((50, len(slots))), rng.random((50, len(slots))))
    acc = {(s, c): 0.9 for s in ("low", "high") for c in "BMEA"}
    stop = len(slots) + extra
    nums, complete = simulate_runs(PROTOCOL, n, acc, 1.0, uniforms, stop)
    never = simulate_runs(PROTOCOL, n, acc, 1.0, uniforms, 0)
    if extra:
        # More failures in a row than requests cannot happen: the run is never stopped.
        np.testing.assert_array_equal(nums, never[0])
        np.testing.assert_array_equal(complete, never[1])
    assert not complete.any()  # every request failed: nothing is complete either way
    table = power_grid(
        PowerModel(failure_rate=0.5, stop_after=stop),
        PowerStudy(cases=(1,), effects=(0.2,), simulations=10),
    )
    assert table["not_evaluable"].item() == 1.0


def test_a_stop_count_equal_to_the_slots_still_stops_an_all_failed_run() -> None:
    _, slots = design_index(PROTOCOL, 1)
    uniforms = (np.zeros((1, len(slots))), np.zeros((1, len(slots))))
    acc = {(s, c): 1.0 for s in ("low", "high") for c in "BMEA"}
    _, complete = simulate_runs(PROTOCOL, 1, acc, 0.5, uniforms, len(slots))
    assert complete.tolist() == [[False]]


def test_rates_set_the_high_middle_so_the_expected_difference_is_the_effect() -> None:
    m = PowerModel(acc_b=1.0, acc_m=1.0, acc_e=1.0, acc_a=0.5, high_b=0.5, high_e=0.0)
    # The live pilot's rates at 12 records: the largest attainable difference is 0.25.
    assert m.shift == -0.75 and m.largest_effect == 0.25 and m.smallest_effect == -0.75
    rates = m.rates(0.1)
    assert rates[("high", "M")] == pytest.approx(0.15)
    assert rates[("high", "B")] == 0.5 and rates[("high", "E")] == 0.0
    assert rates[("high", "A")] == 0.5 and rates[("low", "M")] == 1.0
    expected = ((rates[("high", "B")] + rates[("high", "E")]) / 2 - rates[("high", "M")]) - (
        (rates[("low", "B")] + rates[("low", "E")]) / 2 - rates[("low", "M")]
    )
    assert expected == pytest.approx(0.1)
    assert m.own_effect is None
    assert PowerModel(high_m=0.4).own_effect == pytest.approx(0.5)


def test_equal_rates_keep_the_old_model_exactly() -> None:
    m = PowerModel(acc_m=0.7)
    for effect in (0.0, 0.35, 0.7):
        assert m.rates(effect)[("high", "M")] == 0.7 - effect
        assert m.rates(effect)[("high", "B")] == m.acc_b


def test_effects_at_the_largest_attainable_run_and_above_it_are_refused() -> None:
    m = PowerModel(acc_b=1.0, acc_m=1.0, acc_e=1.0, high_b=0.5, high_e=0.0)
    table = power_grid(m, PowerStudy(cases=(4,), effects=(0.0, 0.25), simulations=20))
    assert list(table["effect"]) == [0.0, 0.25]
    with pytest.raises(NeedlepointError) as info:
        power_grid(m, PowerStudy(cases=(4,), effects=(0.26,), simulations=20))
    assert str(info.value) == (
        "power: added middle losses must lie in [0, 0.25] for these rates (the middle "
        "accuracy under high similarity they imply must be a probability)"
    )
    # High similarity better at the ends: the smallest effect is above 0 and bounds the range.
    up = PowerModel(acc_b=0.5, acc_m=0.5, acc_e=0.5, high_b=1.0, high_e=1.0)
    assert up.smallest_effect == 0.0 and up.largest_effect == 1.0
    lifted = PowerModel(acc_b=0.2, acc_m=0.9, acc_e=0.2, high_b=1.0, high_e=1.0)
    assert lifted.smallest_effect == pytest.approx(0.7)
    with pytest.raises(NeedlepointError, match=r"must lie in \[0\.7, 1\.7\]"):
        power_grid(lifted, PowerStudy(cases=(4,), effects=(0.69,), simulations=5))
    with pytest.raises(NeedlepointError, match="must lie in"):
        power_grid(m, PowerStudy(cases=(4,), effects=(float("nan"),), simulations=5))


def test_per_similarity_rates_reach_the_simulation() -> None:
    # High-similarity ends always wrong and B, M, E perfect under low: every block's loss
    # under high is -M_high, under low 0, so the difference is never positive: power 0.
    m = PowerModel(acc_b=1.0, acc_m=1.0, acc_e=1.0, acc_a=1.0, high_b=0.0, high_e=0.0)
    assert m.largest_effect == 0.0
    table = power_grid(m, PowerStudy(cases=(8,), effects=(0.0,), simulations=50))
    assert table["power"].item() == 0.0
    same = power_grid(PowerModel(), PowerStudy(cases=(8,), effects=(0.3,), simulations=60))
    explicit = PowerModel(high_b=0.95, high_e=0.95, high_a=0.95)
    pd.testing.assert_frame_equal(
        same, power_grid(explicit, PowerStudy(cases=(8,), effects=(0.3,), simulations=60))
    )


def test_the_between_case_spread_is_seeded_and_zero_changes_nothing() -> None:
    study = PowerStudy(cases=(8,), effects=(0.2, 0.4), simulations=300, seed=9)
    base = power_grid(PowerModel(), study)
    pd.testing.assert_frame_equal(base, power_grid(PowerModel(case_sd=0.0), study))
    spread = power_grid(PowerModel(case_sd=1.5), study)
    pd.testing.assert_frame_equal(spread, power_grid(PowerModel(case_sd=1.5), study))
    assert not spread["power"].equals(base["power"])
    for bad in (-0.1, 10.5, float("nan")):
        with pytest.raises(NeedlepointError, match="case_sd must lie in"):
            power_grid(PowerModel(case_sd=bad), study)
    PowerModel(case_sd=10.0).check()  # the edge is allowed


def test_expit_shift_keeps_certain_cells_certain() -> None:
    p = np.array([0.0, 0.5, 1.0])
    out = expit_shifted(p, np.array([[3.0, 3.0, -3.0]]))
    assert out[0, 0] == 0.0 and out[0, 2] == 1.0
    assert out[0, 1] == pytest.approx(1 / (1 + math.exp(-3)))
    np.testing.assert_allclose(expit_shifted(p[1:2], np.zeros((1, 1))), [[0.5]])


def test_every_power_value_carries_its_monte_carlo_standard_error() -> None:
    table = power_grid(PowerModel(), PowerStudy(cases=(8,), effects=(0.3,), simulations=400))
    row = table.iloc[0]
    assert row["power_se"] == pytest.approx(math.sqrt(row["power"] * (1 - row["power"]) / 400))
    assert mc_se(0.5, 100) == 0.05 and mc_se(0.0, 10) == 0.0 and mc_se(1.0, 10) == 0.0
    lines = sensitivity_lines(PowerModel(), PowerStudy(cases=(8,), effects=(0.3,), simulations=400))
    shown = next(line for line in lines if line.startswith("  0.30"))
    assert f"{row['power']:.3f} ± {row['power_se']:.3f}" in shown


def test_the_command_takes_high_similarity_rates_and_a_spread(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["power", "--cases", "4", "--effects", "0,0.1", "--simulations", "20"]
    argv += ["--acc-b", "1", "--acc-e", "1", "--acc-m", "1", "--high-acc-b", "0.5"]
    argv += ["--high-acc-e", "0", "--high-acc-m", "0.25", "--case-sd", "0.5"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "under high similarity B 0.5, E 0, A 0.95, and M 0.25 minus the added middle loss" in out
    assert "from 0 to 0.25; their own (high M 0.25) is 0" in out
    assert "between-case spread: SD 0.5 on the logit scale" in out
    assert main([*argv[:4], "0.3", *argv[5:]]) == 2
    assert "must lie in [0, 0.25]" in capsys.readouterr().err
    assert main(["power", "--high-acc-e", "1.5"]) == 2
    assert "high_e must lie in [0, 1], got 1.5" in capsys.readouterr().err


def test_certain_cells_raise_no_floating_point_error_whatever_the_callers_settings() -> None:
    """log(0) is -inf on purpose: a caller that turns floating-point warnings into errors
    still gets 0 and 1 back, not FloatingPointError."""
    with np.errstate(all="raise"):
        out = expit_shifted(np.array([0.0, 1.0]), np.array([[2.0, -2.0]]))
    assert out.tolist() == [[0.0, 1.0]]


def test_rates_name_each_condition_and_clamp_the_high_middle_to_a_probability() -> None:
    model = PowerModel(acc_b=0.9, acc_m=0.8, acc_e=0.7, acc_a=0.6, high_b=0.5, high_e=0.4)
    got = model.rates(0.3)
    assert list(got) == [
        ("low", "B"), ("low", "M"), ("low", "E"), ("low", "A"),
        ("high", "B"), ("high", "E"), ("high", "A"), ("high", "M"),
    ]  # fmt: skip
    assert [got[k] for k in list(got)[:7]] == [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.6]
    assert got[("high", "M")] == pytest.approx(model.largest_effect - 0.3)
    # Outside the range (check_effects refuses it first) the middle stays a probability.
    assert model.rates(model.smallest_effect - 0.5)[("high", "M")] == 1.0
    assert model.rates(model.largest_effect + 0.5)[("high", "M")] == 0.0


def test_the_effect_range_includes_both_ends() -> None:
    model = PowerModel(acc_b=1.0, acc_m=0.5, acc_e=1.0, acc_a=1.0, high_b=1.0, high_e=1.0)
    assert model.smallest_effect < 0 and model.largest_effect == 0.5  # so the range is [0, 0.5]
    model.check_effects((0.0, -1e-12, model.largest_effect, model.largest_effect + 1e-12))
    for outside in (-2e-12, model.largest_effect + 2e-12):
        with pytest.raises(NeedlepointError, match=r"must lie in \[0, 0\.5\]"):
            model.check_effects((outside,))
