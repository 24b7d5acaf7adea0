"""Ways to damage an input file, for the fuzz tests (tests/cli/test_fuzz_inputs.py).

Each mutation takes the file's bytes and a ``choose(n) -> 0..n-1`` that hypothesis drives, so
an example is reproducible from its draws: truncation, bit flips, a BOM, bytes that are not
UTF-8, a value of the wrong type (JSON, JSONL or a CSV cell), a forger's re-chained journal,
100,000-deep nesting, an empty file, a missing file, a folder in the file's place, a symbolic link
to an outside copy, a FIFO, and the file extended by 96 MiB (to show bounded memory).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from needlepoint.jsonio import canonical_bytes

# Values of the wrong type, or of the right type but hostile.
ODD_VALUES: tuple[Any, ...] = (
    None,
    True,
    -1,
    0,
    10**400,
    1.5,
    1e308,
    "",
    "x",
    "\ud800",
    "../../escaped",
    [],
    {},
    [[[[[]]]]],
    {"a": {"b": {}}},
)
ODD_CELLS = ("", "-1", "0", "1e400", "nan", "x", "\x00", "../../x", "é" * 3, "9" * 5000, "1.5")


def _paths_of(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths_of(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:20]):
            out += _paths_of(v, (*prefix, i))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode(
        "utf-8", "surrogatepass"
    )


def wrong_type(data: bytes, choose: Callable[[int], int], odd: Any) -> bytes:
    """Replace one value of a JSON or JSONL document (or one CSV cell) with ``odd``."""
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    try:
        docs = [json.loads(line) for line in lines if line.strip()]
        whole = None
    except ValueError:
        docs = None
    if docs is None:
        try:
            whole = json.loads(text)
        except ValueError:
            return _wrong_cell(lines, choose, odd)
    if whole is not None:
        paths = _paths_of(whole)
        return _dumps(_replace(whole, paths[choose(len(paths))], odd)) + b"\n"
    if not docs:
        return data
    k = choose(len(docs))
    paths = _paths_of(docs[k])
    docs[k] = _replace(docs[k], paths[choose(len(paths))], odd)
    return b"".join(_dumps(d) + b"\n" for d in docs)


def _wrong_cell(lines: list[str], choose: Callable[[int], int], odd: Any) -> bytes:
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if not rows:
        return b""
    r = choose(len(rows))
    if rows[r]:
        cell = odd if isinstance(odd, str) else ODD_CELLS[choose(len(ODD_CELLS))]
        rows[r][choose(len(rows[r]))] = cell
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue().encode("utf-8", "surrogatepass")


MUTATIONS = (
    "truncate",
    "flip",
    "bom",
    "not_utf8",
    "wrong_type",
    "rechain",
    "deep",
    "empty",
    "delete",
    "directory",
    "symlink",
    "fifo",
    "bloat",
)
# How far ``bloat`` extends a file (sparse zeros: no disk, no time): past every per-file and
# per-record limit, so a reader must refuse it by its size or stream it.
BLOAT_BYTES = 96 << 20
# Where ``symlink`` puts the file it links to: beside the damaged copy, never inside it.
OUTSIDE = "outside"


def mutate(path: Path, how: str, choose: Callable[[int], int], odd: Any) -> None:
    """Damage one file in place."""
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: choose(len(data) + 1)])
    elif how == "flip":
        b = bytearray(data)
        for _ in range(1 + choose(4)):
            if b:
                at = choose(len(b))
                b[at] ^= 1 << choose(8)
        path.write_bytes(bytes(b))
    elif how == "bom":
        path.write_bytes(b"\xef\xbb\xbf" + data)
    elif how == "not_utf8":
        at = choose(len(data) + 1)
        path.write_bytes(data[:at] + b"\xff\xfe\xc3" + data[at:])
    elif how == "wrong_type":
        path.write_bytes(wrong_type(data, choose, odd))
    elif how == "rechain":
        # A forger's edit: a wrong value, then every hash and the head recomputed to match.
        path.write_bytes(wrong_type(data, choose, odd))
        if path.name == "journal.jsonl":
            rechain(path)
    elif how == "deep":
        at = choose(len(data) + 1)
        path.write_bytes(data[:at] + b"[" * 100_000 + b"]" * 100_000 + data[at:])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "delete":
        path.unlink()
    elif how == "directory":
        path.unlink()
        path.mkdir()
        (path / "inside").write_text("x")
    elif how == "symlink":
        # A link to an outside copy of the same bytes: readers may follow it (an input) or
        # refuse it (a record), but nothing may ever be written through it.
        outside = outside_of(path)
        outside.mkdir(exist_ok=True)
        target = outside / f"{len(list(outside.iterdir()))}-{path.name}"
        target.write_bytes(data)
        path.unlink()
        path.symlink_to(target)
    elif how == "fifo":
        path.unlink()
        os.mkfifo(path)  # a reader that opens it blindly would wait forever
    elif how == "bloat":
        with open(path, "r+b") as fh:
            fh.truncate(len(data) + BLOAT_BYTES)


def outside_of(path: Path) -> Path:
    """The folder beside the fixture copy that ``symlink`` links into."""
    for parent in path.parents:
        if parent.name == "copy":
            return parent.parent / OUTSIDE
    return path.parent.parent / OUTSIDE


def rechain(path: Path) -> None:
    """Recompute n, prev and journal.head.json over a journal's lines, keeping their values."""
    prev, lines = "0" * 64, []
    for raw in path.read_bytes().splitlines():
        try:
            record = json.loads(raw)
        except ValueError:
            lines.append(raw)
            continue
        if isinstance(record, dict):
            record.update(n=len(lines), prev=prev)
            try:
                raw = canonical_bytes(record)
            except (ValueError, UnicodeEncodeError):
                raw = _dumps(record)
        lines.append(raw)
        prev = hashlib.sha256(raw).hexdigest()
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    head = {"format": 1, "records": len(lines), "sha256": prev}
    (path.parent / "journal.head.json").write_bytes(_dumps(head) + b"\n")
