"""The power simulation against plain loops, and the power grid's refusals and columns.

``simulate_runs`` and ``decide_runs`` are vectorised for speed; the references below walk one
run at a time in execution order, as the runner and the analysis would: count consecutive
failures, stop after ``stop_after`` of them, call a case complete only when every one of its
requests was sent and valid, then decide with the analysis's own ``decide``.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.analysis import analysis_params

from needlepoint.analysis.decision import NOT_EVALUABLE, SUPPORTED, decide
from needlepoint.analysis.power import (
    CONDITIONS,
    POWER_COLUMNS,
    PowerModel,
    PowerStudy,
    decide_runs,
    design_index,
    power_grid,
    simulate_runs,
)
from needlepoint.analysis.record import AnalysisParameters
from needlepoint.design import generate
from needlepoint.design.protocol import reference_protocol
from needlepoint.errors import NeedlepointError

FUZZ = settings(derandomize=True, max_examples=60, deadline=None)
PROTOCOL = reference_protocol()


def loop_runs(n_cases, accuracy, failure_rate, uniforms, stop_after):
    """One run at a time, in execution order: what the runner sends and what comes back."""
    _, slots = design_index(PROTOCOL, n_cases)
    u_answer, u_fail = uniforms
    numerators = np.zeros((u_answer.shape[0], n_cases), dtype=int)
    complete = np.zeros((u_answer.shape[0], n_cases), dtype=bool)
    for r in range(u_answer.shape[0]):
        valid: dict[int, bool] = {}
        correct: dict[tuple, int] = {}
        streak, stopped = 0, False
        for col, s in enumerate(slots):
            failed = u_fail[r, col] < failure_rate
            ok = not stopped and not failed
            valid[s.case_index] = valid.get(s.case_index, True) and ok
            correct[(s.case_index, s.length, s.similarity, s.condition)] = int(
                u_answer[r, col] < accuracy[(s.similarity, s.condition)]
            )
            streak = streak + 1 if failed else 0
            if stop_after > 0 and streak >= stop_after:
                stopped = True
        for case in range(n_cases):
            complete[r, case] = valid[case]
            for length in PROTOCOL["lengths"]:
                loss = {}
                for sim in ("low", "high"):
                    c = {cond: correct[(case, length, sim, cond)] for cond in CONDITIONS}
                    loss[sim] = c["B"] + c["E"] - 2 * c["M"]
                numerators[r, case] += loss["high"] - loss["low"]
    return numerators, complete


@FUZZ
@given(
    n_cases=st.integers(1, 4),
    failure_rate=st.sampled_from([0.0, 0.1, 0.3, 0.6, 1.0]),
    stop_after=st.integers(0, 3),
    seed=st.integers(0, 2**32 - 1),
)
def test_simulate_runs_matches_a_loop_in_execution_order(
    n_cases: int, failure_rate: float, stop_after: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    acc = {(s, c): float(rng.random()) for s in ("low", "high") for c in CONDITIONS}
    cols = len(design_index(PROTOCOL, n_cases)[1])
    uniforms = (rng.random((5, cols)), rng.random((5, cols)))
    got = simulate_runs(PROTOCOL, n_cases, acc, failure_rate, uniforms, stop_after)
    want = loop_runs(n_cases, acc, failure_rate, uniforms, stop_after)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert got[0].dtype.kind == "i" and got[1].dtype == bool  # integer numerators, as documented


def test_a_draw_equal_to_the_probability_is_not_the_event() -> None:
    # P(u < p) = p for u uniform on [0, 1): correct only below p, failed only below the rate.
    cols = len(design_index(PROTOCOL, 1)[1])
    half = np.full((1, cols), 0.5)
    acc = {(s, c): 0.5 for s in ("low", "high") for c in CONDITIONS}
    nums, complete = simulate_runs(PROTOCOL, 1, acc, 0.5, (half, half), stop_after=0)
    assert complete.all() and nums.tolist() == [[0]]
    acc[("high", "B")] = 0.75  # now high-similarity B is right at both lengths: +1 each
    nums, _ = simulate_runs(PROTOCOL, 1, acc, 0.5, (half, half), stop_after=0)
    assert nums.tolist() == [[2]]


def params(**kw: object) -> AnalysisParameters:
    return analysis_params(**{"bootstrap_resamples": 400, "bootstrap_seed": 5, **kw})


@FUZZ
@given(
    seed=st.integers(0, 2**32 - 1),
    n_cases=st.integers(1, 6),
    minimum=st.integers(1, 3),
    threshold=st.sampled_from([0.0, 0.1, 0.25]),
    confidence=st.sampled_from([0.5, 0.8, 0.95]),
    exact_max=st.integers(0, 6),
    denominator=st.sampled_from([2, 4]),
)
def test_decide_runs_makes_the_analysis_decision_run_by_run(
    seed: int,
    n_cases: int,
    minimum: int,
    threshold: float,
    confidence: float,
    exact_max: int,
    denominator: int,
) -> None:
    rng = np.random.default_rng(seed)
    numerators = rng.integers(-2, 5, (12, n_cases))
    complete = rng.random((12, n_cases)) < 0.8
    p = params(
        min_complete_cases=minimum,
        threshold=threshold,
        confidence=confidence,
        exact_bootstrap_max_cases=exact_max,
    )
    supported, evaluable = decide_runs(numerators, complete, denominator, p)
    assert supported.dtype == bool and evaluable.dtype == bool
    for r in range(12):
        out = decide([int(x) for x in numerators[r][complete[r]]], denominator, p)
        assert supported[r] == (out.decision == SUPPORTED), r
        assert evaluable[r] == (out.decision != NOT_EVALUABLE), r


def test_monte_carlo_counts_are_drawn_once_per_case_count() -> None:
    cache: dict = {}
    numerators = np.full((3, 5), 4)
    complete = np.ones((3, 5), dtype=bool)
    complete[2, 4] = False
    decide_runs(numerators, complete, 4, params(exact_bootstrap_max_cases=3), cache)
    shapes = sorted(v.shape for v in cache.values())
    assert shapes == [(400, 4), (400, 5)]
    # Each resample draws every case count times: each row sums to the number of cases.
    assert all((v.sum(axis=1) == v.shape[1]).all() for v in cache.values())


def test_monte_carlo_keeps_the_complete_cases_in_case_order() -> None:
    # The analysis resamples the complete cases in case order, so the vectorised decision must
    # pack them in that order too; 40 cases are enough for an unstable sort to reorder them.
    rng = np.random.default_rng(8)
    numerators = rng.integers(-3, 6, (30, 40))
    complete = rng.random((30, 40)) < 0.7
    p = params(exact_bootstrap_max_cases=12, bootstrap_resamples=300)
    supported, _ = decide_runs(numerators, complete, 4, p)
    for r in range(30):
        out = decide([int(x) for x in numerators[r][complete[r]]], 4, p)
        assert supported[r] == (out.decision == SUPPORTED), r
    assert supported.any() and not supported.all()


def test_the_model_defaults_and_its_refusals() -> None:
    assert PowerModel() == PowerModel(0.95, 0.9, 0.95, 0.95, 0.0, None, None, None, None, None, 0.0)
    PowerModel(acc_b=0.0, acc_m=1.0, failure_rate=1.0, stop_after=7).check()
    for name in ("acc_b", "acc_m", "acc_e", "acc_a", "failure_rate"):
        for bad in (-0.01, 1.01):
            with pytest.raises(NeedlepointError) as info:
                PowerModel(**{name: bad}).check()
            assert str(info.value) == f"power: {name} must lie in [0, 1], got {bad}"


def test_the_study_defaults_and_tuples() -> None:
    study = PowerStudy(cases=[4], effects=[0.1])
    assert (study.cases, study.effects) == ((4,), (0.1,))
    default = PowerStudy()
    assert (default.cases, default.simulations, default.seed) == ((8, 16, 32), 1000, 20260930)
    assert default.effects == tuple(round(0.05 * i, 2) for i in range(13))


@pytest.mark.parametrize(
    ("model", "study", "message"),
    [
        (
            PowerModel(acc_m=0.5),
            PowerStudy(effects=(0.6,)),
            "added middle losses must lie in [0, 0.5] for these rates (the middle accuracy under "
            "high similarity they imply must be a probability)",
        ),
        (
            PowerModel(),
            PowerStudy(effects=(-0.05,)),
            "added middle losses must lie in [0, 0.9] for these rates (the middle accuracy under "
            "high similarity they imply must be a probability)",
        ),
        (PowerModel(), PowerStudy(simulations=0), "simulations and cases must be positive"),
        (PowerModel(), PowerStudy(cases=(8, 0)), "simulations and cases must be positive"),
        (PowerModel(acc_a=2.0), PowerStudy(), "acc_a must lie in [0, 1], got 2.0"),
    ],
)
def test_power_grid_refuses_impossible_studies(model, study, message: str) -> None:
    with pytest.raises(NeedlepointError) as info:
        power_grid(model, study)
    assert str(info.value) == f"power: {message}"


def loop_power(model: PowerModel, study: PowerStudy) -> pd.DataFrame:
    """The power table one simulated run at a time, each decided by the analysis's decide."""
    p = AnalysisParameters.of(PROTOCOL)
    stop = model.stop_after
    if stop is None:
        stop = PROTOCOL["runner"]["max_consecutive_failures"]
    rows = []
    for n in study.cases:
        cols = len(design_index(PROTOCOL, n)[1])
        rng = np.random.default_rng([study.seed, n])
        uniforms = (rng.random((study.simulations, cols)), rng.random((study.simulations, cols)))
        for effect in study.effects:
            by_condition = {"B": model.acc_b, "M": model.acc_m, "E": model.acc_e, "A": model.acc_a}
            acc = {(s, c): by_condition[c] for s in ("low", "high") for c in CONDITIONS}
            acc[("high", "M")] = model.acc_m - effect
            nums, complete = loop_runs(n, acc, model.failure_rate, uniforms, stop)
            outs = [
                decide([int(x) for x in nums[r][complete[r]]], 2 * len(PROTOCOL["lengths"]), p)
                for r in range(study.simulations)
            ]
            rows.append(
                {
                    "cases": n,
                    "effect": effect,
                    "power": (power := float(np.mean([o.decision == SUPPORTED for o in outs]))),
                    "power_se": float(np.sqrt(power * (1 - power) / study.simulations)),
                    "not_evaluable": float(np.mean([o.decision == NOT_EVALUABLE for o in outs])),
                    "mean_complete_cases": float(complete.sum(axis=1).mean()),
                    "simulations": study.simulations,
                }
            )
    return pd.DataFrame(rows)


def test_power_grid_matches_deciding_each_run_with_the_analysis() -> None:
    model = PowerModel(acc_b=0.9, acc_m=0.8, acc_e=0.9, acc_a=0.9, failure_rate=0.02)
    study = PowerStudy(cases=(3, 5), effects=(0.0, 0.2, 0.4), simulations=40, seed=17)
    got = power_grid(model, study)
    want = loop_power(model, study)
    pd.testing.assert_frame_equal(got, want)
    assert got["power"].max() > 0 and got["not_evaluable"].max() > 0


def test_the_smallest_study_runs() -> None:
    table = power_grid(PowerModel(), PowerStudy(cases=(1,), effects=(0.0,), simulations=1))
    assert table.shape == (1, len(POWER_COLUMNS)) and table["not_evaluable"].item() == 1.0


def test_defaults_are_the_default_model_and_study() -> None:
    # Refused before anything is simulated, so the defaults cost nothing to check.
    with pytest.raises(NeedlepointError, match=r"^power: acc_b must lie in \[0, 1\], got 2.0$"):
        power_grid(PowerModel(acc_b=2.0))
    with pytest.raises(NeedlepointError, match=r"must lie in \[0, 0\.9\] for these rates"):
        power_grid(None, PowerStudy(effects=(0.95,)))


def test_the_largest_effect_is_the_whole_middle_accuracy() -> None:
    model = PowerModel(acc_b=1.0, acc_m=0.5, acc_e=1.0, acc_a=1.0)
    table = power_grid(model, PowerStudy(cases=(4,), effects=(0.5,), simulations=20))
    assert list(table.columns) == list(POWER_COLUMNS)
    row = table.iloc[0]
    assert (row["cases"], row["effect"], row["simulations"]) == (4, 0.5, 20)
    assert (row["not_evaluable"], row["mean_complete_cases"]) == (0.0, 4.0)


def test_the_stop_rule_defaults_to_the_protocol_and_can_be_overridden() -> None:
    study = PowerStudy(cases=(8,), effects=(0.3,), simulations=150, seed=11)
    flaky = PowerModel(failure_rate=0.15)
    default = power_grid(flaky, study)
    same = power_grid(PowerModel(failure_rate=0.15, stop_after=2), study)
    pd.testing.assert_frame_equal(default, same)  # the reference protocol stops after 2
    never = power_grid(PowerModel(failure_rate=0.15, stop_after=0), study)
    assert never["mean_complete_cases"].item() > default["mean_complete_cases"].item()
    other = dict(PROTOCOL, runner={**PROTOCOL["runner"], "max_consecutive_failures": 0})
    pd.testing.assert_frame_equal(power_grid(flaky, study, other), never)


def test_the_grid_seed_and_case_count_both_seed_the_draws() -> None:
    model = PowerModel(failure_rate=0.1)
    a = power_grid(model, PowerStudy(cases=(6,), effects=(0.2,), simulations=80, seed=1))
    b = power_grid(model, PowerStudy(cases=(6,), effects=(0.2,), simulations=80, seed=2))
    assert not a.equals(b)
    both = power_grid(model, PowerStudy(cases=(6, 7), effects=(0.2,), simulations=80, seed=1))
    pd.testing.assert_frame_equal(both.iloc[:1], a)


def test_an_execution_plan_that_misses_a_cell_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    real = generate.execution_plan
    monkeypatch.setattr(generate, "execution_plan", lambda p: real(p)[:-1])
    with pytest.raises(NeedlepointError) as info:
        design_index(PROTOCOL, 2)
    assert str(info.value) == "power: the execution plan does not cover every cell"


def test_a_run_that_stops_at_a_case_boundary_keeps_the_cases_before_it() -> None:
    # Cases are contiguous blocks of 16 requests: failures at 16 and 17 stop the run exactly
    # after the first case, which was sent whole and stays complete.
    _, slots = design_index(PROTOCOL, 3)
    fails = np.ones((1, len(slots)))
    fails[0, [16, 17]] = 0.0
    acc = {(s, c): 1.0 for s in ("low", "high") for c in CONDITIONS}
    args = (3, acc, 0.5, (np.zeros((1, len(slots))), fails), 2)
    got = simulate_runs(PROTOCOL, *args)
    assert np.array_equal(got[1], loop_runs(*args)[1])
    assert got[1][0].tolist() == [c == slots[0].case_index for c in range(3)]


@pytest.mark.parametrize("threshold", [0.1, 0.25])
@pytest.mark.parametrize("denominator", [2, 4])
def test_decide_runs_at_the_threshold_and_one_unit_below(
    threshold: float, denominator: int
) -> None:
    # k cases of 0 and 1 whose mean difference is exactly the threshold, then one unit less.
    # At confidence 0.5 the bootstrap bound is above 0 for both, so only the estimate decides.
    rows = []
    for k in (10, 12):
        at = Fraction(str(threshold)) * k * denominator
        if at.denominator == 1:
            rows += [[1] * n + [0] * (k - n) + [9] * (12 - k) for n in (int(at), int(at) - 1)]
    numerators = np.array(rows)
    complete = numerators != 9  # the filler stands for incomplete cases
    p = params(threshold=threshold, confidence=0.5)
    supported, _ = decide_runs(numerators, complete, denominator, p)
    assert supported.tolist() == [True, False] * (len(rows) // 2)
    for r in range(len(rows)):
        out = decide(numerators[r][complete[r]].tolist(), denominator, p)
        assert supported[r] == (out.decision == SUPPORTED), r


def test_exactly_exact_max_cases_are_enumerated_not_resampled() -> None:
    # Two cases, -1 and 3: exactly, P(resample mean <= 0) = 1/4, which is not below alpha = 1/4
    # at confidence 0.5; the seed-0 Monte Carlo draw finds fewer, so it would say supported.
    numerators, complete = np.array([[-1, 3]]), np.ones((1, 2), dtype=bool)
    p = params(threshold=0.0, confidence=0.5, bootstrap_resamples=40, bootstrap_seed=0)
    exact = dataclasses.replace(p, exact_bootstrap_max_cases=2)
    resampled = dataclasses.replace(p, exact_bootstrap_max_cases=1)
    assert decide_runs(numerators, complete, 4, exact)[0].tolist() == [False]
    assert decide_runs(numerators, complete, 4, resampled)[0].tolist() == [True]
    for q in (exact, resampled):
        want = decide([-1, 3], 4, q).decision == SUPPORTED
        assert decide_runs(numerators, complete, 4, q)[0].tolist() == [want]


def test_power_grid_divides_by_two_per_length() -> None:
    # A perfect model but for high-similarity M: a case's numerator is 2 per length where that
    # answer is wrong, its difference that over 2 * lengths. At 32 cases and an added loss of
    # 0.125 many runs sit between a mean of 0.1 (supported) and what any other divisor gives.
    model = PowerModel(acc_b=1.0, acc_m=1.0, acc_e=1.0, acc_a=1.0)
    study = PowerStudy(cases=(32,), effects=(0.125,), simulations=12, seed=3)
    got = power_grid(model, study)
    pd.testing.assert_frame_equal(got, loop_power(model, study))
    assert 0 < got["power"].item() < 1
