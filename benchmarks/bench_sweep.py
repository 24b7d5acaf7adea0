"""Wall time of a sweep of N runs against N endpoints, against a sweep of one run.

A simulated run never sleeps (its clock is simulated), so it cannot show concurrency. Here each
endpoint is a loopback server in its own process that takes ``--delay`` seconds to answer, and
each run keeps a real ``--gap`` between requests, as a run against a provider would. Baseline,
measured in the same invocation: the same sweep with one run. Both include starting the worker
processes and their checks. Reported: the median wall time over repeats, and the ratio.

    python benchmarks/bench_sweep.py [--runs 4] [--requests 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from needlepoint.design.prepared import prepare
from needlepoint.run.sweep import read_sweep, run_sweep

LOOPBACK = Path(__file__).resolve().parent.parent / "tests" / "support" / "loopback.py"
KEY_ENV = "NEEDLEPOINT_BENCH_KEY"


def sweep_once(root: Path, urls: list[str], args: argparse.Namespace, tag: str) -> float:
    """Seconds for one sweep of ``len(urls)`` runs, each of ``args.requests`` requests."""
    runs = [
        {
            "name": f"r{i}",
            "prepared": "prepared",
            "run_dir": f"runs-{tag}/r{i}",
            "allow": args.requests,
            "base_url": url,
            "model": "agnes-3.0-flash",
            "api_key_env": KEY_ENV,
            "min_gap_s": args.gap,
            "override_reason": "benchmark against loopback servers",
            "timeout_s": 30,
        }
        for i, url in enumerate(urls)
    ]
    path = root / f"sweep-{tag}.json"
    doc = {"format": "needlepoint-sweep", "version": 1, "runs": runs}
    path.write_text(json.dumps(doc), encoding="utf-8")
    start = time.perf_counter()
    summary = run_sweep(read_sweep(path), progress="off")
    seconds = time.perf_counter() - start
    assert summary.exit_status == 0, summary.lines()
    assert all(r.stop_reason == "allowance_spent" for r in summary.runs), summary.lines()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--requests", type=int, default=32, help="requests per run")
    parser.add_argument("--delay", type=float, default=0.05, help="server seconds per answer")
    parser.add_argument("--gap", type=float, default=0.05, help="each run's --min-gap-s")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ[KEY_ENV] = "bench-key-123456"
    servers: list[subprocess.Popen[str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = prepare(root / "prepared")
        try:
            for _ in range(args.runs):
                servers.append(
                    subprocess.Popen(
                        [sys.executable, str(LOOPBACK), str(folder), "--delay", str(args.delay)],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                )
            urls = [s.stdout.readline().strip() for s in servers if s.stdout is not None]
            times: dict[str, list[float]] = {"1 run": [], f"{args.runs} runs": []}
            for i in range(args.repeats):
                times["1 run"].append(sweep_once(root, urls[:1], args, f"one{i}"))
                times[f"{args.runs} runs"].append(sweep_once(root, urls, args, f"all{i}"))
        finally:
            for s in servers:
                if s.stdin is not None:
                    s.stdin.close()
                s.wait(timeout=10)
    med = {k: statistics.median(v) for k, v in times.items()}
    floor = args.requests * (args.delay + args.gap)
    print(
        f"{args.requests} requests per run, server delay {args.delay:g} s, gap {args.gap:g} s "
        f"(at least {floor:.1f} s of waiting per run), {args.repeats} repeats"
    )
    for name, value in med.items():
        print(f"  sweep of {name:<8} {value:6.2f} s wall (median)")
    ratio = med[f"{args.runs} runs"] / med["1 run"]
    print(f"ratio {args.runs} runs / 1 run: {ratio:.2f} (sequential runs would be {args.runs:.0f})")
    met = "met" if ratio <= 1.5 else "NOT met"
    print(f"aim: {args.runs} runs within 1.5x the wall time of one: {met}")


if __name__ == "__main__":
    main()
