"""Peak memory of reading a run folder: a journal of long answers against one of short answers.

Two run folders of the same 32-request design are made through the real runner against a
loopback server (tests/support/loopback.py): ``short`` (the usual answers of a few bytes, the
baseline) and ``long`` (every answer padded to ``--mib`` MiB, so the journal holds each twice:
as the body and as the answer text). Each reader then runs as a fresh process, so its peak RSS
is its own: ``results``, ``audit-run``, ``analyze`` (no figures), a resume with nothing left to
send (``run``), and ``evidence-diff`` of the folder against a copy of itself. Reported: medians
over repeats of each process's peak RSS and wall time, and the ratio long / short.

Readers stream the journal one line at a time (issue 22): the peak grows with the largest
record, not with the journal. Before, a 480 MB journal cost about 1.5 GB in each reader.

    python benchmarks/bench_streaming.py [--repeats 3] [--mib 8]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"
KEY_ENV = "NEEDLEPOINT_BENCH_KEY"
SMALL = {"version": 2, "cases": 4, "lengths": [12]}  # 32 requests
READERS = ("results", "audit-run", "analyze", "run (resume)", "evidence-diff")


def make_run(prepared: Path, run_dir: Path, pad: int) -> str:
    """A complete run whose every answer is ``pad`` bytes long (0: the usual short answers)."""
    sys.path.insert(0, str(TESTS))
    from support.loopback import LoopbackServer, answers_from

    from needlepoint.design.prepared import load_prepared
    from needlepoint.run.options import RunOptions
    from needlepoint.run.runner import run_protocol

    p = load_prepared(prepared)
    right = answers_from(p.answer_key, p.bodies)
    answer = right if pad == 0 else (lambda body, payload: right(body, payload) + " " * pad)
    with LoopbackServer(answer) as server:
        options = RunOptions(
            allow=32,
            base_url=server.base_url,
            model="agnes-3.0-flash",
            api_key_env=KEY_ENV,
            min_gap_s=0,
            override_reason="benchmark against a loopback server",
            timeout_s=120,
            progress="off",
            fsync=False,
        )
        run_protocol(prepared, run_dir, options)
        return server.base_url


def argv(reader: str, prepared: Path, run_dir: Path, url: str, scratch: Path) -> list[str]:
    if reader == "analyze":
        return ["analyze", str(run_dir), "--no-figures", "--out", str(scratch / "analysis")]
    if reader == "run (resume)":
        return [
            *["run", str(prepared), "--allow", "32", "--run-dir", str(run_dir)],
            *["--base-url", url, "--model", "agnes-3.0-flash", "--api-key-env", KEY_ENV],
            *["--min-gap-s", "0", "--override-reason", "benchmark against a loopback server"],
            "--no-progress",
        ]
    if reader == "evidence-diff":
        return ["evidence-diff", str(run_dir), str(scratch / "copy")]
    return [reader, str(run_dir)]


# Each measured process reports its own high-water mark (VmHWM) as it exits: a child's
# ru_maxrss would include the memory of the benchmark process that forked it.
SHIM = (
    "import sys\n"
    "from needlepoint.cli.app import main\n"
    "code = main(sys.argv[1:])\n"
    "hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM'))\n"
    "sys.stderr.write('\\nVmHWM ' + hwm.split()[1] + '\\n')\n"
    "sys.exit(code)\n"
)


def measure(command: list[str]) -> tuple[int, float]:
    """Peak RSS (bytes) and wall seconds of one fresh process running ``command``."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", SHIM, *command], capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1) or "VmHWM" not in done.stderr:
        raise SystemExit(f"{' '.join(command[:2])} failed ({done.returncode}): {done.stderr}")
    kib = int(done.stderr.rsplit("VmHWM ", 1)[1].split()[0])
    return kib * 1024, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mib", type=int, default=8, help="length of each long answer, in MiB")
    args = parser.parse_args()
    os.environ[KEY_ENV] = "bench-key-123456"
    from needlepoint.design.prepared import prepare

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
        prepared = prepare(root / "prepared", root / "small.json")
        cases = {}
        for case, pad in (("short", 0), ("long", args.mib << 20)):
            run_dir = root / case
            url = make_run(prepared, run_dir, pad)
            assert (
                subprocess.run(
                    [sys.executable, "-m", "needlepoint", "results", str(run_dir)],
                    capture_output=True,
                    check=False,
                ).returncode
                == 0
            )
            scratch = root / f"{case}-scratch"
            scratch.mkdir()
            shutil.copytree(run_dir, scratch / "copy")
            journal = (run_dir / "journal.jsonl").stat().st_size
            with open(run_dir / "journal.jsonl", "rb") as fh:
                largest = max(len(line) for line in fh)
            runs: dict[str, list[tuple[int, float]]] = {r: [] for r in READERS}
            for _ in range(args.repeats):  # interleaved, so a busy moment hits every reader
                for reader in READERS:
                    runs[reader].append(measure(argv(reader, prepared, run_dir, url, scratch)))
            cases[case] = (journal, largest, runs)
    print(f"{args.repeats} repeats; each reader a fresh process; medians")
    for case, (journal, largest, runs) in cases.items():
        print(f"  {case}: journal {journal / 1e6:.1f} MB, largest record {largest / 1e6:.1f} MB")
        for reader in READERS:
            rss = statistics.median(r[0] for r in runs[reader])
            wall = statistics.median(r[1] for r in runs[reader])
            print(f"    {reader:<14} peak RSS {rss / 1e6:7.1f} MB  wall {wall:6.2f} s")
    short, long = cases["short"][2], cases["long"][2]
    journal, largest = cases["long"][0], cases["long"][1]
    for reader in READERS:
        base = statistics.median(r[0] for r in short[reader])
        peak = statistics.median(r[0] for r in long[reader])
        print(
            f"{reader}: peak RSS ratio {peak / base:.2f} (+{(peak - base) / 1e6:.1f} MB for a "
            f"journal {journal / 1e6:.0f} MB larger; {(peak - base) / largest:.1f} x its largest "
            "record)"
        )


if __name__ == "__main__":
    main()
