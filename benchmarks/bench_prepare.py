"""Wall time of prepare + verify + audit for the reference set, and throughput when scaled.

The baseline, measured in the same run on the same bytes, is reading and SHA-256 hashing the
prepared files: the least any byte-for-byte check must do. Ratios against it are what to compare
across machines; absolute seconds depend on how busy the machine is.

    python benchmarks/bench_prepare.py [--repeats 5] [--no-scaled]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from needlepoint.design.audit import audit_prepared
from needlepoint.design.prepared import prepare
from needlepoint.design.verify import verify_prepared
from needlepoint.jsonio import file_sha256

SCALED = {"version": 99, "cases": 64, "lengths": [60, 240, 960, 2400]}


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _cycle(root: Path, protocol: Path | None) -> dict[str, float]:
    folder = root / "prepared"
    shutil.rmtree(folder, ignore_errors=True)
    t = {"prepare": _timed(lambda: prepare(folder, protocol))}
    t["verify"] = _timed(lambda: verify_prepared(folder))
    t["audit"] = _timed(lambda: audit_prepared(folder))
    t["baseline"] = _timed(lambda: [file_sha256(p) for p in sorted(folder.iterdir())])
    t["cycle"] = t["prepare"] + t["verify"] + t["audit"]
    t["mb"] = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
    t["requests"] = sum(1 for _ in (folder / "requests.jsonl").open("rb"))
    return t


def _report(label: str, runs: list[dict[str, float]]) -> None:
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"\n{label}: {int(med['requests'])} requests, {med['mb']:.1f} MB, {len(runs)} runs")
    for step in ("prepare", "verify", "audit", "cycle"):
        ratio = med[step] / med["baseline"]
        print(
            f"  {step:<8} median {med[step]:8.3f} s  {med['requests'] / med[step]:9.0f} req/s  "
            f"{med['mb'] / med[step]:7.1f} MB/s  ratio vs hash baseline {ratio:6.1f}"
        )
    print(f"  baseline median {med['baseline']:.3f} s (read + SHA-256 of every file)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-scaled", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _report(
            "reference (8 cases × {60, 240})", [_cycle(root, None) for _ in range(args.repeats)]
        )
        if not args.no_scaled:
            override = root / "scaled.json"
            override.write_text(json.dumps(SCALED))
            runs = [_cycle(root, override) for _ in range(max(1, args.repeats // 2))]
            _report("scaled (64 cases × {60, 240, 960, 2400})", runs)


if __name__ == "__main__":
    main()
