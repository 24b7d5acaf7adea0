"""Write-ahead, hash-chained JSONL journal: the run folder's only source of truth.

Every record is one canonical JSON line that carries ``prev``, the SHA-256 of the previous
line's bytes (without its newline), and ``n``, its index; so editing, deleting or reordering any
record breaks the chain. The last record is not followed by anything, so ``journal.head.json``
holds the record count and final hash: deleting records from the end is visible too. Every
append is flushed and fsynced before the caller acts on it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes, sha256_hex
from needlepoint.run.journal_schema import record_problem

JOURNAL_FORMAT = 1
JOURNAL_NAME = "journal.jsonl"
HEAD_NAME = "journal.head.json"
GENESIS = "0" * 64


def record_hash(record: dict[str, Any]) -> str:
    """The hash the next record's ``prev`` must carry."""
    return sha256_hex(canonical_bytes(record))


@dataclass(frozen=True)
class ChainReport:
    """What reading a journal found. ``records`` holds the lines that parsed, in file order."""

    ok: bool
    problems: tuple[str, ...]
    warnings: tuple[str, ...]
    records: tuple[dict[str, Any], ...]
    head: str
    torn_tail: bytes = b""
    # Every line is a JSON object of the documented schema: records can be walked safely.
    schema_ok: bool = True


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_chain(run_dir: str | os.PathLike[str]) -> ChainReport:
    """Read ``journal.jsonl`` and check the chain, the line encoding and the head file."""
    root = Path(run_dir)
    path = root / JOURNAL_NAME
    problems: list[str] = []
    warnings: list[str] = []
    records: list[dict[str, Any]] = []
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    except OSError as exc:
        raise NeedlepointError(f"{path}: cannot read ({exc.strerror})") from None
    lines = data.split(b"\n")
    torn = lines.pop()  # bytes after the last newline: empty unless a write was cut short
    if torn:
        warnings.append(
            f"{path}:{len(lines) + 1}: incomplete last line ({len(torn)} bytes, a crash during "
            "a write); the next run records its hash and drops it"
        )
    head = GENESIS
    hashes: list[str] = []
    schema_ok = True
    for number, line in enumerate(lines, start=1):
        where = f"{path}:{number}"
        try:
            record = json.loads(line.decode("utf-8"), parse_constant=_no_constant)
        except (UnicodeDecodeError, ValueError, RecursionError):
            problems.append(f"{where}: not a JSON line")
            head = sha256_hex(line)
            hashes.append(head)
            continue
        if not isinstance(record, dict):
            problems.append(f"{where}: not a JSON object")
            head = sha256_hex(line)
            hashes.append(head)
            continue
        if canonical_bytes(record) != line:
            problems.append(f"{where}: not canonical JSON (the line was rewritten)")
        if record.get("format") != JOURNAL_FORMAT:
            problems.append(f"{where}: field format: expected {JOURNAL_FORMAT}")
        if record.get("n") != number - 1:
            problems.append(f"{where}: field n: expected {number - 1}, found {record.get('n')!r}")
        if record.get("prev") != head:
            problems.append(
                f"{where}: field prev does not match the previous record "
                "(a record was edited, deleted or moved)"
            )
        malformed = record_problem(record, where)
        if malformed:
            problems.append(malformed)
            schema_ok = False
        records.append(record)
        head = sha256_hex(line)
        hashes.append(head)
    _check_head(root, hashes, problems, warnings)
    return ChainReport(
        not problems,
        tuple(problems),
        tuple(warnings),
        tuple(records),
        head,
        torn_tail=torn,
        schema_ok=schema_ok and len(records) == len(lines),
    )


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _check_head(root: Path, hashes: list[str], problems: list[str], warnings: list[str]) -> None:
    path = root / HEAD_NAME
    if not path.exists():
        if hashes:
            problems.append(f"{path}: missing, so deleted final records cannot be ruled out")
        return
    try:
        saved = json.loads(path.read_text("utf-8"), parse_constant=_no_constant)
        saved_count, saved_hash = saved["records"], saved["sha256"]
        if not isinstance(saved_count, int) or not isinstance(saved_hash, str):
            raise TypeError("records must be an integer and sha256 a string")
    except (ValueError, KeyError, TypeError, RecursionError):
        problems.append(f"{path}: unreadable (not the documented head record)")
        return
    except OSError as exc:
        problems.append(f"{path}: cannot read ({exc.strerror})")
        return
    chain = [GENESIS, *hashes]  # chain[k] is the head after k records
    if (saved_count, saved_hash) == (len(hashes), chain[-1]):
        return
    if saved_count == len(hashes) - 1 and chain[saved_count] == saved_hash:
        # A crash between the journal append and the head update leaves it one record behind.
        warnings.append(f"{path}: one record behind the journal (a crash between two writes)")
        return
    problems.append(
        f"{path}: says {saved_count} records ending {saved_hash[:12]}, the journal has "
        f"{len(hashes)} ending {chain[-1][:12]} (records deleted or edited)"
    )


@dataclass
class Journal:
    """An open journal for appending. Opening refuses a broken chain."""

    run_dir: Path
    fsync: bool = True
    records: list[dict[str, Any]] = field(default_factory=list)
    head: str = GENESIS
    dropped_tail: bytes = b""
    _head_fd: int | None = field(default=None, repr=False)
    _head_len: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        self.run_dir = Path(self.run_dir)
        self.path = self.run_dir / JOURNAL_NAME
        report = read_chain(self.run_dir)
        if not report.ok:
            raise NeedlepointError(f"journal chain broken: {report.problems[0]}")
        self.records = list(report.records)
        self.head = report.head
        # Our own crash recovery: a cut last line never became a record. It is cut off only
        # when the next record is appended, which must carry its hash (the session record
        # does), so a refused resume leaves the journal's bytes exactly as they were.
        self.dropped_tail = report.torn_tail
        self._tail_pending = bool(report.torn_tail)
        new = not self.path.exists()
        self._fh = open(self.path, "ab")  # noqa: SIM115 -- held open for the run's lifetime
        if new:
            if self.fsync:
                os.fsync(self._fh.fileno())
                _fsync_dir(self.run_dir)
            self._write_head()

    def _cut_torn_tail(self, fields: dict[str, Any]) -> None:
        if "dropped_tail_sha256" not in fields:
            raise NeedlepointError("the first record after a torn tail must record its hash")
        with open(self.path, "r+b") as fh:
            fh.truncate(self.path.stat().st_size - len(self.dropped_tail))
            os.fsync(fh.fileno())
        self._tail_pending = False

    @property
    def count(self) -> int:
        return len(self.records)

    def append(self, type_: str, **fields: Any) -> dict[str, Any]:
        """Append one record durably and return it."""
        record = {"format": JOURNAL_FORMAT, "n": self.count, "prev": self.head, "type": type_}
        record.update(fields)
        line = canonical_bytes(record)
        if self._tail_pending:
            self._cut_torn_tail(fields)
        self._fh.write(line + b"\n")
        self._fh.flush()
        if self.fsync:
            os.fsync(self._fh.fileno())
        self.records.append(record)
        self.head = sha256_hex(line)
        self._write_head()
        return record

    def _write_head(self) -> None:
        # Overwritten in place: a rename per record costs milliseconds on some filesystems,
        # and the content only ever grows, so one small pwrite at offset 0 replaces it whole.
        data = (
            canonical_bytes({"format": JOURNAL_FORMAT, "records": self.count, "sha256": self.head})
            + b"\n"
        )
        if self._head_fd is None:
            self._head_fd = os.open(self.run_dir / HEAD_NAME, os.O_RDWR | os.O_CREAT, 0o644)
            self._head_len = os.fstat(self._head_fd).st_size
        os.pwrite(self._head_fd, data, 0)
        if len(data) < self._head_len:
            os.ftruncate(self._head_fd, len(data))
        self._head_len = len(data)
        if self.fsync:
            os.fsync(self._head_fd)

    def close(self) -> None:
        self._fh.close()
        if self._head_fd is not None:
            os.close(self._head_fd)
            self._head_fd = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
