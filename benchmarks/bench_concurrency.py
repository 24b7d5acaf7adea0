"""Wall time of `run --concurrency 8` against `--concurrency 1`, for the same 128 requests.

The server is a loopback server in its own process that takes a fixed ``--delay`` seconds to
answer every request (a GPU server's latency), and answers each correctly. Both runs go through
the real runner (``run_protocol``: journal fsynced, gap 0 under a recorded override), one after
the other, ``--repeats`` times, in the same invocation; the baseline is concurrency 1. Reported:
the median wall time of each, their ratio (the aim: at least 6), and whether the results are
the same: results.csv byte for byte with the two run-specific cells emptied
(``RUN_SPECIFIC_COLUMNS``: the measured latency and the journal's hash, which differ between any
two live runs, sequential ones too), and the outcome counts.

    python benchmarks/bench_concurrency.py [--concurrency 8] [--delay 0.5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from needlepoint.design.prepared import load_prepared, prepare
from needlepoint.run.options import RunOptions
from needlepoint.run.results import RUN_SPECIFIC_COLUMNS, answer_bytes
from needlepoint.run.runner import run_protocol

LOOPBACK = Path(__file__).resolve().parent.parent / "tests" / "support" / "loopback.py"
KEY_ENV = "NEEDLEPOINT_BENCH_KEY"
AIM = 6.0


def run_once(prepared: Path, run_dir: Path, url: str, concurrency: int) -> tuple[float, bytes]:
    """Seconds for one whole run, and its results.csv less the run-specific cells."""
    options = RunOptions(
        allow=len(load_prepared(prepared).plan),
        base_url=url,
        model="agnes-3.0-flash",
        api_key_env=KEY_ENV,
        min_gap_s=0,
        override_reason="benchmark against a loopback server",
        timeout_s=60,
        progress="off",
        concurrency=concurrency,
    )
    start = time.perf_counter()
    summary = run_protocol(prepared, run_dir, options)
    seconds = time.perf_counter() - start
    assert summary.stop_reason == "complete", summary.lines()
    assert summary.counts == {"correct": summary.attempts_total}, summary.counts
    return seconds, answer_bytes(run_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--delay", type=float, default=0.5, help="server seconds per answer")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ[KEY_ENV] = "bench-key-123456"
    n = args.concurrency
    times: dict[int, list[float]] = {1: [], n: []}
    results: dict[int, set[bytes]] = {1: set(), n: set()}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        prepared = prepare(root / "prepared")
        requests = len(load_prepared(prepared).plan)
        server = subprocess.Popen(
            [sys.executable, str(LOOPBACK), str(prepared), "--delay", str(args.delay)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            for i in range(args.repeats):
                for level in (1, n):
                    seconds, answers = run_once(prepared, root / f"run-{level}-{i}", url, level)
                    times[level].append(seconds)
                    results[level].add(answers)
        finally:
            if server.stdin is not None:
                server.stdin.close()
            server.wait(timeout=30)
    med = {level: statistics.median(v) for level, v in times.items()}
    floor = requests * args.delay
    print(
        f"{requests} requests, server delay {args.delay:g} s (at least {floor:.1f} s one at a "
        f"time), gap 0, journal fsynced, {args.repeats} repeats"
    )
    for level, value in med.items():
        each = ", ".join(f"{t:.2f}" for t in times[level])
        print(f"  concurrency {level:<2} {value:7.2f} s wall (median; runs: {each})")
    ratio = med[1] / med[n]
    print(f"ratio concurrency 1 / concurrency {n}: {ratio:.2f}")
    print(f"aim: at least {AIM:g}x faster: {'met' if ratio >= AIM else 'NOT met'}")
    same = len(results[1] | results[n]) == 1
    print(
        f"results.csv equal byte for byte across every run (cells of "
        f"{', '.join(RUN_SPECIFIC_COLUMNS)} emptied): {'yes' if same else 'NO'}"
    )


if __name__ == "__main__":
    main()
