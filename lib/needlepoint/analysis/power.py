"""Design sensitivity: how often the preregistered decision says "supported" for a given model.

A hypothetical model answers correctly with fixed probabilities at B, M and E (and refuses
correctly on A); under high similarity its middle accuracy drops by an added middle loss, which
is then exactly the expected value of the primary metric. Each simulated run goes through the
real execution order, the runner's stop rule (k consecutive failures end the run), the real
completeness rules and the real decision, including the bootstrap: exact enumeration (over
distinct case values, which is the same distribution) up to the protocol's limit, and above it
the very resamples the analysis would draw from the protocol's seed. Everything is seeded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from needlepoint.analysis.bootstrap import as_fraction, integer_sum_weights, tail_probabilities
from needlepoint.analysis.power_model import CONDITIONS, PowerModel, expit_shifted, mc_se
from needlepoint.analysis.record import AnalysisParameters
from needlepoint.errors import NeedlepointError

# Limits checked before anything is allocated (docs/analysis.md, "Power").
MAX_POWER_CASES = 10_000
MAX_SIMULATIONS = 1_000_000
MAX_POWER_BYTES = 2 * 1024**3
DEFAULT_EFFECTS = tuple(round(0.05 * i, 2) for i in range(13))
# The power table's columns (power.csv), one row per design × added middle loss.
POWER_COLUMNS = (
    "cases",
    "effect",
    "power",
    "power_se",
    "not_evaluable",
    "mean_complete_cases",
    "simulations",
)


@dataclass(frozen=True)
class PowerStudy:
    """The grid to simulate: designs (case counts), added middle losses, runs per point, seed."""

    cases: tuple[int, ...] = (8, 16, 32)
    effects: tuple[float, ...] = DEFAULT_EFFECTS
    simulations: int = 1000
    seed: int = 20260930

    def __post_init__(self) -> None:
        # Notebook parameters are lists; the record keeps tuples so that it stays immutable.
        object.__setattr__(self, "cases", tuple(self.cases))
        object.__setattr__(self, "effects", tuple(self.effects))


def design_index(protocol: dict[str, Any], n_cases: int) -> tuple[np.ndarray, list[Any]]:
    """Column of each (case, length, similarity, condition) in the real execution order."""
    from needlepoint.design.generate import execution_plan

    slots = execution_plan(dict(protocol, cases=n_cases))
    lengths, sims = list(protocol["lengths"]), ["low", "high"]
    index = np.full((n_cases, len(lengths), 2, len(CONDITIONS)), -1, dtype=np.int64)
    for col, s in enumerate(slots):
        index[
            s.case_index,
            lengths.index(s.length),
            sims.index(s.similarity),
            CONDITIONS.index(s.condition),
        ] = col
    if (index < 0).any():
        raise NeedlepointError("power: the execution plan does not cover every cell")
    return index, list(slots)


def simulate_runs(
    protocol: dict[str, Any],
    n_cases: int,
    accuracy: dict[tuple[str, str], float],
    failure_rate: float,
    uniforms: tuple[np.ndarray, np.ndarray],
    stop_after: int,
    case_shift: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-case integer numerators (sum over lengths of twice the difference) and completeness.

    ``accuracy`` maps (similarity, condition) to P(correct); ``uniforms`` are two (runs × slots)
    arrays of U(0, 1) draws, shared across effect sizes so the power curve is smooth;
    ``case_shift`` (runs × cases) moves every answer of a case on the logit scale.
    """
    index, slots = design_index(protocol, n_cases)
    p = np.array([accuracy[(s.similarity, s.condition)] for s in slots])
    u_answer, u_fail = uniforms
    if case_shift is not None:
        p = expit_shifted(p, case_shift[:, [s.case_index for s in slots]])
    correct = u_answer < p
    failed = u_fail < failure_rate
    valid = ~failed
    # More consecutive failures than requests can never happen: no window, no stop. (At a
    # failure rate of 0 the window finds no failure, so it needs no case of its own.)
    if 0 < stop_after <= failed.shape[1]:
        window = np.lib.stride_tricks.sliding_window_view(failed, stop_after, axis=1).all(-1)
        stops = window.any(axis=1)
        last = np.where(stops, window.argmax(axis=1) + stop_after - 1, failed.shape[1])
        valid &= np.arange(failed.shape[1]) <= last[:, None]  # the rest is never sent
    v, c = valid[:, index], correct[:, index].astype(np.int64)  # (runs, case, length, sim, cond)
    complete = v.all(axis=(2, 3, 4))
    twice_loss = c[..., 0] + c[..., 2] - 2 * c[..., 1]
    numerators = (twice_loss[..., 1] - twice_loss[..., 0]).sum(axis=2)
    return numerators, complete


def _resample_counts(k: int, resamples: int, seed: int) -> np.ndarray:
    """How often each case appears in each resample: the analysis's own Monte Carlo draw."""
    idx = np.random.default_rng(seed).integers(0, k, (resamples, k), dtype=np.uint32)
    counts = np.zeros((resamples, k), dtype=np.float32)
    np.add.at(counts, (np.repeat(np.arange(resamples), k), idx.ravel()), 1)
    return counts


def decide_runs(
    numerators: np.ndarray,
    complete: np.ndarray,
    denominator: int,
    params: AnalysisParameters,
    cache: dict[Any, Any] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised preregistered decision for many runs: (supported, evaluable) per run."""
    cache = {} if cache is None else cache
    threshold = as_fraction(float(params.threshold))
    alpha, _ = tail_probabilities(float(params.confidence))
    exact_max, minimum = int(params.exact_bootstrap_max_cases), int(params.min_complete_cases)
    k = complete.sum(axis=1)
    order = np.argsort(~complete, axis=1, kind="stable")  # complete cases first, in case order
    packed = np.take_along_axis(numerators, order, axis=1)
    supported = np.zeros(len(k), dtype=bool)
    for kv in np.unique(k[k >= max(minimum, 1)]):
        rows = np.flatnonzero(k == kv)
        vals = packed[rows, :kv]
        estimate_ok = vals.sum(axis=1) * threshold.denominator >= (
            threshold.numerator * int(kv) * denominator
        )
        # Only runs that pass the threshold need their bootstrap lower bound.
        rows, vals = rows[estimate_ok], vals[estimate_ok]
        if rows.size == 0:
            continue
        if kv <= exact_max:
            keys, inverse = np.unique(np.sort(vals, axis=1), axis=0, return_inverse=True)
            lowest, weights = integer_sum_weights(keys)
            cut = max(0, min(weights.shape[1], 1 - lowest))  # columns with sum <= 0
            at_zero = weights[:, :cut].sum(axis=1)[inverse.ravel()]
            total = int(kv) ** int(kv)
        else:
            key = ("mc", int(kv))
            if key not in cache:
                cache[key] = _resample_counts(
                    int(kv), int(params.bootstrap_resamples), int(params.bootstrap_seed)
                )
            # int64 numerators times float32 counts gives float64 sums, exact below 2**53; a
            # float32 product rounded numerators above 2**24 / cases and could flip the sign.
            at_zero = (vals @ cache[key].T <= 0).sum(axis=1)
            total = int(params.bootstrap_resamples)
        # Lower bound Q(alpha) > 0 exactly when the weight at sums <= 0 stays below the
        # quantile's need, ceil(alpha * total) and at least 1 (bootstrap.inverse_cdf_index).
        # The need is one exact Python integer: multiplying the counts by alpha's denominator
        # instead overflowed int64 for a non-round confidence with 13 exact cases.
        need = max(math.ceil(alpha * total), 1)
        supported[rows] = at_zero < need  # int64 counts (at most 13**13) against an int
    return supported, k >= minimum


def power_bytes(study: PowerStudy, protocol: dict[str, Any], spread: bool = False) -> int:
    """An upper estimate of the memory power_grid needs at its largest design, in bytes.

    Per simulated run and request slot: two float64 uniforms and about 40 bytes of booleans and
    gathered integers (with a between-case spread, 16 more: the shifted probabilities); per
    Monte Carlo bootstrap, resamples × cases indices and counts (16 bytes) and a float64 sum
    per run and resample.
    """
    params = AnalysisParameters.of(protocol)
    per_case = len(protocol["lengths"]) * 2 * len(CONDITIONS)
    resamples = int(params.bootstrap_resamples)
    worst = 0
    for n in study.cases:
        runs = study.simulations * n * per_case * (2 * 8 + 40 + (16 if spread else 0))
        boot = resamples * n * 16 + study.simulations * resamples * 8 if n > 0 else 0
        worst = max(worst, runs + boot)
    return worst


def check_size(study: PowerStudy, protocol: dict[str, Any], spread: bool = False) -> None:
    """Refuse a study that is malformed or would not fit in memory, before allocating."""
    if study.simulations < 1 or any(n < 1 for n in study.cases) or not study.cases:
        raise NeedlepointError("power: simulations and cases must be positive")
    if study.seed < 0:
        raise NeedlepointError(f"power: --seed must be a non-negative integer, got {study.seed}")
    if max(study.cases) > MAX_POWER_CASES or study.simulations > MAX_SIMULATIONS:
        raise NeedlepointError(
            f"power: at most {MAX_POWER_CASES} cases and {MAX_SIMULATIONS} simulations"
        )
    need = power_bytes(study, protocol, spread)
    if need > MAX_POWER_BYTES:
        raise NeedlepointError(
            f"power: {study.simulations} simulations of up to {max(study.cases)} cases need "
            f"about {need / 2**30:.1f} GiB (limit {MAX_POWER_BYTES / 2**30:g} GiB); "
            "lower --simulations or --cases"
        )


def power_grid(
    model: PowerModel | None = None,
    study: PowerStudy | None = None,
    protocol: dict[str, Any] | None = None,
) -> Any:
    """P(decision = supported) over a grid of added middle losses, as a pandas DataFrame.

    Defaults: ``PowerModel()``, ``PowerStudy()`` and the reference protocol, which gives the
    design and the decision rule.
    """
    import pandas as pd

    model = PowerModel() if model is None else model
    study = PowerStudy() if study is None else study
    if protocol is None:
        from needlepoint.design.protocol import reference_protocol

        protocol = reference_protocol()
    effects = list(study.effects)
    model.check()
    model.check_effects(tuple(effects))
    spread = model.case_sd > 0  # read once: the memory estimate and the draws must agree
    check_size(study, protocol, spread=spread)
    stop_after = model.stop_after
    if stop_after is None:
        stop_after = int(protocol["runner"]["max_consecutive_failures"])
    params = AnalysisParameters.of(protocol)
    denominator = 2 * len(protocol["lengths"])
    rows, cache = [], {}
    for n in study.cases:
        _, slots = design_index(protocol, n)
        rng = np.random.default_rng([study.seed, n])
        shape = (study.simulations, len(slots))
        uniforms = (rng.random(shape), rng.random(shape))
        # Drawn after the uniforms, so a model without spread keeps its earlier runs exactly.
        shift = None
        if spread:
            shift = model.case_sd * rng.standard_normal((study.simulations, n))
        for effect in effects:
            nums, complete = simulate_runs(
                protocol, n, model.rates(effect), model.failure_rate, uniforms, stop_after, shift
            )
            supported, evaluable = decide_runs(nums, complete, denominator, params, cache)
            power = float(supported.mean())
            values = (
                n,
                effect,
                power,
                mc_se(power, study.simulations),
                float(1 - evaluable.mean()),
                float(complete.sum(axis=1).mean()),
                study.simulations,
            )
            rows.append(dict(zip(POWER_COLUMNS, values, strict=True)))
    return pd.DataFrame(rows)
