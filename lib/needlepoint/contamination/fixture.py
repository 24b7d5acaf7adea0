"""A synthetic agent workspace that reproduces the shape of seed 004's findings.

It holds an instructions file, memory and notes with fixed modification times, a results file
with tool-call counts, a 20-pair reference with planted overlaps, one chance match and its
discard, and a runs file. The four checks then find: 0 of 4 from the clean room; 2 of 2 inside
with zero tool calls; 7 of 20 reference answers present after one discard; one memory file
written 53 minutes after the run it records, poisoning the later rerun.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from needlepoint.contamination.inputs import (
    DISCARDS_FORMAT,
    REFERENCE_FORMAT,
    RESULTS_FORMAT,
    RUNS_FORMAT,
    parse_instant,
)
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import jsonl_bytes
from needlepoint.safeio import write_bytes_atomic

FIXTURE_FORMAT = "contamination-fixture/1"
_MARKER = ".needlepoint-fixture"

# Workspace files: relative path -> (modification time, content). Comments in brackets say
# which planted fact each line carries; the checks never read them as such.
_FILES: dict[str, tuple[str, str]] = {
    "CLAUDE.md": (
        "2025-03-03T09:00:00Z",
        "# Project instructions\n\n"
        "Answer with the handover code only, or UNKNOWN.\n"
        "The pilot site Pine Cone North hands over under OM-3642.\n"
        "Keep notes in notes/ and memory in memory/.\n",
    ),
    "memory/project-facts.md": (
        "2025-03-12T16:30:00Z",
        "# Facts gathered in earlier sessions\n\n"
        "- Ridge East handover: KT-4471\n"
        "- The spare parts go to Lower Vetluga yard.\n"
        "- Signal upgrade ticket VD-0815 is closed.\n"
        "- Calibration batch size: 2318 samples.\n"
        "- Ostrovets to Belozersk by rail: 975 km.\n"
        "- The methods binder has 412 pages.\n",
    ),
    "memory/session-2025-03-14.md": (
        "2025-03-14T12:08:00Z",
        "# Session 2025-03-14\n\n"
        "Run r1 of battery ref-20 (11:15): 13/20 exact.\n"
        "It answered SR-7720 for the relay cabinet.\n"
        "The depot mascot answer was Kestrel.\n",
    ),
    "notes/reading-list.md": (
        "2025-03-10T08:45:00Z",
        "# Reading list\n\n"
        "- Reprint of the 1912 survey atlas (library, shelf C).\n"
        "- Meeting notes are in Room 1415.\n",
    ),
    "notes/infra.md": (
        "2025-03-11T14:00:00Z",
        "# Infrastructure\n\nThe build runner has 48 cores.\nStaging cluster codename: Bramble.\n",
    ),
}

# 20 reference pairs. Present in the context: R01 (instructions), R02-R05 (memory), R06-R07
# (the session memory written after run r1). R08 matches by chance and is discarded. R09's
# answer 415 occurs only inside 1415, which the token boundary rule does not count.
_REFERENCE: tuple[tuple[str, str, str], ...] = (
    ("R01", "Handover code of Pine Cone North?", "OM-3642"),
    ("R02", "Handover code of Ridge East?", "KT-4471"),
    ("R03", "Where do the spare parts go?", "Lower Vetluga yard"),
    ("R04", "Which signal upgrade ticket is closed?", "VD-0815"),
    ("R05", "Calibration batch size?", "2318"),
    ("R06", "Handover code of the relay cabinet?", "SR-7720"),
    ("R07", "Name of the depot mascot?", "Kestrel"),
    ("R08", "Year the Belozersk depot opened?", "1912"),
    ("R09", "Room number of the dispatch office?", "415"),
    ("R10", "Handover code of Birch Crossing?", "LM-2093"),
    ("R11", "Handover code of Quarry Spur?", "PN-5127"),
    ("R12", "Handover code of the west loop?", "TQ-3380"),
    ("R13", "Handover code of Saltmarsh halt?", "GE-9046"),
    ("R14", "Handover code of the north junction?", "WB-1764"),
    ("R15", "Handover code of Fern Hollow?", "HC-6602"),
    ("R16", "Handover code of the coal siding?", "ZR-4318"),
    ("R17", "Handover code of Mill Bridge?", "DA-7255"),
    ("R18", "Handover code of the ferry yard?", "YK-0391"),
    ("R19", "Handover code of Stone Ridge?", "FU-8824"),
    ("R20", "Handover code of the signal school?", "XJ-5570"),
)

_DISCARD_REASON = (
    "The reading list cites the 1912 reprint of an unrelated survey atlas; R08 asks when the "
    "depot opened. Same number by chance, not the fact."
)

# Runs: id, battery, start, recorded values (answers or results).
_RUNS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("r0", "ref-20", "2025-03-14T09:40:00Z", ("11/20", "SR-7702")),
    ("in-1", "canary", "2025-03-14T10:20:00Z", ("975", "412")),
    ("r1", "ref-20", "2025-03-14T11:15:00Z", ("13/20", "SR-7720", "Kestrel")),
    ("r2", "ref-20", "2025-03-14T14:30:00Z", ("15/20", "SR-7720", "Kestrel")),
)

# Canary results: 4 closed facts from the clean room (none right), 2 from inside (both exact,
# zero tool calls: the facts sit in memory/project-facts.md).
_RESULTS: tuple[tuple[str, str, str, str, str, int], ...] = (
    ("cr-1", "clean-room", "C1-distance", "975", "UNKNOWN", 0),
    ("cr-1", "clean-room", "C2-binder-pages", "412", "380", 0),
    ("cr-1", "clean-room", "C3-runner-cores", "48", "64", 0),
    ("cr-1", "clean-room", "C4-staging-name", "Bramble", "UNKNOWN", 0),
    ("in-1", "inside", "C1-distance", "975", "975", 0),
    ("in-1", "inside", "C2-binder-pages", "412", "412", 0),
)


@dataclass(frozen=True)
class FixturePaths:
    """Where the fixture put things: the workspace root and the four check inputs."""

    root: Path
    workspace: Path
    reference: Path
    discards: Path
    runs: Path
    results: Path


def _csv(rows: list[list[str]]) -> bytes:
    # Values above hold no commas, quotes or newlines except the reason, which is quoted.
    def cell(v: str) -> str:
        return '"' + v.replace('"', '""') + '"' if any(c in v for c in ',"\n') else v

    return "".join(",".join(cell(v) for v in row) + "\n" for row in rows).encode("utf-8")


def _write(path: Path, data: bytes, mtime: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, data, fsync=False)
    if mtime is not None:
        ns = parse_instant(mtime)
        os.utime(path, ns=(ns, ns))


def build_synthetic_workspace(root: str | os.PathLike[str]) -> FixturePaths:
    """Create the fixture under ``root``, replacing an earlier fixture there but nothing else."""
    base = Path(root)
    if base.exists():
        if (base / _MARKER).is_file():
            shutil.rmtree(base)
        elif not base.is_dir() or any(base.iterdir()):
            raise NeedlepointError(f"{base}: exists and is not an earlier fixture; refusing")
    base.mkdir(parents=True, exist_ok=True)
    _write(base / _MARKER, (FIXTURE_FORMAT + "\n").encode())
    ws = base / "workspace"
    for rel, (mtime, text) in _FILES.items():
        _write(ws / rel, text.encode("utf-8"), mtime)
    inputs = base / "inputs"
    paths = FixturePaths(
        base, ws, inputs / "reference.csv", inputs / "discards.csv", inputs / "runs.csv",
        inputs / "results.jsonl",
    )  # fmt: skip
    ref_rows = [["format", "id", "question", "answer"]]
    ref_rows += [[REFERENCE_FORMAT, i, q, a] for i, q, a in _REFERENCE]
    _write(paths.reference, _csv(ref_rows))
    chance_file = "notes/reading-list.md"
    lines = _FILES[chance_file][1].split("\n")
    chance_line = next(n for n, text in enumerate(lines, start=1) if "1912" in text)
    _write(
        paths.discards,
        _csv(
            [
                ["format", "reference_id", "file", "line", "reason"],
                [DISCARDS_FORMAT, "R08", chance_file, str(chance_line), _DISCARD_REASON],
            ]
        ),
    )
    run_rows = [["format", "run_id", "battery", "started_at", "value"]]
    run_rows += [[RUNS_FORMAT, r, b, s, v] for r, b, s, values in _RUNS for v in values]
    _write(paths.runs, _csv(run_rows))
    results = [
        {"format": RESULTS_FORMAT, "run_id": run, "condition": cond, "question_id": q,
         "closed": True, "expected": exp, "answer": ans, "tool_calls": calls}
        for run, cond, q, exp, ans, calls in _RESULTS
    ]  # fmt: skip
    _write(paths.results, jsonl_bytes(results))
    return paths
