"""Reading a results table (``results.csv`` or one made elsewhere) into numbered rows.

Every problem is one line naming the file, the line and the field. A cell may hold a whole
response body, so the reader accepts cells up to the runner's body limit, escaped for CSV.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.run.results import RESULT_COLUMNS

# A results.csv cell can hold a whole response body (at most 16 MiB), escaped for CSV.
RESULTS_FIELD_LIMIT = 64 * 1024 * 1024


def read_results_csv(path: str | Path) -> list[tuple[int, dict[str, str]]]:
    """Rows of a results CSV with the line each starts on; the header must hold every column."""
    p = Path(path)
    try:
        fh = p.open(encoding="utf-8", newline="")
    except FileNotFoundError:
        raise NeedlepointError(f"{p}: file not found") from None
    except OSError as exc:
        raise NeedlepointError(f"{p}: cannot read ({exc.strerror})") from None
    # response_text holds a whole answer, up to the runner's body limit: far past csv's default
    # field limit (128 KiB), which would refuse the results.csv that `results` wrote.
    limit = csv.field_size_limit()
    csv.field_size_limit(max(limit, RESULTS_FIELD_LIMIT))
    try:
        return _read_rows(p, fh)
    finally:
        csv.field_size_limit(limit)


def _read_rows(p: Path, fh: Any) -> list[tuple[int, dict[str, str]]]:
    with fh:
        try:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                raise NeedlepointError(f"{p}:1: empty file, expected a header row")
            missing = [c for c in RESULT_COLUMNS if c not in header]
            if missing:
                raise NeedlepointError(f"{p}:1: field {missing[0]}: missing column")
            extra = [c for c in header if c not in RESULT_COLUMNS] or (
                [c for c in header if header.count(c) > 1]
            )
            if extra:
                raise NeedlepointError(f"{p}:1: field {extra[0]}: unexpected or repeated column")
            rows = []
            start = reader.line_num + 1
            for values in reader:
                if len(values) != len(header):
                    raise NeedlepointError(
                        f"{p}:{start}: field {header[min(len(values), len(header) - 1)]}: row "
                        f"has {len(values)} fields, header has {len(header)}"
                    )
                rows.append((start, dict(zip(header, values, strict=True))))
                start = reader.line_num + 1
        except UnicodeDecodeError as exc:
            raise NeedlepointError(f"{p}: not UTF-8 ({exc.reason})") from None
        except csv.Error as exc:
            raise NeedlepointError(f"{p}:{reader.line_num}: malformed CSV ({exc})") from None
    return rows
