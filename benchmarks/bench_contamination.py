"""Throughput of `contamination overlap`: 10,000 context files against 1,000 reference answers.

The baseline, measured in the same run over the same files, is a plain
``grep -F -w -n -r -f answers.txt`` (LC_ALL=C, its fastest setting): fixed strings, word
boundaries, line numbers. The script also checks that both find the same file:line set, since a
faster tool that finds something else would prove nothing. Synthetic text comes from
``numpy.random.default_rng(seed)``; the seed is printed.

    python benchmarks/bench_contamination.py [--files 10000] [--answers 1000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from needlepoint.contamination.context import load_context
from needlepoint.contamination.inputs import ReferencePair
from needlepoint.contamination.overlap import check_overlap

WORDS = (
    "the run memory note session answer handover code site yard depot relay cabinet ticket "
    "batch distance pages build runner cluster signal upgrade closed open result exact score"
).split()
LETTERS = np.array(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))


def _codes(rng: np.random.Generator, n: int) -> list[str]:
    """n distinct codes of the form [A-Z]{2}-[0-9]{4}."""
    seen: dict[str, None] = {}
    while len(seen) < n:
        a, b = rng.choice(LETTERS, 2)
        seen[f"{a}{b}-{int(rng.integers(0, 10000)):04d}"] = None
    return list(seen)


def build_corpus(root: Path, files: int, answers: int, seed: int) -> list[ReferencePair]:
    """Write ``files`` memory files of ~20 lines, some holding answers or near misses."""
    rng = np.random.default_rng(seed)
    codes = _codes(rng, answers * 3)
    reference = [
        ReferencePair(f"R{i:04d}", f"q{i}?", c, i + 2) for i, c in enumerate(codes[:answers])
    ]
    others = codes[answers:]
    for f in range(files):
        lines = []
        for _ in range(20):
            words = list(rng.choice(WORDS, int(rng.integers(6, 12))))
            roll = rng.random()
            if roll < 0.004:  # a planted answer: about 800 lines in 10,000 files
                words.insert(int(rng.integers(0, len(words))), codes[int(rng.integers(0, answers))])
            elif roll < 0.02:  # near misses that must not match: glued digit or letter
                code = codes[int(rng.integers(0, answers))]
                words.append(code + str(int(rng.integers(0, 10))) if roll < 0.012 else "X" + code)
            elif roll < 0.2:
                words.append(others[int(rng.integers(0, len(others)))])
            lines.append(" ".join(words))
        path = root / "memory" / f"d{f % 100:02d}" / f"f{f:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return reference


def run_ours(root: Path, reference: list[ReferencePair]) -> tuple[float, set[tuple[str, int]]]:
    start = time.perf_counter()
    result = check_overlap(reference, load_context(root, ["**"]))
    elapsed = time.perf_counter() - start
    return elapsed, {(m.file, m.line) for m in result.matches}


def run_grep(root: Path, answers: Path) -> tuple[float, set[tuple[str, int]]]:
    start = time.perf_counter()
    out = subprocess.run(
        ["grep", "-F", "-w", "-n", "-r", "-f", str(answers), "."],
        cwd=root,
        capture_output=True,
        text=True,
        env={"LC_ALL": "C"},
        check=False,
    )
    elapsed = time.perf_counter() - start
    if out.returncode not in (0, 1):
        raise SystemExit(f"grep failed: {out.stderr.strip()}")
    found = set()
    for line in out.stdout.splitlines():
        path, number, _ = line.split(":", 2)
        found.add((path.removeprefix("./"), int(number)))
    return elapsed, found


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--answers", type=int, default=1_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=20250314)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-contamination-") as tmp:
        root = Path(tmp) / "ws"
        reference = build_corpus(root, args.files, args.answers, args.seed)
        answers = Path(tmp) / "answers.txt"
        answers.write_text("".join(r.answer + "\n" for r in reference), encoding="utf-8")
        mb = sum(p.stat().st_size for p in root.rglob("*.md")) / 1e6
        _, ours_found = run_ours(root, reference)  # warms the page cache for both tools
        _, grep_found = run_grep(root, answers)
        ours = [run_ours(root, reference)[0] for _ in range(args.repeats)]
        grep = [run_grep(root, answers)[0] for _ in range(args.repeats)]
    ours_med, grep_med = statistics.median(ours), statistics.median(grep)
    print(
        f"overlap: {args.files} files ({mb:.1f} MB) x {args.answers} answers, "
        f"seed {args.seed}, medians of {args.repeats} runs"
    )
    print(f"  needlepoint overlap  {ours_med:7.3f} s  {args.files / ours_med:9.0f} files/s")
    print(f"  grep -F -w (LC_ALL=C){grep_med:7.3f} s  {args.files / grep_med:9.0f} files/s")
    print(f"  ratio (overlap time / grep time): {ours_med / grep_med:.1f}")
    agree = "same" if ours_found == grep_found else "DIFFERENT"
    print(f"  file:line hits: overlap {len(ours_found)}, grep {len(grep_found)} ({agree})")
    if ours_found != grep_found:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
