"""Peak memory and time of the real runner receiving a 1 GiB decompression bomb.

A loopback server (tests/support/loopback.py, in its own process) answers every request with
one body; the runner (``run_protocol``, one request, a fresh process per measurement so its
peak RSS is its own) receives it. Cases, each against a baseline measured in the same run:

- ``normal``: the baseline, a correct answer of a few hundred bytes;
- ``gzip``: ``Content-Encoding: gzip``, about 1 MiB on the wire, 1 GiB decoded;
- ``gzip, gzip``: the same bomb gzipped again (a few KiB on the wire), stacked codings.

The runner stops decoding at its 16 MiB body limit and records ``body_too_large``. Reported:
medians over repeats of the runner process's peak RSS and of the request's wall time (the
loop's, and the whole process's, imports and the prepared folder's verify and audit included),
and of the run's CPU time, which a machine busy with other work inflates less than wall time.
Target (issue 11): under 300 MB peak and under 10 s.

    python benchmarks/bench_bombs.py [--repeats 3] [--gib 1]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"
KEY_ENV = "NEEDLEPOINT_BENCH_KEY"
SMALL = {"version": 2, "cases": 4, "lengths": [12]}  # 32 requests: a quick verify and audit
CASES = ("normal", "gzip", "gzip, gzip")


def serve(prepared: str, case: str, gib: int) -> None:
    """Child: serve ``case`` to every request until stdin closes; print the base URL first."""
    sys.path.insert(0, str(TESTS))
    from support.bombs import gzip_bomb
    from support.loopback import LoopbackServer, answers_from

    from needlepoint.design.prepared import load_prepared

    p = load_prepared(prepared)
    with LoopbackServer(answers_from(p.answer_key, p.bodies)) as server:
        if case != "normal":
            bomb = gzip_bomb(gib << 30)
            body = bomb if case == "gzip" else gzip.compress(bomb, 9, mtime=0)
            mode = server.serve("bomb", body, {"Content-Encoding": case})
            server.script([mode] * 1000)
            print(f"{len(body)} bytes on the wire", file=sys.stderr, flush=True)
        print(server.base_url, flush=True)
        sys.stdin.read()


def measure(prepared: str, run_dir: str, url: str) -> None:
    """Child: one request through the runner; print its outcome, times and peak RSS as JSON."""
    start = time.perf_counter()
    from needlepoint.run.journal import read_chain
    from needlepoint.run.options import RunOptions
    from needlepoint.run.runner import run_protocol

    options = RunOptions(
        allow=1,
        base_url=url,
        model="agnes-3.0-flash",
        api_key_env=KEY_ENV,
        min_gap_s=0,
        override_reason="benchmark against a loopback server",
        timeout_s=60,
        progress="off",
    )
    cpu = time.process_time()
    summary = run_protocol(prepared, run_dir, options)
    total = time.perf_counter() - start
    cpu = time.process_time() - cpu
    outcome = next(r for r in read_chain(run_dir).records if r["type"] == "outcome")
    result = {
        "kind": outcome["classification"]["kind"] or outcome["classification"]["status"],
        "loop_s": summary.loop_wall_s,
        "total_s": total,
        "cpu_s": cpu,  # the run's CPU time: what a busy machine cannot inflate
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,  # KiB on Linux
        "journal_bytes": Path(run_dir, "journal.jsonl").stat().st_size,
    }
    print(json.dumps(result))


def one_case(root: Path, prepared: Path, case: str, repeats: int, gib: int) -> list[dict]:
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(prepared), case, "--gib", str(gib)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = server.stdout.readline().strip()
        runs = []
        for i in range(repeats):
            run_dir = root / f"{case.replace(', ', '-')}-{i}"
            out = subprocess.run(
                [sys.executable, __file__, "--measure", str(prepared), str(run_dir), url],
                capture_output=True,
                text=True,
                check=True,
            )
            runs.append(json.loads(out.stdout.splitlines()[-1]))
        return runs
    finally:
        server.stdin.close()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--gib", type=int, default=1, help="decoded size of each bomb, in GiB")
    parser.add_argument("--serve", nargs=2, metavar=("PREPARED", "CASE"), help=argparse.SUPPRESS)
    parser.add_argument("--measure", nargs=3, metavar=("P", "RUN", "URL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(*args.serve, args.gib)
        return
    os.environ[KEY_ENV] = "bench-key-123456"
    if args.measure:
        measure(*args.measure)
        return
    from needlepoint.design.prepared import prepare

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
        prepared = prepare(root / "prepared", root / "small.json")
        # Interleaved repeats would share one server per case anyway; each measurement is its
        # own process, so the order of cases does not leak memory from one into the next.
        results = {case: one_case(root, prepared, case, args.repeats, args.gib) for case in CASES}
    med = {
        case: {k: statistics.median(r[k]) for k in ("loop_s", "total_s", "cpu_s", "peak_rss")}
        for case, runs in results.items()
        for r in [{k: [run[k] for run in runs] for k in runs[0]}]
    }
    print(f"{args.repeats} repeats per case, one request each, {args.gib} GiB decoded per bomb")
    for case, runs in results.items():
        m = med[case]
        kinds = sorted({r["kind"] for r in runs})
        journal = max(r["journal_bytes"] for r in runs)
        print(
            f"  {case:<11} peak RSS {m['peak_rss'] / 1e6:7.1f} MB  request {m['loop_s']:6.3f} s  "
            f"process {m['total_s']:6.2f} s  run CPU {m['cpu_s']:5.2f} s  kind {','.join(kinds)}  "
            f"journal {journal / 1e6:.1f} MB"
        )
    base = med["normal"]
    ok = True
    for case in CASES[1:]:
        m = med[case]
        print(
            f"{case}: peak RSS ratio {m['peak_rss'] / base['peak_rss']:.2f} "
            f"(+{(m['peak_rss'] - base['peak_rss']) / 1e6:.1f} MB), request time ratio "
            f"{m['loop_s'] / base['loop_s']:.1f}, process time ratio "
            f"{m['total_s'] / base['total_s']:.2f}, run CPU ratio {m['cpu_s'] / base['cpu_s']:.2f}"
        )
        ok &= m["peak_rss"] < 300e6 and m["total_s"] < 10
        ok &= {r["kind"] for r in results[case]} == {"body_too_large"}
    print(f"target: under 300 MB peak and under 10 s, body_too_large: {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
