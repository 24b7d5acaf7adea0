"""Design sensitivity: the vectorised simulation must make the analysis's own decisions."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support.analysis import analysis_params
from support.results import make_input, make_prepared

from needlepoint import cli
from needlepoint.analysis.power import (
    CONDITIONS,
    PowerModel,
    PowerStudy,
    decide_runs,
    design_index,
    power_grid,
    simulate_runs,
)
from needlepoint.analysis.primary import SUPPORTED, decide, primary
from needlepoint.analysis.sensitivity import detectable_effect
from needlepoint.design.prepared import Prepared
from needlepoint.design.protocol import reference_protocol
from needlepoint.errors import NeedlepointError

PARAMS = analysis_params()


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    return make_prepared(tmp_path_factory)


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
    nums, complete = simulate_runs(protocol, 8, acc, 0.04, uniforms, stop_after=2)
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
    _, complete = simulate_runs(protocol, 8, acc, 0.5, (answers, fails), stop_after=2)
    # Columns 0-15 are the first case's two pairs: the run stops at column 11, so that case and
    # every case after it are incomplete.
    assert not complete.any()
    _, complete = simulate_runs(protocol, 8, acc, 0.5, (answers, fails), stop_after=0)
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
