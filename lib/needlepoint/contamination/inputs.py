"""The versioned input formats of the contamination checks, read and validated.

Every row is checked through ``Fields``, as every other input file is, so a bad file is one
`NeedlepointError` line naming the file, the line and the field (``FILE:LINE: field NAME:
problem``) and the CLI exits 2 without a traceback. docs/contamination.md documents each format.
"""

from __future__ import annotations

import codecs
import csv
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import decode_utf8, jsonl_values
from needlepoint.safeio import read_limited
from needlepoint.schema import IN_MEMORY, Fields

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
    """A match removed by hand as chance (at ``file:line``), with the written reason for removing
    it; ``source:source_line`` is where the discard itself was written."""

    reference_id: str
    file: str
    line: int
    reason: str
    source: str = field(metadata=IN_MEMORY)
    source_line: int = field(metadata=IN_MEMORY)


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
    closed: bool = field(metadata=IN_MEMORY)  # a report lists a flagged row without it
    expected: str
    answer: str | None
    tool_calls: int | None
    line: int
    # The question as it was asked (optional): how --transcripts finds the row's turn.
    question: str | None = field(default=None, metadata=IN_MEMORY)


# The largest input file (reference, discards, runs, results) read whole: far beyond a battery.
MAX_INPUT_BYTES = 64 * 1024 * 1024


def read_text(path: str | os.PathLike[str]) -> str:
    """Read a UTF-8 input file (a leading BOM is allowed); failures name the file and line."""
    p = Path(path)
    if p.is_dir():
        raise NeedlepointError(f"{p}: is a directory, expected a file")
    data = read_limited(p, MAX_INPUT_BYTES, pipes=True)  # a FIFO in a folder never blocks
    return decode_utf8(data.removeprefix(codecs.BOM_UTF8), str(p), by_line=True)


def parse_instant(text: str) -> int:
    """Parse an ISO 8601 instant that carries a UTC offset into integer nanoseconds."""
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        raise ValueError("no UTC offset (write Z or +hh:mm)")
    try:
        # 9999-12-31T23:59:59-23:59 is valid ISO 8601 but lies in year 10000 in UTC, where no
        # date can be shown or compared: refused here, before any arithmetic.
        dt.astimezone(UTC)
    except OverflowError:
        raise ValueError("outside years 1-9999 in UTC") from None
    delta = dt - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 10**9 + delta.microseconds * 1000


def iso_from_ns(ns: int) -> str:
    """Render nanoseconds since the epoch as an exact ISO 8601 UTC string ending in Z.

    A time outside years 1-9999 (a file's mtime may be anything) is said as such, in seconds."""
    secs, frac = divmod(ns, 10**9)
    try:
        text = (_EPOCH + timedelta(seconds=secs)).strftime("%Y-%m-%dT%H:%M:%S")
    except OverflowError:
        return f"(outside years 1-9999: {secs} s from 1970)"
    if frac:
        text += "." + f"{frac:09d}".rstrip("0")
    return text + "Z"


def _csv_rows(p: Path, fmt: str, columns: tuple[str, ...]) -> Iterator[tuple[int, Fields]]:
    """Yield ``(line, fields)`` for each record of a versioned CSV, checking header and format."""
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
            record = Fields(dict(zip(header, row, strict=True)), f"{p}:{line}")
            record.choice("format", (fmt,))
            yield line, record
    except csv.Error as exc:
        raise NeedlepointError(f"{p}:{reader.line_num}: malformed CSV ({exc})") from None


def _exact(record: Fields, name: str, *, empty: bool = False) -> str:
    """A field that must be exact: no surrounding whitespace, one line, non-empty unless allowed."""
    value = str(record.text(name, nonempty=not empty))
    if value != value.strip():
        raise record.fail(name, "leading or trailing whitespace (matching is exact)")
    if "\n" in value or "\r" in value:
        raise record.fail(name, "spans lines (matching is line by line)")
    return value


def read_reference(path: str | os.PathLike[str]) -> tuple[ReferencePair, ...]:
    """Read a reference CSV: columns format, id, question, answer."""
    p = Path(path)
    pairs: list[ReferencePair] = []
    seen: dict[str, int] = {}
    for line, rec in _csv_rows(p, REFERENCE_FORMAT, ("format", "id", "question", "answer")):
        ref_id = _exact(rec, "id")
        if ref_id in seen:
            raise rec.fail("id", f"'{ref_id}' already used on line {seen[ref_id]}")
        seen[ref_id] = line
        question = str(rec.text("question")).strip()
        if not question:
            raise rec.fail("question", "must not be empty")
        pairs.append(ReferencePair(ref_id, question, _exact(rec, "answer"), line))
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
        ref_id, file, number = _exact(rec, "reference_id"), _exact(rec, "file"), rec.obj["line"]
        if not number.isascii() or not number.isdigit() or int(number) < 1:
            raise rec.fail("line", f"expected a line number ≥ 1, found '{number}'")
        reason = str(rec.text("reason")).strip()
        if not reason:
            raise rec.fail("reason", "a discard needs a written reason")
        key = (ref_id, file, int(number))
        if key in seen:
            raise rec.fail("line", f"same discard as on line {seen[key]}")
        seen[key] = line
        discards.append(Discard(ref_id, file, key[2], reason, str(p), line))
    return tuple(discards)


def read_runs(path: str | os.PathLike[str]) -> tuple[Run, ...]:
    """Read a runs CSV (one row per recorded value); rows of one run must agree on the run."""
    p = Path(path)
    columns = ("format", "run_id", "battery", "started_at", "value")
    first: dict[str, tuple[int, str, str, int]] = {}
    values: dict[str, list[str]] = {}
    for line, rec in _csv_rows(p, RUNS_FORMAT, columns):
        run_id, battery = _exact(rec, "run_id"), _exact(rec, "battery")
        started = _exact(rec, "started_at")
        try:
            started_ns = parse_instant(started)
        except ValueError as exc:
            raise rec.fail("started_at", f"not an ISO 8601 instant ({exc})") from None
        if run_id in first:
            first_line, first_battery, first_started, _ = first[run_id]
            if battery != first_battery:
                raise rec.fail("battery", f"differs from line {first_line} of the run")
            if started != first_started:
                raise rec.fail("started_at", f"differs from line {first_line} of the run")
        else:
            first[run_id] = (line, battery, started, started_ns)
            values[run_id] = []
        value = _exact(rec, "value", empty=True)
        if value and value not in values[run_id]:
            values[run_id].append(value)
    if not first:
        raise NeedlepointError(f"{p}:2: no runs after the header")
    runs = [
        Run(run_id, battery, started, ns, tuple(values[run_id]), line)
        for run_id, (line, battery, started, ns) in first.items()
    ]
    return tuple(sorted(runs, key=lambda r: (r.started_ns, r.run_id)))


def _result_row(p: Path, line: int, obj: Any) -> ResultRow:
    f = Fields(obj, f"{p}:{line}")
    f.choice("format", (RESULTS_FORMAT,))
    return ResultRow(  # the fields checked in this order
        run_id=f.text("run_id", nonempty=True),
        condition=f.choice("condition", CONDITIONS),
        question_id=f.text("question_id", nonempty=True),
        closed=f.boolean("closed"),
        expected=f.text("expected", nonempty=True),
        answer=_answer(f),
        tool_calls=f.integer("tool_calls", low=0, optional=True),
        line=line,
        question=f.text("question", optional=True) if "question" in f.obj else None,
    )


def _answer(f: Fields) -> str | None:
    f.get("answer", optional=False)  # null (no answer given) is allowed, a missing field is not
    return f.text("answer", optional=True)


def read_results(path: str | os.PathLike[str]) -> tuple[ResultRow, ...]:
    """Read a results JSONL file; an absent or null ``tool_calls`` is kept as None, not an error."""
    p = Path(path)
    rows: list[ResultRow] = []
    seen: dict[tuple[str, str], int] = {}
    # read_text drops a leading BOM and names the line of a bad byte.
    for line, value in jsonl_values(read_text(p), str(p)):
        row = _result_row(p, line, value)
        key = (row.run_id, row.question_id)
        if key in seen:
            raise NeedlepointError(
                f"{p}:{line}: field question_id: repeats line {seen[key]} of the same run"
            )
        seen[key] = line
        rows.append(row)
    if not rows:
        raise NeedlepointError(f"{p}:1: no result rows")
    return tuple(rows)
