"""The whole analysis of a 128-request run, robustness panel included, against today's analyze.

"Today's analyze" is the analysis as it was before the panel (Q1, effects, robustness,
diagnostics and the position plot) existed: the package at ``--baseline-ref`` (default
``1ea3c69``, the commit the panel was built on), checked out with ``git worktree`` into a
scratch folder and timed in a child process with the same interpreter, on the same run folder,
in the same benchmark run. Both sides time ``analyze_run`` end to end (journal re-derivation,
verify of the prepared folder, every statistic, analysis.json, summary.md and every figure)
in-process after one warm-up call, so imports are excluded; the first (cold) call is reported
too. Targets: at most 2× the baseline and at most 2 s on 2 cores (medians).

    python benchmarks/bench_inference.py [--repeats 7] [--baseline-ref REF]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE_REF = "1ea3c69"

TIMER = textwrap.dedent(
    """
    import json, statistics, sys, time
    sys.path.insert(0, sys.argv[1])
    start = time.perf_counter()
    from needlepoint.analysis.document import analyze_run
    run, out, repeats = sys.argv[2], sys.argv[3], int(sys.argv[4])
    analyze_run(run, out)
    cold = time.perf_counter() - start
    times, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        analyze_run(run, out)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    print(json.dumps({"cold": cold, "median": statistics.median(times),
                      "cpu": statistics.median(cpu), "times": times}))
    """
)


def make_run(root: Path) -> Path:
    """A simulated 128-request run of the reference protocol (the pipeline's own default)."""
    from needlepoint.design.prepared import prepare
    from needlepoint.notebook.steps import run_step

    prepare(root / "prepared")
    run_step(root / "prepared", root / "run", transport="simulate", allow=128, progress="off")
    return root / "run"


def time_analysis(lib: Path, run: Path, out: Path, repeats: int) -> dict[str, float]:
    """Median warm seconds (and the cold first call) of analyze_run with ``lib`` first on the
    path, in a fresh interpreter."""
    proc = subprocess.run(
        [sys.executable, "-c", TIMER, str(lib), str(run), str(out), str(repeats)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def baseline_checkout(ref: str, scratch: Path) -> Path | None:
    """A worktree of ``ref`` under ``scratch``; None (with the reason printed) if impossible."""
    target = scratch / "baseline"
    done = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(target), ref],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        print(f"no baseline: git worktree add {ref} failed: {done.stderr.strip()}")
        return None
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--baseline-ref", default=BASELINE_REF)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        run = make_run(scratch)
        now = time_analysis(ROOT / "lib", run, scratch / "now", args.repeats)
        base_root = baseline_checkout(args.baseline_ref, scratch)
        base = None
        try:
            if base_root is not None:
                base = time_analysis(base_root / "lib", run, scratch / "base", args.repeats)
        finally:
            if base_root is not None:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_root)],
                    check=False,
                )
    print(f"analysis of a 128-request simulated run, medians of {args.repeats} warm calls")
    print(f"  with the panel:  {now['median']:.3f} s wall, {now['cpu']:.3f} s CPU (first call, "
          f"imports included: {now['cold']:.2f} s)")  # fmt: skip
    if base is not None:
        ratio = now["median"] / base["median"]
        print(f"  today's analyze ({args.baseline_ref}): {base['median']:.3f} s wall, "
              f"{base['cpu']:.3f} s CPU (first call {base['cold']:.2f} s)")  # fmt: skip
        verdict = "meets" if ratio <= 2 and now["median"] <= 2 else "MISSES"
        print(
            f"  ratio {ratio:.2f}x wall, {now['cpu'] / base['cpu']:.2f}x CPU; {verdict} the "
            "target (<= 2x and <= 2 s wall; on a busy machine read the CPU seconds)"
        )


if __name__ == "__main__":
    main()
