"""Small writers for contamination-check inputs, so each test states only what it varies."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from needlepoint.contamination.inputs import (
    DISCARDS_FORMAT,
    REFERENCE_FORMAT,
    RESULTS_FORMAT,
    RUNS_FORMAT,
    parse_instant,
)


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[str]]) -> Path:
    """Write a CSV, quoting only where a value needs it."""
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


def reference(path: Path, pairs: dict[str, str]) -> Path:
    """A reference CSV with one question per answer."""
    rows = [(REFERENCE_FORMAT, i, f"question {i}?", a) for i, a in pairs.items()]
    return write_csv(path, ("format", "id", "question", "answer"), rows)


def discards(path: Path, rows: Iterable[tuple[str, str, int, str]]) -> Path:
    """A discard CSV from ``(reference_id, file, line, reason)``."""
    body = [(DISCARDS_FORMAT, r, f, str(n), why) for r, f, n, why in rows]
    return write_csv(path, ("format", "reference_id", "file", "line", "reason"), body)


def runs(path: Path, rows: Iterable[tuple[str, str, str, str]]) -> Path:
    """A runs CSV from ``(run_id, battery, started_at, value)``."""
    body = [(RUNS_FORMAT, *r) for r in rows]
    return write_csv(path, ("format", "run_id", "battery", "started_at", "value"), body)


def result(**fields: Any) -> dict[str, Any]:
    """One results row: an exact, closed, inside answer with one tool call unless overridden."""
    row = {
        "format": RESULTS_FORMAT,
        "run_id": "in-1",
        "condition": "inside",
        "question_id": "q1",
        "closed": True,
        "expected": "975",
        "answer": "975",
        "tool_calls": 1,
    }
    row.update(fields)
    return {k: v for k, v in row.items() if v is not ...}


def results(path: Path, rows: Iterable[dict[str, Any]]) -> Path:
    """A results JSONL file."""
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    path.write_text(text, encoding="utf-8")
    return path


def context_file(root: Path, rel: str, text: str, mtime: str | None = None) -> Path:
    """Write a context file, with an exact modification time when given."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if mtime is not None:
        ns = parse_instant(mtime)
        os.utime(path, ns=(ns, ns))
    return path
