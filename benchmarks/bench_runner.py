"""Per-request overhead of the runner against a bare httpx loop, same loopback server, gap 0.

Baselines, measured in the same run against the same server and the same 128 frozen bodies:
- ``bare keep-alive``: a default ``httpx.Client`` posting the bodies in a loop;
- ``bare fresh conn``: the same with keep-alive off, the runner's connection policy, so the
  difference to the runner is the runner's own work (journal, classification, records).
The runner is measured with fsync off (its bookkeeping alone) and on (what a real run pays).
Reported numbers are medians over repeats of the mean time per request.

    python benchmarks/bench_runner.py [--repeats 5]
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

import httpx

from needlepoint.design.prepared import load_prepared, prepare
from needlepoint.run.options import RunOptions
from needlepoint.run.runner import run_protocol

# The loopback test server lives with the tests; it runs as a script in its own process.
LOOPBACK = Path(__file__).resolve().parent.parent / "tests" / "support" / "loopback.py"

KEY_ENV = "NEEDLEPOINT_BENCH_KEY"


def bare(url: str, bodies: list[bytes], keepalive: bool) -> float:
    """Seconds per request for a plain httpx loop."""
    limits = httpx.Limits(max_keepalive_connections=None if keepalive else 0)
    headers = {"Authorization": "Bearer bench-key-123456", "Content-Type": "application/json"}
    with httpx.Client(limits=limits, headers=headers, timeout=30) as client:
        start = time.perf_counter()
        for body in bodies:
            response = client.post(url + "/chat/completions", content=body)
            response.read()
        return (time.perf_counter() - start) / len(bodies)


def runner(prepared: Path, run_dir: Path, url: str, n: int, fsync: bool) -> float:
    """Seconds per request inside the runner's loop (preflight excluded)."""
    options = RunOptions(
        allow=n,
        base_url=url,
        model="agnes-3.0-flash",
        api_key_env=KEY_ENV,
        min_gap_s=0,
        override_reason="benchmark against a loopback server",
        timeout_s=30,
        progress="off",
        fsync=fsync,
    )
    summary = run_protocol(prepared, run_dir, options)
    assert summary.attempts_this_session == n and summary.counts == {"correct": n}
    return summary.loop_wall_s / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    os.environ[KEY_ENV] = "bench-key-123456"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = prepare(root / "prepared")
        p = load_prepared(folder)
        bodies = [p.bodies[row.seq] for row in p.plan]
        n = len(bodies)
        times: dict[str, list[float]] = {
            "bare keep-alive": [],
            "bare fresh conn": [],
            "runner fsync off": [],
            "runner fsync on": [],
        }
        # The server runs in its own process, so it does not compete with the client for the GIL.
        server = subprocess.Popen(
            [sys.executable, str(LOOPBACK), str(folder)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            url = server.stdout.readline().strip()
            bare(url, bodies[:8], True)  # warm-up: imports, first connections
            for i in range(args.repeats):
                times["bare keep-alive"].append(bare(url, bodies, True))
                times["bare fresh conn"].append(bare(url, bodies, False))
                times["runner fsync off"].append(runner(folder, root / f"a{i}", url, n, False))
                times["runner fsync on"].append(runner(folder, root / f"b{i}", url, n, True))
        finally:
            server.stdin.close()
            server.wait(timeout=10)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{n} requests per repeat, {args.repeats} repeats, loopback server, gap 0")
    for name, value in med.items():
        print(f"  {name:<17} {value * 1000:8.3f} ms/request (median)")
    base = med["bare fresh conn"]
    for name in ("runner fsync off", "runner fsync on"):
        over = (med[name] - base) * 1000
        print(
            f"{name}: overhead {over:.3f} ms/request over bare fresh conn, "
            f"ratio {med[name] / base:.2f}; vs keep-alive ratio "
            f"{med[name] / med['bare keep-alive']:.2f}"
        )
    met = med["runner fsync off"] - base < 0.002
    print(f"aim: under 2 ms/request overhead with fsync off: {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
