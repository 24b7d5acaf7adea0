"""Write-ahead, hash-chained JSONL journal: the run folder's only source of truth.

Every record is one canonical JSON line that carries ``prev``, the SHA-256 of the previous
line's bytes (without its newline), and ``n``, its index; so editing, deleting or reordering any
record breaks the chain. The last record is not followed by anything, so ``journal.head.json``
holds the record count and final hash: deleting records from the end is visible too. Every
append is flushed and fsynced before the caller acts on it.

Readers stream the journal one line at a time (memory bounded by MAX_LINE_BYTES, not by the
file), and read a consistent snapshot while a runner appends (``reader_lock``).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes, sha256_hex
from needlepoint.run.journal_read import (
    GENESIS,
    HEAD_NAME,
    JOURNAL_FORMAT,
    JOURNAL_NAME,
    LOCK_NAME,
    MAX_LINE_BYTES,
    ChainReport,
    Locator,
    read_chain,
    read_line,
    reader_lock,
)
from needlepoint.run.journal_records import JournalState
from needlepoint.safeio import open_append, open_record

__all__ = [
    "GENESIS",
    "HEAD_NAME",
    "JOURNAL_FORMAT",
    "JOURNAL_NAME",
    "LOCK_NAME",
    "MAX_LINE_BYTES",
    "ChainReport",
    "Journal",
    "Locator",
    "read_chain",
    "read_line",
    "reader_lock",
    "record_hash",
]


def record_hash(record: dict[str, Any]) -> str:
    """The hash the next record's ``prev`` must carry."""
    return sha256_hex(canonical_bytes(record))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class Journal:
    """An open journal for appending. Opening refuses a broken chain.

    It keeps the folded totals (``state``), never the records themselves, so a long run's
    memory does not grow with the bodies it has journalled.
    """

    run_dir: Path
    fsync: bool = True
    state: JournalState = field(default_factory=JournalState)
    count: int = 0
    head: str = GENESIS
    dropped_tail: bytes = b""
    _head_fd: int | None = field(default=None, repr=False)
    _head_len: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        self.run_dir = Path(self.run_dir)
        self.path = self.run_dir / JOURNAL_NAME
        report = read_chain(self.run_dir, self.state.add, keep=False, owner=True)
        if not report.ok:
            raise NeedlepointError(f"journal chain broken: {report.problems[0]}")
        self.count = report.count
        self.head = report.head
        # Our own crash recovery: a cut last line never became a record. It is cut off only
        # when the next record is appended, which must carry its hash (the session record
        # does), so a refused resume leaves the journal's bytes exactly as they were.
        self.dropped_tail = report.torn_tail
        # The size to cut the file back to before the next record, or None once nothing is torn.
        self._cut_at: int | None = report.size if report.torn_tail else None
        new = not os.path.lexists(self.path)
        self._fh = open_append(self.path)
        if new:
            if self.fsync:
                os.fsync(self._fh.fileno())
                _fsync_dir(self.run_dir)
            self._write_head()

    def _cut_torn_tail(self, fields: dict[str, Any]) -> None:
        if "dropped_tail_sha256" not in fields:
            raise NeedlepointError("the first record after a torn tail must record its hash")
        fd = open_record(self.path, os.O_WRONLY)
        try:
            os.ftruncate(fd, self._cut_at)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._cut_at = None

    def append(self, type_: str, **fields: Any) -> dict[str, Any]:
        """Append one record durably and return it."""
        record = {"format": JOURNAL_FORMAT, "n": self.count, "prev": self.head, "type": type_}
        record.update(fields)
        line = canonical_bytes(record)
        if self._cut_at is not None:
            self._cut_torn_tail(fields)
        try:
            self._fh.write(line + b"\n")
            self._fh.flush()
            if self.fsync:
                os.fsync(self._fh.fileno())
        except OSError as exc:
            raise NeedlepointError(f"{self.path}: cannot append ({exc.strerror})") from None
        self.state.add(record)
        self.count += 1
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
        path = self.run_dir / HEAD_NAME
        try:
            if self._head_fd is None:
                self._head_fd = open_record(path, os.O_RDWR | os.O_CREAT)
                self._head_len = os.fstat(self._head_fd).st_size
            os.pwrite(self._head_fd, data, 0)
            if len(data) < self._head_len:
                os.ftruncate(self._head_fd, len(data))
            self._head_len = len(data)
            if self.fsync:
                os.fsync(self._head_fd)
        except OSError as exc:
            raise NeedlepointError(f"{path}: cannot write ({exc.strerror})") from None

    def close(self) -> None:
        # A record that failed to append (a full disk) was reported then; closing must not
        # report it again in place of that line.
        with contextlib.suppress(OSError):
            self._fh.close()
        if self._head_fd is not None:
            os.close(self._head_fd)
            self._head_fd = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
