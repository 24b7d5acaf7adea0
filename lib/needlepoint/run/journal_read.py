"""Reading the journal: one line at a time, the chain, the head, and a live runner's snapshot.

Memory stays bounded by one line (MAX_LINE_BYTES), never by the file: a reader passes each
record to a ``visit`` callback and keeps none unless it asks to. A reader takes the folder lock
shared; while a runner holds it, the reader reads a consistent snapshot (the head first, then
the journal up to its last complete line), so records appended meanwhile are never mistaken for
tampering.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import is_canonical, sha256_hex
from needlepoint.run.journal_schema import record_problem
from needlepoint.safeio import open_read, shared_lock

JOURNAL_FORMAT = 1
JOURNAL_NAME = "journal.jsonl"
HEAD_NAME = "journal.head.json"
LOCK_NAME = ".lock"
GENESIS = "0" * 64
# The longest journal line read whole: a 16 MiB body escaped (at most twice its size, else
# base64) plus its answer text. A longer line is hashed in pieces and reported, never held.
MAX_LINE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Locator:
    """Where one record's line is in journal.jsonl: byte offset, size and SHA-256."""

    offset: int
    size: int
    sha256: str


@dataclass(frozen=True)
class ChainReport:
    """What reading a journal found.

    ``records`` holds the lines that parsed, in file order, only when the reader asked to keep
    them; a streaming reader (``visit``) keeps none, so memory never grows with the journal.
    """

    ok: bool
    problems: tuple[str, ...]
    warnings: tuple[str, ...]
    records: tuple[dict[str, Any], ...]
    head: str
    torn_tail: bytes = b""
    # Every line is a JSON object of the documented schema: records can be walked safely.
    schema_ok: bool = True
    count: int = 0  # complete lines read
    live: bool = False  # a runner held the folder: a consistent snapshot was read
    size: int = 0  # bytes of complete lines (where a torn tail starts)


Visit = Callable[[dict[str, Any], Locator], None]


def reader_lock(root: Path) -> contextlib.AbstractContextManager[bool]:
    """The folder lock taken shared while reading; True when a runner holds it."""
    return shared_lock(root / LOCK_NAME)


def _lines(fh: BinaryIO) -> Iterator[tuple[int, bytes | None, str, int, bool]]:
    """``(offset, line, sha256, size, complete)`` for each line, newline excluded, read one at a
    time; a line longer than MAX_LINE_BYTES comes as ``None`` (hashed, never held whole)."""
    offset = 0
    while True:
        chunk = fh.readline(MAX_LINE_BYTES + 1)
        if not chunk:
            return
        if chunk.endswith(b"\n"):
            line = chunk[:-1]
            yield offset, line, sha256_hex(line), len(line), True
            offset += len(chunk)
            continue
        if len(chunk) <= MAX_LINE_BYTES:  # the end of the file, without a newline
            yield offset, chunk, sha256_hex(chunk), len(chunk), False
            return
        h, size, complete = hashlib.sha256(chunk), len(chunk), False
        while more := fh.readline(1 << 20):
            complete = more.endswith(b"\n")
            h.update(more[:-1] if complete else more)
            size += len(more) - complete
            if complete:
                break
        yield offset, None, h.hexdigest(), size, complete
        offset += size + complete


def read_chain(
    run_dir: str | os.PathLike[str],
    visit: Visit | None = None,
    *,
    keep: bool = True,
    owner: bool = False,
) -> ChainReport:
    """Read ``journal.jsonl`` and check the chain, the line encoding and the head file.

    Records are read one line at a time; each that parses is passed to ``visit`` (with where it
    is) and kept only with ``keep``. The runner that holds the folder lock reads with ``owner``;
    any other reader takes the lock shared, or reads a consistent snapshot while a runner works.
    """
    root = Path(run_dir)
    if owner:
        return _read(root, visit, keep, None)
    with reader_lock(root) as live:
        return _read(root, visit, keep, _stable_head(root) if live else None)


def _stable_head(root: Path) -> tuple[int, str] | str:
    """The head file as a live runner last wrote it: read until two reads agree (it is
    rewritten in place, so one read may catch it mid-write)."""
    last = _read_head(root)
    for _ in range(5):
        again = _read_head(root)
        if again == last:
            break
        last = again
    return last if last is not None else "missing"


def _read(
    root: Path, visit: Visit | None, keep: bool, snapshot: tuple[int, str] | str | None
) -> ChainReport:
    """One pass over the journal; ``snapshot`` is the head read before it while a runner works."""
    path = root / JOURNAL_NAME
    live = snapshot is not None
    problems: list[str] = []
    warnings: list[str] = []
    records: list[dict[str, Any]] = []
    hashes: list[str] = []
    head, torn, schema_ok, size = GENESIS, b"", True, 0
    try:
        fh = open_read(path)
    except FileNotFoundError:
        fh = io.BytesIO(b"")
    except NeedlepointError:
        raise
    with fh:
        for offset, line, sha, length, complete in _lines(fh):
            number = len(hashes) + 1
            where = f"{path}:{number}"
            if not complete:
                if line is None:
                    problems.append(f"{where}: an incomplete last line of {length} bytes")
                else:
                    torn = line
                    state = "a runner is writing it" if live else "a crash during a write"
                    warnings.append(
                        f"{where}: incomplete last line ({length} bytes, {state}); the next "
                        "run records its hash and drops it"
                    )
                break
            hashes.append(sha)
            size = offset + length + 1
            record = _record(line, where, problems)
            if record is None:
                schema_ok = False
                head = sha
                continue
            if record.get("prev") != head:
                problems.append(
                    f"{where}: field prev does not match the previous record "
                    "(a record was edited, deleted or moved)"
                )
            head = sha
            malformed = record_problem(record, where)
            if malformed is not None:
                problems.append(malformed)
                schema_ok = False
            if keep:
                records.append(record)
            if visit is not None and malformed is None:  # a visitor sees well-formed records
                visit(record, Locator(offset, length, sha))
    _check_head(root, hashes, problems, warnings, snapshot)
    return ChainReport(
        not problems,
        tuple(problems),
        tuple(warnings),
        tuple(records),
        head,
        torn_tail=torn,
        schema_ok=schema_ok,
        count=len(hashes),
        live=live,
        size=size,
    )


def _record(line: bytes | None, where: str, problems: list[str]) -> dict[str, Any] | None:
    """One line as a record of the chain, or None (with the problem) when it is not one."""
    if line is None:
        problems.append(f"{where}: longer than the limit of {MAX_LINE_BYTES} bytes (not read)")
        return None
    try:
        record = json.loads(line.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        problems.append(f"{where}: not a JSON line")
        return None
    if not isinstance(record, dict):
        problems.append(f"{where}: not a JSON object")
        return None
    if not is_canonical(record, line):
        problems.append(f"{where}: not canonical JSON (the line was rewritten)")
    if record.get("format") != JOURNAL_FORMAT:
        problems.append(f"{where}: field format: expected {JOURNAL_FORMAT}")
    number = int(where.rsplit(":", 1)[1])
    if record.get("n") != number - 1:
        problems.append(f"{where}: field n: expected {number - 1}, found {record.get('n')!r}")
    return record


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _read_head(root: Path) -> tuple[int, str] | str | None:
    """The head file's (records, sha256), a problem line, or None when there is none."""
    path = root / HEAD_NAME
    if not os.path.lexists(path):
        return None
    try:
        with open_read(path) as fh:
            data = fh.read(4096)
        saved = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
        saved_count, saved_hash = saved["records"], saved["sha256"]
        if not isinstance(saved_count, int) or not isinstance(saved_hash, str):
            raise TypeError("records must be an integer and sha256 a string")
    except (ValueError, KeyError, TypeError, RecursionError):
        return f"{path}: unreadable (not the documented head record)"
    except NeedlepointError as exc:
        return str(exc)
    except OSError as exc:
        return f"{path}: cannot read ({exc.strerror})"
    return saved_count, saved_hash


def _check_head(
    root: Path,
    hashes: list[str],
    problems: list[str],
    warnings: list[str],
    snapshot: tuple[int, str] | str | None,
) -> None:
    path = root / HEAD_NAME
    live = snapshot is not None
    saved = snapshot if live else _read_head(root)
    if saved == "missing":
        saved = None
    if saved is None:
        if hashes:
            problems.append(f"{path}: missing, so deleted final records cannot be ruled out")
        return
    if isinstance(saved, str):
        problems.append(saved)
        return
    saved_count, saved_hash = saved
    chain = [GENESIS, *hashes]  # chain[k] is the head after k records
    if (saved_count, saved_hash) == (len(hashes), chain[-1]):
        return
    if live and 0 <= saved_count <= len(hashes) and chain[saved_count] == saved_hash:
        # Read while a runner appends: the head, read first, names a record of this chain.
        warnings.append(
            f"{path}: a runner is writing this folder; read {len(hashes)} records, "
            f"{len(hashes) - saved_count} after the head it had written"
        )
        return
    if saved_count == len(hashes) - 1 and chain[saved_count] == saved_hash:
        # A crash between the journal append and the head update leaves it one record behind.
        warnings.append(f"{path}: one record behind the journal (a crash between two writes)")
        return
    problems.append(
        f"{path}: says {saved_count} records ending {saved_hash[:12]}, the journal has "
        f"{len(hashes)} ending {chain[-1][:12]} (records deleted or edited)"
    )


def read_line(run_dir: str | os.PathLike[str], at: Locator) -> dict[str, Any]:
    """The record at ``at``, read again (and checked against its hash) for its whole text."""
    path = Path(run_dir) / JOURNAL_NAME
    with open_read(path) as fh:
        fh.seek(at.offset)
        line = fh.read(at.size)
    if sha256_hex(line) != at.sha256:
        raise NeedlepointError(f"{path}: changed while it was read (byte {at.offset})")
    record: dict[str, Any] = json.loads(line.decode("utf-8"))
    return record
