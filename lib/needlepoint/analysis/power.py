"""Design sensitivity: how often the preregistered decision says "supported" for a given model.

A hypothetical model answers correctly with fixed probabilities at B, M and E (and refuses
correctly on A); under high similarity its middle accuracy drops by an added middle loss, which
is then exactly the expected value of the primary metric. Each simulated run goes through the
real execution order, the runner's stop rule (k consecutive failures end the run), the real
completeness rules, the one metric (``primary.numerators``) and the one decision rule
(``primary.meets_rule``), including the bootstrap: the exact count up to the protocol's limit,
and above it the very resamples the analysis would draw from the protocol's seed. Everything
is seeded.

**The model** (``PowerModel``): P(correct) per similarity and position. B, E and A have one
accuracy per similarity (``acc_*`` under low, ``high_*`` under high; a high rate left None is
the low one), M one under low similarity. The added middle loss ``effect`` then fixes M under
high similarity so that the expected primary metric is exactly ``effect``:

    high M = acc_m + shift − effect,   shift = (high B + high E)/2 − (acc_b + acc_e)/2

so with equal edge rates high M = acc_m − effect. Because high M must be a probability, the
rates allow effects from ``smallest_effect`` to ``largest_effect`` only. ``high_m``, when
given, is a measured high-similarity middle accuracy: it names the rates' own difference
(``own_effect``) and is otherwise not used. ``case_sd`` spreads the cases: each case's answers
share one shift on the logit scale, drawn from N(0, case_sd²) per simulated run.

``sensitivity_lines`` is `needlepoint power` and the power notebook: the table, its curve and
its files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from needlepoint.analysis.bootstrap import (
    integer_sum_weights,
    quantile_need,
    resample_indices,
    tail_probabilities,
)
from needlepoint.analysis.figures import stable_figure
from needlepoint.analysis.primary import evaluable, meets_rule, numerators
from needlepoint.analysis.record import AnalysisParameters
from needlepoint.design.schema import CONDITIONS, MAX_SIMULATIONS
from needlepoint.errors import NeedlepointError

MAX_CASE_SD = 10.0  # on the logit scale: beyond it every case is at 0 or 1 anyway


# --- the hypothetical model ----------------------------------------------------------------------


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


# --- the simulation ------------------------------------------------------------------------------


# Limits checked before anything is allocated (docs/analysis.md, "Power").
MAX_POWER_CASES = 10_000
MAX_POWER_BYTES = 2 * 1024**3
# The total work of a study, in case-operations: every design x every added loss x every run x
# every case x (its request slots + the bootstrap resamples). The memory bound above is per
# point; without this total, 50 designs x 1,000 losses x 5,000 runs passed every check and ran
# for hours. About 1e10 case-operations a second on one idle core (the default grid: 7.3e9).
MAX_POWER_WORK = 5 * 10**11
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


def design_index(
    protocol: dict[str, Any], n_cases: int, conditions: tuple[str, ...] = CONDITIONS
) -> tuple[np.ndarray, list[Any]]:
    """Column of each (case, length, similarity, condition) in the real execution order."""
    from needlepoint.design.generate import execution_plan

    slots = execution_plan(dict(protocol, cases=n_cases))
    lengths, sims = list(protocol["lengths"]), ["low", "high"]
    index = np.full((n_cases, len(lengths), 2, len(conditions)), -1, dtype=np.int64)
    for col, s in enumerate(slots):
        index[
            s.case_index,
            lengths.index(s.length),
            sims.index(s.similarity),
            conditions.index(s.condition),
        ] = col
    if (index < 0).any():
        raise NeedlepointError("power: the execution plan does not cover every cell")
    return index, list(slots)


def simulate_answers(
    protocol: dict[str, Any],
    n_cases: int,
    accuracy: dict[tuple[str, str], float],
    failure_rate: float,
    uniforms: tuple[np.ndarray, np.ndarray],
    stop_after: int,
    case_shift: np.ndarray | None = None,
    conditions: tuple[str, ...] = CONDITIONS,
) -> tuple[np.ndarray, np.ndarray]:
    """Simulated runs in the real execution order: (correct, valid) as arrays indexed
    (run, case, length, similarity, condition).

    ``accuracy`` maps (similarity, condition) to P(correct); ``uniforms`` are two (runs × slots)
    arrays of U(0, 1) draws, shared across effect sizes so the power curve is smooth;
    ``case_shift`` (runs × cases) moves every answer of a case on the logit scale. A failure is
    never an answer, and the runner's stop rule leaves every later slot unsent.
    """
    index, slots = design_index(protocol, n_cases, conditions)
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
    return correct[:, index], valid[:, index]


def run_numerators(answers: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-case integer numerators (sum over lengths of twice the difference) and completeness
    of ``simulate_answers``'s runs, read with the one metric."""
    correct, valid = answers
    complete = valid.all(axis=(2, 3, 4))
    nums, _ = numerators(correct.astype(np.int64)[..., : len("BME")])
    return nums, complete


def _resample_counts(k: int, resamples: int, seed: int) -> np.ndarray:
    """How often each case appears in each resample: the analysis's own Monte Carlo draw."""
    idx = resample_indices(k, resamples, seed)
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
    """The preregistered decision (``primary.meets_rule``) for many runs at once:
    (supported, evaluable) per run."""
    cache = {} if cache is None else cache
    alpha, _ = tail_probabilities(float(params.confidence))
    exact_max = int(params.exact_bootstrap_max_cases)
    k = complete.sum(axis=1)
    decided = evaluable(k, params)
    order = np.argsort(~complete, axis=1, kind="stable")  # complete cases first, in case order
    packed = np.take_along_axis(numerators, order, axis=1)
    supported = np.zeros(len(k), dtype=bool)
    for kv in np.unique(k[decided]):
        rows = np.flatnonzero(k == kv)
        vals = packed[rows, :kv]
        totals, scale = vals.sum(axis=1), int(kv) * denominator
        # Only runs whose estimate reaches the threshold need their bootstrap lower bound.
        reach = meets_rule(totals, scale, True, params)
        rows, vals, totals = rows[reach], vals[reach], totals[reach]
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
        # quantile's need (bootstrap.quantile_need). The need is one exact Python integer:
        # multiplying the counts by alpha's denominator instead overflowed int64 for a
        # non-round confidence with 13 exact cases.
        above_zero = at_zero < quantile_need(total, alpha)  # int64 counts (at most 13**13)
        supported[rows] = meets_rule(totals, scale, above_zero, params)
    return supported, decided


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


def power_work(study: PowerStudy, protocol: dict[str, Any]) -> int:
    """The study's total work in case-operations (see MAX_POWER_WORK): an upper estimate, as
    every run is counted as if it needed its bootstrap."""
    params = AnalysisParameters.of(protocol)
    per_case = len(protocol["lengths"]) * 2 * len(CONDITIONS) + int(params.bootstrap_resamples)
    return len(study.effects) * study.simulations * sum(study.cases) * per_case


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
    work = power_work(study, protocol)
    if work > MAX_POWER_WORK:
        raise NeedlepointError(
            f"power: {len(study.cases)} designs x {len(study.effects)} effects x "
            f"{study.simulations} simulations come to {work:.2e} case-operations (limit "
            f"{MAX_POWER_WORK:.0e}, minutes of work); lower --simulations, --cases or the effects"
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
            nums, complete = run_numerators(
                simulate_answers(
                    protocol,
                    n,
                    model.rates(effect),
                    model.failure_rate,
                    uniforms,
                    stop_after,
                    shift,
                )
            )
            supported, evaluable = decide_runs(nums, complete, denominator, params, cache)
            rows.append(power_row(n, effect, supported, evaluable, complete.sum(axis=1)))
    return pd.DataFrame(rows)


def power_row(
    cases: int,
    effect: float,
    supported: np.ndarray,
    decided: np.ndarray,
    complete_cases: np.ndarray,
) -> dict[str, Any]:
    """One power.csv row (``POWER_COLUMNS``) from each simulated run's decision, whether it was
    decided, and its number of complete cases."""
    power = float(supported.mean())
    runs = len(supported)
    values = (
        cases,
        effect,
        power,
        mc_se(power, runs),
        float(1 - decided.mean()),
        float(complete_cases.mean()),
        runs,
    )
    return dict(zip(POWER_COLUMNS, values, strict=True))


# --- the sensitivity table, its curve and its files ----------------------------------------------


def detectable_effect(table: Any, target: float = 0.8) -> dict[int, dict[str, float | None]]:
    """Smallest grid effect with power >= target per case count, and a linear interpolation."""
    out: dict[int, dict[str, float | None]] = {}
    for n, group in table.groupby("cases", sort=True):
        g = group.sort_values("effect")
        eff, pw = g["effect"].to_list(), g["power"].to_list()
        hit = next((i for i, p in enumerate(pw) if p >= target), None)
        if hit is None:
            out[int(n)] = {"grid": None, "interpolated": None}
        elif hit == 0:
            out[int(n)] = {"grid": eff[0], "interpolated": eff[0]}
        else:
            frac = (target - pw[hit - 1]) / (pw[hit] - pw[hit - 1])
            out[int(n)] = {
                "grid": eff[hit],
                "interpolated": eff[hit - 1] + frac * (eff[hit] - eff[hit - 1]),
            }
    return out


def model_lines(model: PowerModel, stop: int) -> list[str]:
    """The model in words: rates per similarity, the effects they allow, spread, failures."""
    hb, he, ha = model.high("B"), model.high("E"), model.high("A")
    own = model.own_effect
    lines = [
        f"model: P(correct) under low similarity B {model.acc_b:g}, M {model.acc_m:g}, "
        f"E {model.acc_e:g}, A {model.acc_a:g}; under high similarity B {hb:g}, E {he:g}, "
        f"A {ha:g}, and M {model.largest_effect:g} minus the added middle loss",
        f"these rates allow added middle losses from {max(0.0, model.smallest_effect):.4g} to "
        f"{model.largest_effect:.4g}"
        + ("" if own is None else f"; their own (high M {model.high_m:g}) is {own:.4g}"),
        f"between-case spread: SD {model.case_sd:g} on the logit scale (0: every case alike); "
        f"protocol-failure rate {model.failure_rate:g}; run stops after {stop} consecutive "
        "failures",
    ]
    return lines


def sensitivity_lines(
    model: PowerModel | None = None,
    study: PowerStudy | None = None,
    *,
    prepared: str | Path | None = None,
    out: str | Path | None = None,
) -> list[str]:
    """The `needlepoint power` output as lines; with ``out`` also power.csv and the curve.

    ``prepared`` takes the design and decision rule from a prepared folder instead of the
    reference protocol.
    """
    model = PowerModel() if model is None else model
    study = PowerStudy() if study is None else study
    protocol = None
    if prepared is not None:
        from needlepoint.design.prepared import load_prepared

        protocol = load_prepared(prepared).protocol
    if protocol is None:
        from needlepoint.design.protocol import reference_protocol

        protocol = reference_protocol()
    table = power_grid(model, study, protocol)
    a = AnalysisParameters.of(protocol)
    stop = model.stop_after
    if stop is None:
        stop = protocol["runner"]["max_consecutive_failures"]
    lines = [
        "Design sensitivity (seeded simulation of hypothetical models; not a model result)",
        *model_lines(model, stop),
        f"decision: difference >= {a.threshold:g} and {100 * a.confidence:g}% lower bound "
        f"> 0, at least {a.min_complete_cases} complete cases; exact bootstrap up to "
        f"{a.exact_bootstrap_max_cases} cases, else {a.bootstrap_resamples} resamples "
        f"(seed {a.bootstrap_seed})",
        f"{study.simulations} simulated runs per point, seed {study.seed}",
        "",
        "P(supported) ± its Monte Carlo standard error, by added middle loss (rows) and "
        "number of cases (columns):",
    ]
    wide = table.pivot(index="effect", columns="cases", values="power")
    se = table.pivot(index="effect", columns="cases", values="power_se")
    lines.append("effect  " + "  ".join(f"{n:>7} cases" for n in wide.columns))
    for effect, row in wide.iterrows():
        cells = (f"{p:6.3f} ± {e:.3f}" for p, e in zip(row, se.loc[effect], strict=True))
        lines.append(f"{effect:6.2f}  " + "  ".join(f"{c:>13}" for c in cells))
    lines.append("")
    for n, d in detectable_effect(table).items():
        if d["grid"] is None:
            lines.append(f"{n} cases: 80% power is not reached within the grid")
        else:
            lines.append(
                f"{n} cases: smallest added middle loss detected with >= 80% probability: "
                f"{d['grid']:.2f} on the grid (about {d['interpolated']:.3f} interpolated)"
            )
    if out is not None:
        from needlepoint.jsonio import write_bytes_atomic

        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(
            folder / "power.csv", table.to_csv(index=False, lineterminator="\n").encode()
        )
        power_curve(table, folder / "power_curve.png", threshold=float(a.threshold))
        lines.append(f"wrote {folder.name}/power.csv and {folder.name}/power_curve.png")
    return lines


def power_curve(
    table: Any, path: str | Path, target: float = 0.8, threshold: float | None = None
) -> Path:
    """P(decision = supported) against the added middle loss, one line per number of cases."""
    title = "Design sensitivity: probability that the decision is 'supported'"
    with stable_figure((7.0, 4.2), (0.8, 0.3, 0.5, 0.6), title, False, path) as fig:
        ax = fig.subplots()
        for n_cases, group in table.groupby("cases", sort=True):
            ax.plot(group["effect"], group["power"], marker="o", ms=3, label=f"{n_cases} cases")
        ax.axhline(target, color="grey", ls=":", lw=1, label=f"{target:.0%}")
        if threshold is not None:
            ax.axvline(threshold, color="#b2182b", ls="--", lw=1, label=f"threshold {threshold:g}")
        ax.set_xlabel("added middle loss under high similarity (true difference)")
        ax.set_ylabel("P(supported)")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=8)
    return Path(path)
