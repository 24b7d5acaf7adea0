"""Speed of the analysis, the bootstrap and the power grid, each against a baseline run here.

1. ``analyze_results`` on a 128-row results table, end to end (validation, verify of the
   prepared folder, bootstrap, analysis.json, summary.md, four PNGs), in-process after one
   warm-up call; baseline: pandas reading the same CSV and taking plain cell means.
2. The exact bootstrap for 8 and 12 cases; baseline: ``scipy.stats.bootstrap`` (percentile,
   10,000 resamples) on the same values.
3. Monte Carlo, 10,000 resamples over 1,000 cases, against ``scipy.stats.bootstrap`` with the
   same generator seed; the two bootstrap distributions are checked to be identical.
4. The default power grid (8, 16, 32 cases × 13 effects × 1,000 runs); baseline: the same
   decisions made one run at a time by ``needlepoint.analysis.primary.decide``, timed on a sample
   and scaled to the grid.

Medians over ``--repeats``; absolute seconds depend on how busy the machine is, ratios less so.

    python benchmarks/bench_analysis.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from scipy import stats
from support.results import make_rows, middle_loss, write_csv

from needlepoint.analysis.bootstrap import percentile_interval
from needlepoint.analysis.document import analyze_results
from needlepoint.analysis.power import design_index, power_grid, run_numerators, simulate_answers
from needlepoint.analysis.primary import decide
from needlepoint.analysis.record import AnalysisParameters
from needlepoint.design.prepared import load_prepared, prepare
from needlepoint.design.protocol import reference_protocol

SEED = 20260930


def median_time(fn: Callable[[], object], repeats: int) -> float:
    """Median wall seconds of ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def median_cpu(fn: Callable[[], object], repeats: int) -> float:
    """Median CPU seconds of this process over ``repeats`` calls: less sensitive to other load."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def bench_analysis(tmp: Path, repeats: int) -> None:
    import pandas as pd

    prepared_dir = tmp / "prepared"
    prepare(prepared_dir)
    prepared = load_prepared(prepared_dir)
    spec = middle_loss({"S1": ("high",), "S2": ("high",), "S3/60": ("high",)})
    rows = make_rows(prepared, lambda p: "failure:http_status" if p.seq == 50 else spec(p))
    csv_path = write_csv(tmp / "results.csv", rows)
    start = time.perf_counter()
    analyze_results(csv_path, prepared_dir, tmp / "cold")
    cold = time.perf_counter() - start
    full = median_time(lambda: analyze_results(csv_path, prepared_dir, tmp / "out"), repeats)
    cpu = median_cpu(lambda: analyze_results(csv_path, prepared_dir, tmp / "out"), repeats)

    from needlepoint.analysis.document import analyze
    from needlepoint.analysis.inputs import from_results_csv

    bare = median_time(
        lambda: analyze(from_results_csv(csv_path, prepared_dir), tmp / "bare", figures=False),
        repeats,
    )

    def baseline() -> None:
        table = pd.read_csv(csv_path)
        table.assign(ok=table["status"].eq("correct")).groupby(
            ["similarity", "length", "condition"]
        )["ok"].mean()

    base = median_time(baseline, repeats)
    print("1. analysis of a 128-row results table, end to end")
    print(
        f"   with figures: median {full:.3f} s wall, {cpu:.3f} s CPU "
        f"(first call, imports included: {cold:.3f} s)"
    )
    print(f"   without figures: median {bare:.3f} s")
    print(f"   baseline pandas read + cell means: median {base:.4f} s; ratio {full / base:.0f}x")


def bench_exact(repeats: int) -> None:
    print("2. exact bootstrap (every resample counted) vs scipy.stats.bootstrap, 10,000 resamples")
    rng = np.random.default_rng(SEED)
    for n in (8, 12):
        values = rng.integers(-4, 5, n).astype(float)
        ours = median_time(lambda v=values: percentile_interval(v, 0.95), repeats)
        scipy_t = median_time(
            lambda v=values: stats.bootstrap(
                (v,), np.mean, method="percentile", n_resamples=10_000, rng=SEED
            ),
            repeats,
        )
        res = percentile_interval(values, 0.95)
        print(
            f"   {n:>2} cases: exact {ours:.4f} s over {res.resamples:,} multisets; scipy "
            f"{scipy_t:.4f} s; ratio {ours / scipy_t:.2f}"
        )


def bench_monte_carlo(repeats: int) -> None:
    values = np.random.default_rng(SEED).integers(-4, 5, 1000)  # integer numerators, as decided
    ours = median_time(
        lambda: percentile_interval(values, 0.95, resamples=10_000, seed=SEED), repeats
    )

    def run_scipy():
        return stats.bootstrap(
            (values,), np.mean, method="percentile", n_resamples=10_000, rng=SEED
        )

    scipy_t = median_time(run_scipy, repeats)
    res = percentile_interval(values, 0.95, resamples=10_000, seed=SEED)
    same = np.array_equal(
        np.repeat(res.values, res.weights), np.sort(run_scipy().bootstrap_distribution)
    )
    print("3. Monte Carlo bootstrap, 10,000 resamples over 1,000 cases")
    print(
        f"   ours {ours:.3f} s, scipy.stats.bootstrap {scipy_t:.3f} s; ratio {ours / scipy_t:.2f}"
        f"; identical bootstrap distribution: {same}"
    )


def bench_power(repeats: int) -> None:
    grid = median_time(power_grid, max(1, repeats // 2))
    protocol = reference_protocol()
    params = AnalysisParameters.of(protocol)
    # Baseline: the same decisions one run at a time with the analysis's own decide().
    sample = {8: 200, 16: 20, 32: 10}
    per_run = {}
    for n, runs in sample.items():
        _, slots = design_index(protocol, n)
        rng = np.random.default_rng([SEED, n])
        u = (rng.random((runs, len(slots))), rng.random((runs, len(slots))))
        acc = {(s, c): 0.9 for s in ("low", "high") for c in "BMEA"}
        acc[("high", "M")] = 0.6
        nums, complete = run_numerators(simulate_answers(protocol, n, acc, 0.0, u, 2))
        start = time.perf_counter()
        for r in range(runs):
            decide(list(nums[r][complete[r]]), 4, params)
        per_run[n] = (time.perf_counter() - start) / runs
    loop = sum(per_run[n] * 13 * 1000 for n in sample)
    print("4. power grid: 8, 16, 32 cases × 13 effects × 1,000 simulated runs")
    print(
        f"   vectorised: median {grid:.2f} s; one decide() per run would take about "
        f"{loop:.0f} s (timed on a sample); ratio {grid / loop:.4f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"medians of {args.repeats} runs; seed {SEED}")
    with tempfile.TemporaryDirectory() as tmp:
        bench_analysis(Path(tmp), args.repeats)
    bench_exact(args.repeats)
    bench_monte_carlo(args.repeats)
    bench_power(args.repeats)


if __name__ == "__main__":
    main()
