"""The journal: a write-ahead, hash-chained JSONL file, the run folder's only source of truth,
and the one walk through it that every reader shares.

Every record is one canonical JSON line that carries ``prev``, the SHA-256 of the previous
line's bytes (without its newline), and ``n``, its index; so editing, deleting or reordering any
record breaks the chain. The last record is not followed by anything, so ``journal.head.json``
holds the record count and final hash: deleting records from the end is visible too. Every
append is flushed and fsynced before the caller acts on it.

Readers stream the journal one line at a time (memory bounded by MAX_LINE_BYTES, not by the
file) and fold each well-formed record into a ``JournalState`` (``walk``): the runner, the audit,
``results`` and every later stage read what a journal says from that one fold. A reader takes
the folder lock shared; while a runner holds it, the reader reads a consistent snapshot (the
head first, then the journal up to its last complete line), so records appended meanwhile are
never mistaken for tampering.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes, is_canonical, refuse_constant, sha256_hex
from needlepoint.run.clock import parse_iso_utc
from needlepoint.run.records import (
    AttemptRecord,
    OutcomeSummary,
    SessionRecord,
    StopRecord,
    record_problem,
)
from needlepoint.safeio import open_append, open_read, open_record, shared_lock
from needlepoint.schema import field_names

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


@dataclass
class JournalState:
    """What a journal says, folded record by record, in order: every attempt, each outcome as an
    ``OutcomeSummary``, the sessions and stops, and the running totals. Bodies and headers are
    never kept, so the memory of reading a journal never grows with its bodies. The runner counts
    its allowance from this fold, and every reader derives what it shows from the same one."""

    attempts: dict[int, AttemptRecord] = field(default_factory=dict)  # the first of each seq
    outcomes: dict[int, OutcomeSummary] = field(default_factory=dict)  # the first of each seq
    sent: list[AttemptRecord] = field(default_factory=list)  # every attempt, in journal order
    sessions: dict[int, SessionRecord] = field(default_factory=dict)  # by journal line
    stops: dict[int, StopRecord] = field(default_factory=dict)  # by journal line
    records: int = 0
    attempt_count: int = 0
    outcome_count: int = 0
    last_done_text: str | None = None  # time of the latest outcome
    last_time_text: str | None = None  # latest time in any record
    spent: float = 0.0
    unknown_cost: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, records: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> JournalState:
        state = cls()
        for record in records:
            state.add(record)
        return state

    def add(self, record: dict[str, Any], at: Locator | None = None) -> None:
        """Fold one record (schema-checked, or written by the runner itself)."""
        kind = record.get("type")
        self.records += 1
        if "time" in record:
            self.last_time_text = record["time"]
        if kind == "session":
            fields = {name: record.get(name) for name in field_names(SessionRecord)}
            self.sessions[record.get("n")] = SessionRecord(**fields)  # type: ignore[index]
        elif kind == "stop":
            self.stops[record.get("n")] = StopRecord.of(record)  # type: ignore[index]
        elif kind == "attempt":
            self.attempt_count += 1
            attempt = AttemptRecord.of(record)
            self.attempts.setdefault(attempt.seq, attempt)
            self.sent.append(attempt)
        elif kind == "outcome":
            self.outcome_count += 1
            self.outcomes.setdefault(record.get("seq"), OutcomeSummary.of(record, at))  # type: ignore[arg-type]
            self.last_done_text = record.get("time")
            cost = record.get("cost")
            if isinstance(cost, int | float) and not isinstance(cost, bool):
                self.spent += cost
            else:
                self.unknown_cost.append(record.get("seq"))  # type: ignore[arg-type]

    @property
    def last_done(self) -> float | None:
        """Wall (or simulated) time of the latest outcome, in epoch seconds."""
        return None if self.last_done_text is None else parse_iso_utc(self.last_done_text)

    @property
    def last_time(self) -> float | None:
        return None if self.last_time_text is None else parse_iso_utc(self.last_time_text)

    @property
    def dangling(self) -> list[int]:
        """Seqs attempted without an outcome: the process died while they were in flight."""
        return [s for s in self.attempts if s not in self.outcomes]

    def counts(self) -> dict[str, int]:
        return dict(Counter(r.status for r in self.outcomes.values()))

    def why_unknown(self, seq: int) -> str:
        """Why the cost of an outcome is unknown, for the stop line."""
        outcome = self.outcomes.get(seq)
        if outcome is None or not outcome.has_usage:
            return "no usage in the response"
        return "its usage has no integer prompt_tokens and completion_tokens"

    def timeline(self) -> list[dict[str, Any]]:
        """Each record's type and time, with its seq or session number, in journal order: the
        journal without its bodies (the first outcome of a seq stands for any later one)."""
        lines: list[tuple[Any, dict[str, Any]]] = []
        for n, s in self.sessions.items():
            lines.append((n, {"type": "session", "time": s.time, "session": s.session}))
        for a in self.sent:
            lines.append((a.n, {"type": "attempt", "time": a.time, "seq": a.seq}))
        for o in self.outcomes.values():
            lines.append((o.n, {"type": "outcome", "time": o.time, "seq": o.seq}))
        for n, stop in self.stops.items():
            lines.append((n, {"type": "stop", "time": stop.time}))
        return [line for _, line in sorted(lines, key=lambda x: x[0])]


@dataclass(frozen=True)
class Walked:
    """A journal read once: how its chain reads, and what its records say."""

    chain: ChainReport
    state: JournalState
    reached: bool = True  # with ``upto``: whether a record of the chain hashed to it

    def checked(self) -> Walked:
        """This walk, or the first problem of a broken chain as the refusal."""
        if not self.chain.ok:
            raise NeedlepointError(f"journal chain broken: {self.chain.problems[0]}")
        return self


def walk(
    run_dir: str | os.PathLike[str], *, owner: bool = False, upto: str | None = None
) -> Walked:
    """Read the journal once, folding every well-formed record into one ``JournalState``.

    ``upto``: fold only up to the record whose line hashes to it (an earlier head), as the
    journal stood then; ``owner``: the runner that holds the folder lock reads it.
    """
    state = JournalState()
    if upto is None:
        return Walked(read_chain(run_dir, state.add, keep=False, owner=owner), state)
    reached: list[bool] = []

    def visit(record: dict[str, Any], at: Locator) -> None:
        if not reached:
            state.add(record, at)
            if at.sha256 == upto:
                reached.append(True)

    chain = read_chain(run_dir, visit, keep=False, owner=owner)
    return Walked(chain, state, bool(reached))


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
        record = json.loads(line.decode("utf-8"), parse_constant=refuse_constant)
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


def _read_head(root: Path) -> tuple[int, str] | str | None:
    """The head file's (records, sha256), a problem line, or None when there is none."""
    path = root / HEAD_NAME
    if not os.path.lexists(path):
        return None
    unreadable = f"{path}: unreadable (not the documented head record)"
    try:
        with open_read(path) as fh:
            data = fh.read(4096)
        saved = json.loads(data.decode("utf-8"), parse_constant=refuse_constant)
        saved_count, saved_hash = saved["records"], saved["sha256"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return unreadable
    except NeedlepointError as exc:
        return str(exc)
    except OSError as exc:
        return f"{path}: cannot read ({exc.strerror})"
    # JSON's true is an int to Python: the head counts records with a JSON integer, never a bool.
    if type(saved_count) is not int or not isinstance(saved_hash, str):
        return unreadable
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
        walked = walk(self.run_dir, owner=True).checked()
        self.state, report = walked.state, walked.chain
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
            if len(data) != self._head_len:  # a longer old head loses its tail
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
