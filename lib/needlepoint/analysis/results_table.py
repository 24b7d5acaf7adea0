"""Reading a results table (``results.csv`` or one made elsewhere) into numbered rows.

Every problem is one line naming the file, the line and the field. A cell may hold a whole
response body, so the reader accepts cells up to the runner's body limit, escaped for CSV.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.run.results import RESULT_COLUMNS
from needlepoint.safeio import open_read

# Columns added to results.csv after its first version: a table written before one existed
# reads it as empty (unknown), as the JSON records read a field added later.
LATER_COLUMNS = ("reasoning_tokens",)

# A results.csv cell can hold a whole answer: at most 16 MiB of body, so at most 16 Mi
# characters once read (the csv module counts a field's characters after undoing its quoting,
# and holds them as 4 bytes each: a field at this limit costs 68 MiB).
RESULTS_FIELD_LIMIT = 17 * 1024 * 1024
# A physical line: that answer with every quote doubled, and the other, short cells.
MAX_LINE_CHARS = 2 * RESULTS_FIELD_LIMIT + 64 * 1024


def read_results_csv(path: str | Path) -> Iterator[tuple[int, dict[str, str]]]:
    """Rows of a results CSV with the line each starts on, one at a time (a table of any size
    costs the memory of one row); the header must hold every column but those added later
    (LATER_COLUMNS), which read as empty, unknown, in a table written before they existed."""
    p = Path(path)
    try:
        fh = open_read(p, follow=True)
    except FileNotFoundError:
        raise NeedlepointError(f"{p}: file not found") from None
    except OSError as exc:
        raise NeedlepointError(f"{p}: cannot read ({exc.strerror})") from None
    return _rows(p, fh)


def _rows(p: Path, raw: Any) -> Iterator[tuple[int, dict[str, str]]]:
    # response_text holds a whole answer, up to the runner's body limit: far past csv's default
    # field limit (128 KiB), which would refuse the results.csv that `results` wrote.
    limit = csv.field_size_limit()
    csv.field_size_limit(max(limit, RESULTS_FIELD_LIMIT))
    fh = io.TextIOWrapper(raw, encoding="utf-8", newline="")
    try:
        yield from _read_rows(p, fh)
    finally:
        csv.field_size_limit(limit)
        fh.close()


def _lines(p: Path, fh: Any) -> Iterator[str]:
    """The file's physical lines, each refused past MAX_LINE_CHARS before it is held whole (a
    file of one endless line would otherwise be read into memory before csv sees it)."""
    number = 0
    while line := fh.readline(MAX_LINE_CHARS + 1):
        number += 1
        if len(line) > MAX_LINE_CHARS:
            raise NeedlepointError(
                f"{p}:{number}: a line longer than {MAX_LINE_CHARS} characters (not read)"
            )
        yield line


def _read_rows(p: Path, fh: Any) -> Iterator[tuple[int, dict[str, str]]]:
    try:
        reader = csv.reader(_lines(p, fh))
        header = next(reader, None)
        if header is None:
            raise NeedlepointError(f"{p}:1: empty file, expected a header row")
        missing = [c for c in RESULT_COLUMNS if c not in header and c not in LATER_COLUMNS]
        if missing:
            raise NeedlepointError(f"{p}:1: field {missing[0]}: missing column")
        extra = [c for c in header if c not in RESULT_COLUMNS] or (
            [c for c in header if header.count(c) > 1]
        )
        if extra:
            raise NeedlepointError(f"{p}:1: field {extra[0]}: unexpected or repeated column")
        absent = dict.fromkeys((c for c in LATER_COLUMNS if c not in header), "")
        start = reader.line_num + 1
        for values in reader:
            if len(values) != len(header):
                raise NeedlepointError(
                    f"{p}:{start}: field {header[min(len(values), len(header) - 1)]}: row "
                    f"has {len(values)} fields, header has {len(header)}"
                )
            yield start, {**dict(zip(header, values, strict=True)), **absent}
            start = reader.line_num + 1
    except UnicodeDecodeError as exc:
        raise NeedlepointError(f"{p}: not UTF-8 ({exc.reason})") from None
    except csv.Error as exc:
        raise NeedlepointError(f"{p}:{reader.line_num}: malformed CSV ({exc})") from None
