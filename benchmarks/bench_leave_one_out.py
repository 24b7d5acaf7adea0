"""Time of the robustness panel's leave-one-out as the cases grow, against the old way.

The old way decided afresh without each case (``primary.decide``: a Monte Carlo bootstrap of
the n - 1 remaining cases each time, O(n^2 * R)); the panel now walks one shared draw
(``analysis.leave_one_out``, O(n * R)) and gives the same scenarios, which this benchmark
checks wherever it times the old way. CPU seconds (process time), medians over ``--repeats``,
for 200, 500, 1,000 and 2,000 cases with the reference protocol's 10,000 resamples; the old
way is timed up to ``--old-max`` cases (it took 226 s at 2,000 before issue 39). The growth is
the time at 2,000 cases over the time at 200: 10 for a linear cost, 100 for a quadratic one.

Memory: the peak bytes numpy and Python allocate (``tracemalloc``) during one panel, against
one fresh decision of the n - 1 remaining cases (the old way's peak, which it reached n times):
the shared walk keeps a count per case and resample (uint16), so it may cost more than one
decision, and this shows by how much.

    python benchmarks/bench_leave_one_out.py [--repeats 3] [--old-max 500]
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

import numpy as np

from needlepoint.analysis.record import AnalysisParameters
from needlepoint.analysis.robustness import _from_decision, leave_one_out
from needlepoint.design.protocol import reference_protocol

SIZES = (200, 500, 1000, 2000)


def old_way(cases, nums, den, params, observed):
    return tuple(
        _from_decision(
            "leave one out", f"without {c}", (), [*nums[:i], *nums[i + 1 :]], den, params, observed
        )
        for i, c in enumerate(cases)
    )


def cpu(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.process_time()
        out = fn()
        times.append(time.process_time() - start)
    return statistics.median(times), out


def peak_mib(fn) -> float:
    """Peak traced allocation of one call, in MiB."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--old-max", type=int, default=500)
    args = parser.parse_args()
    params = AnalysisParameters.of(reference_protocol())
    rng = np.random.default_rng(20261205)
    print(
        f"{'cases':>6} {'panel s':>9} {'old s':>9} {'old/panel':>9} {'panel MiB':>10} "
        f"{'one old MiB':>12} {'panel/old':>9}"
    )
    panel: dict[int, float] = {}
    for n in SIZES:
        nums = [int(x) for x in rng.integers(-2, 5, n)]
        cases = [f"c{i}" for i in range(n)]
        new_s, new = cpu(
            lambda c=cases, v=nums: leave_one_out(c, v, 4, params, "supported"), args.repeats
        )
        panel[n] = new_s
        old = "-"
        ratio = "-"
        if n <= args.old_max:
            old_s, before = cpu(lambda c=cases, v=nums: old_way(c, v, 4, params, "supported"), 1)
            assert before == new, f"the scenarios differ at {n} cases"
            old, ratio = f"{old_s:.2f}", f"{old_s / new_s:.0f}"
        mem = peak_mib(lambda c=cases, v=nums: leave_one_out(c, v, 4, params, "supported"))
        one = peak_mib(
            lambda c=cases, v=nums: _from_decision(
                "leave one out", f"without {c[0]}", (), v[1:], 4, params, "supported"
            )
        )
        print(
            f"{n:>6} {new_s:>9.3f} {old:>9} {ratio:>9} {mem:>10.1f} {one:>12.1f} {mem / one:>9.2f}"
        )
    print(
        f"growth 200 -> 2,000 cases: {panel[2000] / panel[200]:.1f}x (linear: 10x, quadratic: 100x)"
    )


if __name__ == "__main__":
    main()
