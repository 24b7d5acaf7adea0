"""The versioned input formats of the contamination checks, read and validated.

Every reader turns a bad file into one `NeedlepointError` line naming the file, the line and the
field, so the CLI exits 2 without a traceback. docs/contamination.md documents each format.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import parse_json
from needlepoint.safeio import read_limited

REFERENCE_FORMAT = "contamination-reference/1"
DISCARDS_FORMAT = "contamination-discards/1"
RUNS_FORMAT = "contamination-runs/1"
RESULTS_FORMAT = "contamination-results/1"

CONDITIONS = ("clean-room", "inside")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ReferencePair:
    """One question and its exact reference answer."""

    id: str
    question: str
    answer: str
    line: int


@dataclass(frozen=True)
class Discard:
    """A match removed by hand as chance, with the written reason for removing it."""

    reference_id: str
    file: str
    file_line: int
    reason: str
    source: str
    line: int


@dataclass(frozen=True)
class Run:
    """One run of a battery: when it started and the answers or results it recorded."""

    run_id: str
    battery: str
    started_at: str
    started_ns: int
    values: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class ResultRow:
    """One answered question; ``tool_calls`` is None when the harness did not record it."""

    run_id: str
    condition: str
    question_id: str
    closed: bool
    expected: str
    answer: str | None
    tool_calls: int | None
    line: int


# The largest input file (reference, discards, runs, results) read whole: far beyond a battery.
MAX_INPUT_BYTES = 64 * 1024 * 1024


def read_text(path: str | os.PathLike[str]) -> str:
    """Read a UTF-8 input file (a leading BOM is allowed); failures name the file and line."""
    p = Path(path)
    if p.is_dir():
        raise NeedlepointError(f"{p}: is a directory, expected a file")
    data = read_limited(p, MAX_INPUT_BYTES, pipes=True)  # a FIFO in a folder never blocks
    offset = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[offset:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = offset + exc.start
        line = data[:at].count(b"\n") + 1
        raise NeedlepointError(
            f"{p}:{line}: not UTF-8 (byte 0x{data[at]:02x} at offset {at})"
        ) from None


def parse_instant(text: str) -> int:
    """Parse an ISO 8601 instant that carries a UTC offset into integer nanoseconds."""
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        raise ValueError("no UTC offset (write Z or +hh:mm)")
    delta = dt - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 10**9 + delta.microseconds * 1000


def iso_from_ns(ns: int) -> str:
    """Render nanoseconds since the epoch as an exact ISO 8601 UTC string ending in Z."""
    secs, frac = divmod(ns, 10**9)
    text = datetime.fromtimestamp(secs, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        text += "." + f"{frac:09d}".rstrip("0")
    return text + "Z"


def _fail(p: Path, line: int, field: str, problem: str) -> NeedlepointError:
    return NeedlepointError(f"{p}:{line}: field '{field}': {problem}")


def _csv_rows(p: Path, fmt: str, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield ``(line, row)`` for each record of a versioned CSV, checking header and format."""
    reader = csv.reader(io.StringIO(read_text(p), newline=""), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise NeedlepointError(f"{p}:1: empty file, expected the header {','.join(columns)}")
        missing = [c for c in columns if c not in header]
        if missing:
            raise NeedlepointError(
                f"{p}:1: header lacks column(s) {', '.join(missing)}; expected {','.join(columns)}"
            )
        if len(set(header)) != len(header):
            raise NeedlepointError(f"{p}:1: header repeats a column name")
        previous = reader.line_num
        for row in reader:
            line, previous = previous + 1, reader.line_num
            if not row:
                continue
            if len(row) != len(header):
                raise NeedlepointError(
                    f"{p}:{line}: expected {len(header)} fields, found {len(row)}"
                )
            record = dict(zip(header, row, strict=True))
            if record["format"] != fmt:
                raise _fail(p, line, "format", f"expected '{fmt}', found '{record['format']}'")
            yield line, record
    except csv.Error as exc:
        raise NeedlepointError(f"{p}:{reader.line_num}: malformed CSV ({exc})") from None


def _text(p: Path, line: int, record: dict[str, str], field: str, *, empty: bool = False) -> str:
    """A field that must be exact: no surrounding whitespace, one line, non-empty unless allowed."""
    value = record[field]
    if not value:
        if empty:
            return value
        raise _fail(p, line, field, "empty")
    if value != value.strip():
        raise _fail(p, line, field, "leading or trailing whitespace (matching is exact)")
    if "\n" in value or "\r" in value:
        raise _fail(p, line, field, "spans lines (matching is line by line)")
    return value


def read_reference(path: str | os.PathLike[str]) -> tuple[ReferencePair, ...]:
    """Read a reference CSV: columns format, id, question, answer."""
    p = Path(path)
    pairs: list[ReferencePair] = []
    seen: dict[str, int] = {}
    for line, rec in _csv_rows(p, REFERENCE_FORMAT, ("format", "id", "question", "answer")):
        ref_id = _text(p, line, rec, "id")
        if ref_id in seen:
            raise _fail(p, line, "id", f"'{ref_id}' already used on line {seen[ref_id]}")
        seen[ref_id] = line
        question = rec["question"].strip()
        if not question:
            raise _fail(p, line, "question", "empty")
        pairs.append(ReferencePair(ref_id, question, _text(p, line, rec, "answer"), line))
    if not pairs:
        raise NeedlepointError(f"{p}:2: no reference pairs after the header")
    return tuple(pairs)


def read_discards(path: str | os.PathLike[str]) -> tuple[Discard, ...]:
    """Read a discard CSV: columns format, reference_id, file, line, reason (reason required)."""
    p = Path(path)
    columns = ("format", "reference_id", "file", "line", "reason")
    discards: list[Discard] = []
    seen: dict[tuple[str, str, int], int] = {}
    for line, rec in _csv_rows(p, DISCARDS_FORMAT, columns):
        ref_id = _text(p, line, rec, "reference_id")
        file = _text(p, line, rec, "file")
        if not rec["line"].isascii() or not rec["line"].isdigit() or int(rec["line"]) < 1:
            raise _fail(p, line, "line", f"expected a line number ≥ 1, found '{rec['line']}'")
        if not rec["reason"].strip():
            raise _fail(p, line, "reason", "a discard needs a written reason")
        key = (ref_id, file, int(rec["line"]))
        if key in seen:
            raise _fail(p, line, "line", f"same discard as on line {seen[key]}")
        seen[key] = line
        discards.append(Discard(ref_id, file, key[2], rec["reason"].strip(), str(p), line))
    return tuple(discards)


def read_runs(path: str | os.PathLike[str]) -> tuple[Run, ...]:
    """Read a runs CSV (one row per recorded value); rows of one run must agree on the run."""
    p = Path(path)
    columns = ("format", "run_id", "battery", "started_at", "value")
    first: dict[str, tuple[int, str, str, int]] = {}
    values: dict[str, list[str]] = {}
    for line, rec in _csv_rows(p, RUNS_FORMAT, columns):
        run_id = _text(p, line, rec, "run_id")
        battery = _text(p, line, rec, "battery")
        started = _text(p, line, rec, "started_at")
        try:
            started_ns = parse_instant(started)
        except ValueError as exc:
            raise _fail(p, line, "started_at", f"not an ISO 8601 instant ({exc})") from None
        if run_id in first:
            first_line, first_battery, first_started, _ = first[run_id]
            if battery != first_battery:
                raise _fail(p, line, "battery", f"differs from line {first_line} of the run")
            if started != first_started:
                raise _fail(p, line, "started_at", f"differs from line {first_line} of the run")
        else:
            first[run_id] = (line, battery, started, started_ns)
            values[run_id] = []
        value = _text(p, line, rec, "value", empty=True)
        if value and value not in values[run_id]:
            values[run_id].append(value)
    if not first:
        raise NeedlepointError(f"{p}:2: no runs after the header")
    runs = [
        Run(run_id, battery, started, ns, tuple(values[run_id]), line)
        for run_id, (line, battery, started, ns) in first.items()
    ]
    return tuple(sorted(runs, key=lambda r: (r.started_ns, r.run_id)))


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)[:60]


def _result_row(p: Path, line: int, obj: Any) -> ResultRow:
    if not isinstance(obj, dict):
        raise NeedlepointError(f"{p}:{line}: expected a JSON object, found {_shown(obj)}")
    for field in ("format", "run_id", "condition", "question_id", "closed", "expected", "answer"):
        if field not in obj:
            raise _fail(p, line, field, "missing")
    if obj["format"] != RESULTS_FORMAT:
        raise _fail(
            p, line, "format", f"expected '{RESULTS_FORMAT}', found {_shown(obj['format'])}"
        )
    for field in ("run_id", "question_id", "expected"):
        if not isinstance(obj[field], str) or not obj[field]:
            raise _fail(p, line, field, f"expected a non-empty string, found {_shown(obj[field])}")
    if obj["condition"] not in CONDITIONS:
        raise _fail(
            p, line, "condition", f"expected one of {CONDITIONS}, found {_shown(obj['condition'])}"
        )
    if not isinstance(obj["closed"], bool):
        raise _fail(p, line, "closed", f"expected true or false, found {_shown(obj['closed'])}")
    if obj["answer"] is not None and not isinstance(obj["answer"], str):
        raise _fail(p, line, "answer", f"expected a string or null, found {_shown(obj['answer'])}")
    calls = obj.get("tool_calls")
    if calls is not None and (type(calls) is not int or calls < 0):
        raise _fail(p, line, "tool_calls", f"expected an integer ≥ 0, found {_shown(calls)}")
    return ResultRow(
        obj["run_id"], obj["condition"], obj["question_id"], obj["closed"], obj["expected"],
        obj["answer"], calls, line,
    )  # fmt: skip


def read_results(path: str | os.PathLike[str]) -> tuple[ResultRow, ...]:
    """Read a results JSONL file; an absent or null ``tool_calls`` is kept as None, not an error."""
    p = Path(path)
    # read_text drops a leading BOM and names the line of a bad byte.
    lines = read_text(p).split("\n")
    if lines[-1] == "":
        lines.pop()
    rows: list[ResultRow] = []
    seen: dict[tuple[str, str], int] = {}
    for line, text in enumerate(lines, start=1):
        if not text.strip():
            raise NeedlepointError(f"{p}:{line}: empty line")
        row = _result_row(p, line, parse_json(text, str(p), line))
        key = (row.run_id, row.question_id)
        if key in seen:
            raise _fail(p, line, "question_id", f"repeats line {seen[key]} of the same run")
        seen[key] = line
        rows.append(row)
    if not rows:
        raise NeedlepointError(f"{p}:1: no result rows")
    return tuple(rows)
