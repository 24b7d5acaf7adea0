"""What ``decide_runs`` and ``_resample_counts`` promise at their own interface.

A mutant is only registered as equivalent when no argument the function accepts can tell it
apart (docs/mutation.md). The cache ``decide_runs`` fills is the caller's dict, and the counts
``_resample_counts`` returns are its result: both are observable, so both are pinned here.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.analysis import analysis_params

import needlepoint.analysis.power as power
from needlepoint.analysis.power import (
    MAX_POWER_BYTES,
    MAX_POWER_CASES,
    MAX_SIMULATIONS,
    PowerStudy,
    _resample_counts,
    check_size,
    decide_runs,
    power_bytes,
    power_grid,
)
from needlepoint.analysis.power_model import PowerModel
from needlepoint.design.protocol import reference_protocol
from needlepoint.errors import NeedlepointError


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
        return 10 * n * slots * (2 * 8 + 40 + spread) + resamples * n * 16 + 10 * resamples * 4

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
