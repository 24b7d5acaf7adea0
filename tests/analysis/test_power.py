"""Design sensitivity: the vectorised simulation must make the analysis's own decisions.

- The simulation against plain loops: ``run_numerators`` and ``decide_runs`` are vectorised for
  speed; the references below walk one run at a time in execution order, as the runner and the
  analysis would: count consecutive failures, stop after ``stop_after`` of them, call a case
  complete only when every one of its requests was sent and valid, then decide with the
  analysis's own ``decide``. Then the power grid's refusals and columns.
- What ``decide_runs`` and ``_resample_counts`` promise at their own interface. A mutant is
  only registered as equivalent when no argument the function accepts can tell it apart
  (docs/mutation.md). The cache ``decide_runs`` fills is the caller's dict, and the counts
  ``_resample_counts`` returns are its result: both are observable, so both are pinned here.
- The power model's per-similarity rates, spread and standard errors, and two fixed defects:
  ``decide_runs`` once multiplied exact counts by alpha's denominator in int64 (with 13 exact
  cases and a non-round confidence that overflowed silently, or raised); ``run_numerators`` once
  built a sliding window longer than the run when the stop count exceeded the request slots.
  Both are pinned at the schema's extremes.
- `needlepoint power`'s lines, files and curve: every line a reader gets, the table written
  beside it and what the curve draws are fixed exactly.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.analysis import analysis_params
from support.figures import record_figures
from support.results import make_input

import needlepoint.analysis.power as power
from needlepoint import cli
from needlepoint.analysis.power import (
    CONDITIONS,
    MAX_POWER_BYTES,
    MAX_POWER_CASES,
    MAX_SIMULATIONS,
    POWER_COLUMNS,
    PowerModel,
    PowerStudy,
    _resample_counts,
    check_size,
    decide_runs,
    design_index,
    detectable_effect,
    expit_shifted,
    mc_se,
    power_bytes,
    power_curve,
    power_grid,
    run_numerators,
    sensitivity_lines,
    simulate_answers,
)
from needlepoint.analysis.primary import NOT_EVALUABLE, SUPPORTED, decide, primary
from needlepoint.analysis.record import AnalysisParameters
from needlepoint.cli import main
from needlepoint.design import generate
from needlepoint.design.prepared import Prepared
from needlepoint.design.protocol import reference_protocol
from needlepoint.errors import NeedlepointError

# === the decisions of the simulation ===


PARAMS = analysis_params()


def accuracy(b: float, m: float, e: float, a: float, effect: float) -> dict:
    acc = {
        (s, c): p for s in ("low", "high") for c, p in zip(CONDITIONS, (b, m, e, a), strict=True)
    }
    acc[("high", "M")] = m - effect
    return acc


@pytest.mark.parametrize("n_cases,runs", [(8, 300), (16, 40)])
def test_vectorised_decisions_match_the_analysis(n_cases: int, runs: int) -> None:
    rng = np.random.default_rng(n_cases)
    numerators = rng.integers(-3, 6, (runs, n_cases))
    complete = rng.random((runs, n_cases)) < 0.85
    complete[0] = False  # not evaluable
    complete[1, 1:] = False  # one complete case: not evaluable either
    supported, evaluable = decide_runs(numerators, complete, 4, PARAMS)
    for r in range(runs):
        out = decide(list(numerators[r][complete[r]]), 4, PARAMS)
        assert (out.decision == SUPPORTED) == supported[r], r
        assert (out.decision != "not evaluable") == evaluable[r], r
    assert supported.any() and not supported.all()


def test_simulated_runs_match_the_analysis_of_the_same_outcomes(prepared: Prepared) -> None:
    protocol = prepared.protocol
    _, slots = design_index(protocol, 8)
    rng = np.random.default_rng(5)
    runs = 12
    uniforms = (rng.random((runs, len(slots))), rng.random((runs, len(slots))))
    acc = accuracy(0.9, 0.7, 0.9, 0.9, 0.3)
    nums, complete = run_numerators(
        simulate_answers(protocol, 8, acc, 0.04, uniforms, stop_after=2)
    )
    plan = {p.seq: p for p in prepared.plan}
    for r in range(runs):
        # Rebuild the same run as a results table and give it to the real analysis.
        failed = uniforms[1][r] < 0.04
        stop = next((i + 1 for i in range(len(slots) - 1) if failed[i] and failed[i + 1]), None)
        spec = {}
        for col, slot in enumerate(slots):
            seq = col + 1
            assert (plan[seq].case, plan[seq].condition) == (
                f"S{slot.case_index + 1}",
                slot.condition,
            )
            if stop is not None and col > stop:
                spec[seq] = "unexecuted"
            elif failed[col]:
                spec[seq] = "failure:http_status"
            elif uniforms[0][r, col] < acc[(slot.similarity, slot.condition)]:
                spec[seq] = "correct"
            else:
                spec[seq] = (
                    "error:code_when_absent:absent_code"
                    if slot.condition == "A"
                    else ("error:near_distractor_code")
                )
        result = primary(make_input(prepared, spec))
        got = {f"S{i + 1}": int(nums[r, i]) for i in range(8) if complete[r, i]}
        want = {c.case: round(4 * c.difference) for c in result.primary.cases}
        assert got == want, r
    # The check covered broken runs and real differences, not only perfect ones.
    assert 0 < complete.sum() < complete.size and (nums[complete] != 0).any()


def test_stop_rule_leaves_the_rest_unexecuted() -> None:
    protocol = reference_protocol()
    _, slots = design_index(protocol, 8)
    answers = np.zeros((1, len(slots)))
    fails = np.ones((1, len(slots)))
    fails[0, [10, 11]] = 0.0  # two consecutive failures at columns 10 and 11
    fails[0, 3] = 0.0  # a single failure does not stop the run
    acc = accuracy(1, 1, 1, 1, 0)
    _, complete = run_numerators(
        simulate_answers(protocol, 8, acc, 0.5, (answers, fails), stop_after=2)
    )
    # Columns 0-15 are the first case's two pairs: the run stops at column 11, so that case and
    # every case after it are incomplete.
    assert not complete.any()
    _, complete = run_numerators(
        simulate_answers(protocol, 8, acc, 0.5, (answers, fails), stop_after=0)
    )
    # Without the stop rule only the first case (all three failures are in it) drops.
    assert complete.sum() == 7 and not complete[0, design_index(protocol, 8)[1][0].case_index]


def test_power_is_seeded_and_monotone_in_the_effect() -> None:
    study = PowerStudy(cases=(8,), effects=(0, 0.1, 0.2, 0.3, 0.4), simulations=300, seed=3)
    a, b = power_grid(study=study), power_grid(study=study)
    pd.testing.assert_frame_equal(a, b)
    assert a["power"].is_monotonic_increasing
    assert not a.equals(power_grid(study=dataclasses.replace(study, seed=4)))
    assert list(a.columns) == [
        "cases",
        "effect",
        "power",
        "power_se",
        "not_evaluable",
        "mean_complete_cases",
        "simulations",
    ]


def test_power_extremes_are_exact() -> None:
    perfect = PowerModel(acc_b=1.0, acc_m=1.0, acc_e=1.0, acc_a=1.0)
    table = power_grid(perfect, PowerStudy(cases=(8, 16), effects=(0.0, 1.0), simulations=50))
    assert table["power"].to_list() == [0.0, 1.0, 0.0, 1.0]
    broken = power_grid(
        PowerModel(failure_rate=1.0), PowerStudy(cases=(8,), effects=(0.5,), simulations=20)
    )
    assert broken["power"].item() == 0.0 and broken["not_evaluable"].item() == 1.0


def test_failures_cost_complete_cases() -> None:
    table = power_grid(
        PowerModel(failure_rate=0.03), PowerStudy(cases=(8,), effects=(0.3,), simulations=200)
    )
    assert table["mean_complete_cases"].item() < 8
    assert table["not_evaluable"].item() > 0


def test_more_cases_detect_smaller_effects() -> None:
    table = power_grid(study=PowerStudy(cases=(8, 32), effects=(0.2, 0.3), simulations=200))
    wide = table.pivot(index="effect", columns="cases", values="power")
    assert (wide[32] > wide[8]).all()


@pytest.mark.parametrize(
    "model,study,message",
    [
        (PowerModel(), PowerStudy(effects=(0.95,)), "added middle losses must lie"),
        (PowerModel(acc_b=1.2), PowerStudy(), "acc_b must lie in"),
        (PowerModel(failure_rate=-0.1), PowerStudy(), "failure_rate must lie in"),
        (PowerModel(), PowerStudy(simulations=0), "must be positive"),
        (PowerModel(), PowerStudy(cases=(0,)), "must be positive"),
    ],
)
def test_power_refuses_impossible_models(
    model: PowerModel, study: PowerStudy, message: str
) -> None:
    with pytest.raises(NeedlepointError, match=message):
        power_grid(model, study)


def test_detectable_effect_interpolates() -> None:
    table = pd.DataFrame(
        {
            "cases": [8, 8, 8, 16, 16],
            "effect": [0.0, 0.2, 0.4, 0.0, 0.2],
            "power": [0.05, 0.6, 0.9, 0.85, 0.99],
        }
    )
    got = detectable_effect(table)
    assert got[8]["grid"] == 0.4 and got[8]["interpolated"] == pytest.approx(0.2 + 0.2 * 2 / 3)
    assert got[16] == {"grid": 0.0, "interpolated": 0.0}
    assert detectable_effect(table, target=0.995)[16] == {"grid": None, "interpolated": None}


def test_power_command_is_deterministic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["power", "--cases", "8", "--effects", "0,0.3,0.6", "--simulations", "100"]
    assert cli.main([*argv, "--out", str(tmp_path / "p")]) == 0
    first = capsys.readouterr().out
    assert cli.main([*argv, "--out", str(tmp_path / "p")]) == 0
    assert capsys.readouterr().out == first
    assert "8 cases: smallest added middle loss detected with >= 80% probability" in first
    assert str(tmp_path) not in first
    assert (tmp_path / "p" / "power.csv").read_text().startswith("cases,effect,power,")
    assert (tmp_path / "p" / "power_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seed", "-1"], "--seed must be a non-negative integer"),
        (["--effects", "nan"], "added middle losses must lie in"),
        (["--cases", "1000000"], "at most 10000 cases"),
        (["--simulations", "1000000000"], "1000000 simulations"),
        (["--simulations", "200000"], "GiB (limit 2 GiB)"),
    ],
)
def test_power_sizes_are_checked_before_allocating(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["power", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


# === decide_runs and _resample_counts at their interface ===


def test_the_callers_cache_holds_the_monte_carlo_counts_under_mc_and_the_case_count() -> None:
    params = analysis_params(exact_bootstrap_max_cases=2, bootstrap_resamples=50)
    cache: dict = {}
    decide_runs(np.full((2, 3), 4), np.ones((2, 3), dtype=bool), 4, params, cache)
    assert list(cache) == [("mc", 3)]
    np.testing.assert_array_equal(cache["mc", 3], _resample_counts(3, 50, params.bootstrap_seed))


def test_counts_already_in_the_cache_are_the_ones_used() -> None:
    # Every resample of a cached table takes case 0 only: its numerator -1 decides alone.
    params = analysis_params(exact_bootstrap_max_cases=2, bootstrap_resamples=50, threshold=0.0)
    numerators, complete = np.array([[-1, 9, 9]]), np.ones((1, 3), dtype=bool)
    assert decide_runs(numerators, complete, 4, params)[0].tolist() == [True]
    only_first = np.zeros((50, 3), dtype=np.float32)
    only_first[:, 0] = 3
    cache = {("mc", 3): only_first}
    assert decide_runs(numerators, complete, 4, params, cache)[0].tolist() == [False]


def test_resample_counts_are_float32_counts_of_each_case_per_resample() -> None:
    counts = _resample_counts(5, 7, 3)
    assert counts.dtype == np.float32  # power_bytes budgets 4 bytes per count
    assert counts.shape == (7, 5)
    assert (counts.sum(axis=1) == 5).all()
    draws = np.random.default_rng(3).integers(0, 5, (7, 5))
    expected = np.stack([np.bincount(row, minlength=5) for row in draws])
    np.testing.assert_array_equal(counts, expected)


def test_power_bytes_is_the_documented_estimate_at_the_largest_design() -> None:
    protocol = reference_protocol()
    lengths = len(protocol["lengths"])
    resamples = int(protocol["analysis"]["bootstrap_resamples"])
    study = PowerStudy(cases=(8, 4), effects=(0.2,), simulations=10, seed=1)

    def expected(n: int, spread: int) -> int:
        slots = lengths * 2 * 4  # both similarities x the four conditions per length
        return 10 * n * slots * (2 * 8 + 40 + spread) + resamples * n * 16 + 10 * resamples * 8

    assert power_bytes(study, protocol) == expected(8, 0)
    assert isinstance(power_bytes(study, protocol), int)
    assert power_bytes(study, protocol, spread=True) == expected(8, 16)
    # No design, or a design of no cases, needs nothing.
    assert power_bytes(PowerStudy(cases=(), simulations=10), protocol) == 0
    assert power_bytes(PowerStudy(cases=(0,), simulations=10), protocol) == 0
    assert power_bytes(PowerStudy(cases=(1,), simulations=10), protocol) == expected(1, 0)


def test_check_size_counts_the_spread_only_when_asked() -> None:
    # The fewest simulations of 100 cases whose estimate passes the limit only with the spread.
    protocol = reference_protocol()
    sims = next(
        s
        for s in range(1000, MAX_SIMULATIONS, 1000)
        if power_bytes(PowerStudy(cases=(100,), simulations=s), protocol, spread=True)
        > MAX_POWER_BYTES
    )
    study = PowerStudy(cases=(100,), simulations=sims)
    assert power_bytes(study, protocol) <= MAX_POWER_BYTES
    check_size(study, protocol)  # the default: no spread
    with pytest.raises(NeedlepointError, match=f"^power: {sims} simulations of up to 100 cases"):
        check_size(study, protocol, spread=True)


def test_check_size_takes_seed_0_and_refuses_a_negative_seed() -> None:
    protocol = reference_protocol()
    check_size(PowerStudy(cases=(4,), simulations=10, seed=0), protocol)
    with pytest.raises(
        NeedlepointError, match=r"^power: --seed must be a non-negative integer, got -1$"
    ):
        check_size(PowerStudy(cases=(4,), simulations=10, seed=-1), protocol)


def test_check_size_limits_are_inclusive_and_its_memory_line_is_exact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    protocol = reference_protocol()
    at_most = f"^power: at most {MAX_POWER_CASES} cases and {MAX_SIMULATIONS} simulations$"
    with pytest.raises(NeedlepointError, match=at_most):
        check_size(PowerStudy(cases=(MAX_POWER_CASES + 1,), simulations=1), protocol)
    with pytest.raises(NeedlepointError, match=at_most):
        check_size(PowerStudy(cases=(1,), simulations=MAX_SIMULATIONS + 1), protocol)
    check_size(PowerStudy(cases=(MAX_POWER_CASES,), simulations=1), protocol)  # on the limit
    # A million simulations pass the count limit, and then meet the memory limit.
    with pytest.raises(NeedlepointError, match=r"^power: 1000000 simulations of up to 1 cases"):
        check_size(PowerStudy(cases=(1,), simulations=MAX_SIMULATIONS), protocol)
    study = PowerStudy(cases=(4,), simulations=10)
    monkeypatch.setattr(power, "power_bytes", lambda *_: MAX_POWER_BYTES)
    check_size(study, protocol)  # exactly the limit fits
    monkeypatch.setattr(power, "power_bytes", lambda *_: 3 * 2**30)
    with pytest.raises(NeedlepointError) as err:
        check_size(study, protocol)
    assert str(err.value) == (
        "power: 10 simulations of up to 4 cases need about 3.0 GiB (limit 2 GiB); "
        "lower --simulations or --cases"
    )


def test_power_grid_counts_the_spread_exactly_when_cases_vary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = []

    def stop(study: PowerStudy, protocol: dict, spread: bool = False) -> None:
        seen.append(spread)
        raise NeedlepointError("stop")

    monkeypatch.setattr(power, "check_size", stop)
    for sd in (0.0, 0.5, 1.0):
        with pytest.raises(NeedlepointError, match="stop"):
            power_grid(PowerModel(case_sd=sd), PowerStudy(cases=(4,), simulations=10))
    assert seen == [False, True, True]


def test_a_between_case_spread_below_1_changes_the_runs() -> None:
    # Seeded reference values: the spread 0.5 shifts each case on the logit scale.
    study = PowerStudy(cases=(8,), effects=(0.0, 0.3), simulations=200, seed=5)
    flat = power_grid(PowerModel(case_sd=0.0), study)["power"].tolist()
    spread = power_grid(PowerModel(case_sd=0.5), study)["power"].tolist()
    assert (flat, spread) == ([0.06, 0.54], [0.065, 0.56])


def test_monte_carlo_sums_are_exact_for_numerators_beyond_float32() -> None:
    # 2**26 + 1 is not a float32: summed in float32, every resample holding case 0 once would
    # read 0 instead of 1 (164 resamples at or below 0 instead of 71 of 200), below the need.
    big = 2**25
    numerators = np.array([[2 * big + 1, -big, -big]])
    params = analysis_params(
        exact_bootstrap_max_cases=2, bootstrap_resamples=200, threshold=0.0, confidence=0.2
    )
    counts = _resample_counts(3, 200, params.bootstrap_seed).astype(np.int64)
    at_zero = int(((counts @ numerators[0]) <= 0).sum())
    assert at_zero == 71  # the need is ceil(0.4 x 200) = 80
    assert decide_runs(numerators, np.ones((1, 3), dtype=bool), 4, params)[0].tolist() == [True]


# === the model, and two fixed defects ===


PROTOCOL = reference_protocol()


def _reference(numerators: np.ndarray, complete: np.ndarray, p) -> list[bool]:
    # The analysis's own decision, one run at a time.
    return [
        decide([int(x) for x in numerators[r][complete[r]]], 4, p).decision == SUPPORTED
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
    nums, complete = run_numerators(simulate_answers(PROTOCOL, n, acc, 1.0, uniforms, stop))
    never = run_numerators(simulate_answers(PROTOCOL, n, acc, 1.0, uniforms, 0))
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
    _, complete = run_numerators(simulate_answers(PROTOCOL, 1, acc, 0.5, uniforms, len(slots)))
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


# === against plain loops ===


FUZZ = settings(derandomize=True, max_examples=60, deadline=None)


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
def test_run_numerators_matches_a_loop_in_execution_order(
    n_cases: int, failure_rate: float, stop_after: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    acc = {(s, c): float(rng.random()) for s in ("low", "high") for c in CONDITIONS}
    cols = len(design_index(PROTOCOL, n_cases)[1])
    uniforms = (rng.random((5, cols)), rng.random((5, cols)))
    got = run_numerators(
        simulate_answers(PROTOCOL, n_cases, acc, failure_rate, uniforms, stop_after)
    )
    want = loop_runs(n_cases, acc, failure_rate, uniforms, stop_after)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert got[0].dtype.kind == "i" and got[1].dtype == bool  # integer numerators, as documented


def test_a_draw_equal_to_the_probability_is_not_the_event() -> None:
    # P(u < p) = p for u uniform on [0, 1): correct only below p, failed only below the rate.
    cols = len(design_index(PROTOCOL, 1)[1])
    half = np.full((1, cols), 0.5)
    acc = {(s, c): 0.5 for s in ("low", "high") for c in CONDITIONS}
    nums, complete = run_numerators(
        simulate_answers(PROTOCOL, 1, acc, 0.5, (half, half), stop_after=0)
    )
    assert complete.all() and nums.tolist() == [[0]]
    acc[("high", "B")] = 0.75  # now high-similarity B is right at both lengths: +1 each
    nums, _ = run_numerators(simulate_answers(PROTOCOL, 1, acc, 0.5, (half, half), stop_after=0))
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
    got = run_numerators(simulate_answers(PROTOCOL, *args))
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


# === the sensitivity table, its files and its curve ===


MODEL = PowerModel(acc_b=0.95, acc_m=0.9, acc_e=0.85, acc_a=0.8, failure_rate=0.01, stop_after=3)
STUDY = PowerStudy(cases=(4, 2), effects=(0.0, 0.45, 0.9), simulations=40, seed=7)
TITLE = "Design sensitivity: probability that the decision is 'supported'"
HEADER = [
    "Design sensitivity (seeded simulation of hypothetical models; not a model result)",
    "model: P(correct) under low similarity B 0.95, M 0.9, E 0.85, A 0.8; under high similarity "
    "B 0.95, E 0.85, A 0.8, and M 0.9 minus the added middle loss",
    "these rates allow added middle losses from 0 to 0.9",
    "between-case spread: SD 0 on the logit scale (0: every case alike); protocol-failure rate "
    "0.01; run stops after 3 consecutive failures",
    "decision: difference >= 0.1 and 95% lower bound > 0, at least 2 complete cases; exact "
    "bootstrap up to 12 cases, else 10000 resamples (seed 20260930)",
    "40 simulated runs per point, seed 7",
    "",
    "P(supported) ± its Monte Carlo standard error, by added middle loss (rows) and number of "
    "cases (columns):",
]
STOP, DECISION, RUNS = 3, 4, 5  # where the stop rule, the decision and the runs are said


def table(rows: list[tuple[int, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["cases", "effect", "power"])


def test_detectable_effect_is_by_case_count_in_order_and_reads_effects_in_order() -> None:
    got = detectable_effect(
        table([(16, 0.2, 0.99), (8, 0.4, 0.9), (16, 0.0, 0.5), (8, 0.0, 0.05), (8, 0.2, 0.6)])
    )
    assert list(got) == [8, 16] and all(type(n) is int for n in got)
    assert got[8] == {"grid": 0.4, "interpolated": pytest.approx(0.2 + 0.2 * (0.8 - 0.6) / 0.3)}
    assert got[16] == {"grid": 0.2, "interpolated": pytest.approx(0.2 * 0.3 / 0.49)}


def test_the_target_is_80_percent_and_reaching_it_exactly_counts() -> None:
    got = detectable_effect(table([(8, 0.0, 0.1), (8, 0.1, 0.8), (8, 0.2, 0.95)]))
    assert got[8] == {"grid": 0.1, "interpolated": pytest.approx(0.1)}
    assert detectable_effect(table([(8, 0.0, 0.79), (8, 0.1, 0.7999)])) == {
        8: {"grid": None, "interpolated": None}
    }
    assert detectable_effect(table([(8, 0.0, 0.5), (8, 0.1, 0.6)]), target=0.5)[8] == {
        "grid": 0.0,
        "interpolated": 0.0,
    }


def test_the_lines_say_the_model_the_rule_the_grid_and_what_is_reached(tmp_path: Path) -> None:
    lines = sensitivity_lines(MODEL, STUDY)
    assert lines[: len(HEADER)] == HEADER
    assert lines[len(HEADER) :] == [
        "effect        2 cases        4 cases",
        "  0.00   0.150 ± 0.056   0.025 ± 0.025",
        "  0.45   0.400 ± 0.077   0.475 ± 0.079",
        "  0.90   0.650 ± 0.075   0.975 ± 0.025",
        "",
        "2 cases: 80% power is not reached within the grid",
        "4 cases: smallest added middle loss detected with >= 80% probability: 0.90 on the grid "
        "(about 0.743 interpolated)",
    ]


def test_the_protocols_stop_rule_is_named_when_the_model_has_none() -> None:
    model = PowerModel(failure_rate=0.5)
    lines = sensitivity_lines(model, PowerStudy(cases=(2,), effects=(0.0,), simulations=5))
    stop = reference_protocol()["runner"]["max_consecutive_failures"]
    assert lines[STOP].endswith(f"run stops after {stop} consecutive failures")
    assert lines[RUNS] == "5 simulated runs per point, seed 20260930"


def test_a_prepared_folders_protocol_replaces_the_reference(tmp_path: Path) -> None:
    from needlepoint.design.prepared import prepare_protocol

    protocol = reference_protocol()
    protocol["runner"]["max_consecutive_failures"] = 5
    protocol["analysis"]["threshold"] = 0.2
    protocol["version"] = 2  # v1 is frozen
    folder = prepare_protocol(tmp_path / "prepared", protocol)
    study = PowerStudy(cases=(2,), effects=(0.0,), simulations=5)
    lines = sensitivity_lines(PowerModel(), study, prepared=str(folder))
    assert lines[STOP].endswith("run stops after 5 consecutive failures")
    assert lines[DECISION].startswith("decision: difference >= 0.2 and 95% lower bound > 0")


def test_with_out_the_table_and_the_curve_are_written_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = record_figures(monkeypatch, power)
    out = tmp_path / "deep" / "power"
    lines = sensitivity_lines(MODEL, STUDY, out=out)
    assert lines[-1] == "wrote power/power.csv and power/power_curve.png"
    expected = power_grid(MODEL, STUDY).to_csv(index=False, lineterminator="\n").encode()
    assert (out / "power.csv").read_bytes() == expected
    assert expected.startswith(b"cases,effect,power,power_se,not_evaluable,mean_complete_cases,")
    assert b"\r" not in expected
    assert (out / "power_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [f["args"][4] for f in figures] == [out / "power_curve.png"]
    threshold = figures[0]["axes"][0]["lines"][-1]
    assert (threshold["label"], threshold["x"]) == ("threshold 0.1", [0.1, 0.1])
    sensitivity_lines(MODEL, STUDY, out=out)  # an existing folder is written again


def test_the_curve_draws_each_case_count_the_target_and_the_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = record_figures(monkeypatch, power)
    data = table([(16, 0.0, 0.3), (16, 0.2, 0.9), (8, 0.0, 0.1), (8, 0.2, 0.5)])
    path = tmp_path / "curve.png"
    assert power_curve(data, str(path), threshold=0.15) == path
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (call,) = figures
    assert call["args"] == ((7.0, 4.2), (0.8, 0.3, 0.5, 0.6), TITLE, False, str(path))
    (ax,) = call["axes"]
    assert ax["xlabel"] == "added middle loss under high similarity (true difference)"
    assert ax["ylabel"] == "P(supported)"
    assert ax["ylim"] == (-0.02, 1.02)
    style = {"marker": "o", "markersize": 3.0, "linestyle": "-", "linewidth": 1.5}
    eight, sixteen, target, threshold = ax["lines"]
    assert eight == {**eight, **style, "x": [0.0, 0.2], "y": [0.1, 0.5], "label": "8 cases"}
    assert sixteen == {**sixteen, **style, "x": [0.0, 0.2], "y": [0.3, 0.9], "label": "16 cases"}
    assert target == {
        "x": [0.0, 1.0], "y": [0.8, 0.8], "label": "80%", "marker": "None", "markersize": 6.0,
        "color": "#808080", "linestyle": ":", "linewidth": 1.0,
    }  # fmt: skip
    assert threshold == {
        "x": [0.15, 0.15], "y": [0.0, 1.0], "label": "threshold 0.15", "marker": "None",
        "markersize": 6.0, "color": "#b2182b", "linestyle": "--", "linewidth": 1.0,
    }  # fmt: skip
    assert ax["legend"] == [
        ("8 cases", 8.0), ("16 cases", 8.0), ("80%", 8.0), ("threshold 0.15", 8.0)
    ]  # fmt: skip


def test_without_a_threshold_the_curve_has_no_threshold_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = record_figures(monkeypatch, power)
    power_curve(table([(8, 0.0, 0.1)]), tmp_path / "c.png", target=0.9)
    labels = [line["label"] for line in figures[0]["axes"][0]["lines"]]
    assert labels == ["8 cases", "90%"]
    assert figures[0]["axes"][0]["lines"][1]["y"] == [0.9, 0.9]


def test_without_a_model_or_a_study_the_defaults_are_used(monkeypatch: pytest.MonkeyPatch) -> None:
    small = PowerStudy(cases=(2,), effects=(0.0,), simulations=5, seed=3)
    monkeypatch.setattr(power, "PowerStudy", lambda: small)
    lines = sensitivity_lines()
    assert lines[1] == (
        "model: P(correct) under low similarity B 0.95, M 0.9, E 0.95, A 0.95; under high "
        "similarity B 0.95, E 0.95, A 0.95, and M 0.9 minus the added middle loss"
    )
    assert lines[STOP] == (
        "between-case spread: SD 0 on the logit scale (0: every case alike); protocol-failure "
        "rate 0; run stops after 2 consecutive failures"
    )
    assert lines[RUNS] == "5 simulated runs per point, seed 3"


def test_the_power_table_is_simulated_under_the_prepared_protocol(tmp_path: Path) -> None:
    from needlepoint.design.prepared import load_prepared, prepare_protocol

    protocol = reference_protocol()
    protocol["analysis"]["threshold"] = 0.4
    protocol["version"] = 2
    folder = prepare_protocol(tmp_path / "prepared", protocol)
    study = PowerStudy(cases=(4,), effects=(0.5,), simulations=40, seed=7)
    frozen = load_prepared(folder).protocol
    power = float(power_grid(MODEL, study, frozen)["power"].iloc[0])
    assert power != float(power_grid(MODEL, study)["power"].iloc[0])
    lines = sensitivity_lines(MODEL, study, prepared=folder)
    assert any(line.startswith(f"  0.50   {power:.3f} ± ") for line in lines), lines


def test_power_work_counts_each_case_s_requests_and_resamples() -> None:
    """Per case and simulation: two similarities x four conditions per length, plus one
    operation per bootstrap resample; times the effects and the cases of every design."""
    protocol = reference_protocol()
    resamples = int(AnalysisParameters.of(protocol).bootstrap_resamples)
    study = PowerStudy(cases=(4, 8), simulations=10, effects=(0.1, 0.2, 0.3))
    per_case = len(protocol["lengths"]) * 2 * 4 + resamples
    assert power.power_work(study, protocol) == 3 * 10 * 12 * per_case


def test_check_size_takes_a_study_of_exactly_the_work_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    protocol = reference_protocol()
    study = PowerStudy(cases=(4,), simulations=10)
    work = power.power_work(study, protocol)
    monkeypatch.setattr(power, "MAX_POWER_WORK", work)
    check_size(study, protocol)  # at the limit: allowed
    monkeypatch.setattr(power, "MAX_POWER_WORK", work - 1)
    with pytest.raises(NeedlepointError, match="case-operations"):
        check_size(study, protocol)
