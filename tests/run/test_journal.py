"""The hash chain notices every edit, deletion, reordering and truncation; its rules one by one,
with the exact problem each break reports; and the fold every reader shares.

The first tests show that edits, deletions and reorderings are caught at all; the rules' tests pin
which rule fires, the line it names and the words a reader gets, and the head file's edge cases
(one record behind is a warning, anything else a problem), so no rule can weaken unnoticed.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes, sha256_hex
from needlepoint.run import journal as jmod
from needlepoint.run.folder import FolderLock
from needlepoint.run.journal import (
    GENESIS,
    HEAD_NAME,
    JOURNAL_NAME,
    Journal,
    read_chain,
    walk,
)
from needlepoint.run.records import AttemptRecord


def _hash(record: dict) -> str:
    """The hash the next record's ``prev`` must carry."""
    return sha256_hex(canonical_bytes(record))


def attempt(seq, **extra):
    """The fields of a schema-valid attempt record."""
    t = "2026-01-01T00:00:00.000000Z"
    return {"seq": seq, "request_sha256": "a" * 64, "time": t, "gap_s": None, **extra}


SESSION = {
    "session": 2,
    "time": "2026-01-01T00:00:00.000000Z",
    "run_json_sha256": "b" * 64,
    "package_version": "0.1.0",
    "allow": 4,
    "min_gap_s": 0,
    "override_reason": "test",
    "timeout_s": 1,
    "deadline_s": 2,
    "input_rate": None,
    "output_rate": None,
    "cost_cap": None,
}


def make(tmp_path, n=4, fsync=False):
    with Journal(tmp_path, fsync=fsync) as j:
        for i in range(n):
            j.append("attempt", **attempt(i + 1, note="日本\u00a0"))
    return tmp_path


def lines(run):
    return (run / JOURNAL_NAME).read_bytes().splitlines(keepends=True)


def test_roundtrip_and_chain(tmp_path):
    run = make(tmp_path)
    report = read_chain(run)
    assert report.ok and not report.warnings
    assert [r["seq"] for r in report.records] == [1, 2, 3, 4]
    assert report.records[0]["prev"] == GENESIS
    for a, b in zip(report.records, report.records[1:], strict=False):
        assert b["prev"] == _hash(a)
    head = json.loads((run / HEAD_NAME).read_text())
    assert head == {"format": 1, "records": 4, "sha256": report.head}


def test_reopen_continues_the_chain(tmp_path):
    run = make(tmp_path, 2)
    with Journal(run, fsync=False) as j:
        assert j.count == 2
        j.append("attempt", **attempt(3))
    report = read_chain(run)
    assert report.ok and [r["n"] for r in report.records] == [0, 1, 2]


def test_every_append_is_fsynced(tmp_path, monkeypatch):
    calls = []
    real = os.fsync
    monkeypatch.setattr(jmod.os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    with Journal(tmp_path, fsync=True) as j:
        before = len(calls)
        j.append("attempt", **attempt(1))
        # One for the journal line, one for the head file.
        assert len(calls) - before == 2


def test_empty_folder_is_an_empty_chain(tmp_path):
    report = read_chain(tmp_path)
    assert report.ok and report.records == () and report.head == GENESIS


def _rewrite(run, new_lines):
    (run / JOURNAL_NAME).write_bytes(b"".join(new_lines))


def test_edited_record_is_detected(tmp_path):
    run = make(tmp_path)
    ls = lines(run)
    ls[1] = ls[1].replace(b'"seq":2', b'"seq":9')
    _rewrite(run, ls)
    report = read_chain(run)
    assert not report.ok
    assert any(":3: field prev" in p for p in report.problems)


def test_deleted_record_is_detected(tmp_path):
    run = make(tmp_path)
    ls = lines(run)
    del ls[1]
    _rewrite(run, ls)
    assert not read_chain(run).ok


def test_reordered_records_are_detected(tmp_path):
    run = make(tmp_path)
    ls = lines(run)
    ls[1], ls[2] = ls[2], ls[1]
    _rewrite(run, ls)
    assert not read_chain(run).ok


def test_deleted_tail_is_detected_by_the_head(tmp_path):
    run = make(tmp_path)
    _rewrite(run, lines(run)[:-1])
    report = read_chain(run)
    assert not report.ok and HEAD_NAME in report.problems[0]


def test_missing_head_is_a_problem(tmp_path):
    run = make(tmp_path)
    (run / HEAD_NAME).unlink()
    assert not read_chain(run).ok


def test_non_canonical_rewrite_is_detected(tmp_path):
    run = make(tmp_path, 1)
    record = json.loads(lines(run)[0])
    (run / JOURNAL_NAME).write_text(json.dumps(record) + "\n")
    report = read_chain(run)
    assert any("not canonical" in p for p in report.problems)


def test_head_one_behind_is_only_a_warning(tmp_path):
    run = make(tmp_path, 3)
    report = read_chain(run)
    (run / HEAD_NAME).write_text(
        json.dumps({"format": 1, "records": 2, "sha256": _hash(report.records[1])})
    )
    report = read_chain(run)
    assert report.ok and "one record behind" in report.warnings[0]


def test_torn_tail_is_dropped_on_reopen(tmp_path):
    run = make(tmp_path, 2)
    with open(run / JOURNAL_NAME, "ab") as fh:
        fh.write(b'{"format":1,"n":2,"pr')
    report = read_chain(run)
    assert report.ok and "incomplete last line" in report.warnings[0]
    with Journal(run, fsync=False) as j:
        assert j.dropped_tail == b'{"format":1,"n":2,"pr'
        j.append("session", **SESSION, dropped_tail_sha256=jmod.sha256_hex(j.dropped_tail))
    assert read_chain(run).ok and read_chain(run).warnings == ()


def test_torn_tail_stays_until_a_record_carries_its_hash(tmp_path):
    run = make(tmp_path, 2)
    with open(run / JOURNAL_NAME, "ab") as fh:
        fh.write(b'{"format":1,"n":2,"pr')
    before = (run / JOURNAL_NAME).read_bytes()
    with Journal(run, fsync=False) as j:
        assert j.dropped_tail
    assert (run / JOURNAL_NAME).read_bytes() == before, "opening alone must not repair"
    with Journal(run, fsync=False) as j, pytest.raises(NeedlepointError, match="its hash"):
        j.append("attempt", **attempt(3))
    assert (run / JOURNAL_NAME).read_bytes() == before


def test_mistyped_records_fail_the_schema(tmp_path):
    with Journal(tmp_path, fsync=False) as j:
        j.append("attempt", **attempt(1))
        j.append("attempt", **{**attempt(2), "time": 5})
        j.append("outcome", seq="x")
        j.append("stop", time="2026-01-01T00:00:00Z", reason="complete", detail=[])
    report = read_chain(tmp_path)
    assert not report.ok and report.schema_ok is False
    where = tmp_path / JOURNAL_NAME  # each problem names the line it is on
    assert list(report.problems) == [
        f"{where}:2: field time: expected a string, found a number",
        f"{where}:3: field seq: expected an integer, found a string",
        f"{where}:4: field detail: expected a string, found a list",
    ]


def test_deeply_nested_line_is_not_json(tmp_path):
    run = make(tmp_path, 1)
    with open(run / JOURNAL_NAME, "ab") as fh:
        fh.write(b"[" * 100_000 + b"\n")
    assert any(":2: not a JSON line" in p for p in read_chain(run).problems)


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_a_line_holding_a_non_json_number_is_not_json(tmp_path, constant):
    # Python's json reads NaN and Infinity by default; the journal, like every strict reader,
    # refuses them (jsonio.refuse_constant).
    run = make(tmp_path, 1)
    with open(run / JOURNAL_NAME, "ab") as fh:
        fh.write(b'{"n": 1, "x": ' + constant + b"}\n")
    assert any(":2: not a JSON line" in p for p in read_chain(run).problems)


def test_broken_chain_refuses_to_open(tmp_path):
    run = make(tmp_path)
    _rewrite(run, lines(run)[1:])
    with pytest.raises(NeedlepointError, match="journal chain broken"):
        Journal(run, fsync=False)


def test_garbage_line_is_named(tmp_path):
    run = make(tmp_path, 2)
    ls = lines(run)
    ls.insert(1, b"garbage\n")
    _rewrite(run, ls)
    report = read_chain(run)
    assert any(":2: not a JSON line" in p for p in report.problems)


def test_a_folder_with_colons_in_its_name_reads_its_line_numbers_right(tmp_path):
    # Each problem names "path:line"; the line number is read back from the right, since a
    # folder may be called "run:2026-12-07 10:00".
    run = tmp_path / "run:2026-12-07 10:00"
    run.mkdir()
    make(run, 3)
    assert read_chain(run).problems == ()
    ls = lines(run)
    del ls[1]
    _rewrite(run, ls)
    assert f"{run / JOURNAL_NAME}:2: field n: expected 1, found 2" in read_chain(run).problems


def test_a_line_past_the_limit_is_named_with_the_limit_and_not_read(tmp_path, monkeypatch):
    run = make(tmp_path, 2)
    ls = lines(run)
    limit = max(len(line) for line in ls) + 8
    monkeypatch.setattr(jmod, "MAX_LINE_BYTES", limit)
    ls.insert(1, b"x" * (limit + 40) + b"\n")
    _rewrite(run, ls)
    problems = read_chain(run).problems
    where = f"{run / JOURNAL_NAME}:2"
    assert problems[0] == f"{where}: longer than the limit of {limit} bytes (not read)"


def test_a_torn_last_line_past_the_limit_is_a_problem_naming_its_size(tmp_path, monkeypatch):
    """A torn tail short enough to read is a crash's leftover (a warning, dropped by the next
    run); one past the limit was never a record being written, so it is a problem."""
    run = make_plain(tmp_path, 2)
    limit = max(len(line) for line in line_list(run)) + 8
    monkeypatch.setattr(jmod, "MAX_LINE_BYTES", limit)
    with open(run / JOURNAL_NAME, "ab") as fh:
        fh.write(b"x" * (limit + 5))
    assert read_chain(run).problems == (
        f"{run / JOURNAL_NAME}:3: an incomplete last line of {limit + 5} bytes",
    )


def test_a_clean_journal_is_schema_ok_and_an_absent_one_is_empty(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    run = make_plain(tmp_path / "run", 2)
    report = read_chain(run)
    assert report.ok and report.schema_ok and report.count == 2
    assert report.size == (run / JOURNAL_NAME).stat().st_size
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = read_chain(empty)  # no journal yet: no records, no bytes, nothing wrong
    assert (nothing.ok, nothing.schema_ok, nothing.count, nothing.size) == (True, True, 0, 0)
    assert nothing.head == GENESIS


def test_lines_at_the_limit_are_read_and_one_byte_past_it_only_hashed(monkeypatch):
    import hashlib
    import io

    monkeypatch.setattr(jmod, "MAX_LINE_BYTES", 8)

    def read(data: bytes) -> list[tuple]:
        return list(jmod._lines(io.BytesIO(data)))

    def sha(b: bytes) -> str:
        return hashlib.sha256(b).hexdigest()

    at, past = b"a" * 8, b"b" * 9
    # whole lines: at the limit read, one byte past it hashed and sized, never held
    assert read(at + b"\n" + past + b"\nz\n") == [
        (0, at, sha(at), 8, True),
        (9, None, sha(past), 9, True),
        (19, b"z", sha(b"z"), 1, True),
    ]
    # past the limit, the rest of the line is hashed up to its newline, not one byte short
    far = b"c" * 11
    assert read(far + b"\n") == [(0, None, sha(far), 11, True)]
    # a torn tail (no newline) at the limit is read; one past it, or far past it, is not whole
    assert read(at) == [(0, at, sha(at), 8, False)]
    assert read(past) == [(0, None, sha(past), 9, False)]
    assert read(past * 3) == [(0, None, sha(past * 3), 27, False)]


def test_the_rest_of_a_long_line_is_read_in_chunks_of_one_mib_at_most():
    """Memory stays bounded however long the line: never a readline without a limit."""
    import io

    asked: list[int | None] = []

    class Recording(io.BytesIO):
        def readline(self, size: int | None = -1) -> bytes:
            asked.append(size)
            return super().readline(size)

    long = b"x" * (jmod.MAX_LINE_BYTES + 3 * (1 << 20)) + b"\n"
    [(_, line, _, size, whole)] = list(jmod._lines(Recording(long)))
    assert line is None and size == len(long) - 1 and whole
    # the line's first MAX_LINE_BYTES + 1, its rest a MiB at a time, then the next line's start
    assert asked == [jmod.MAX_LINE_BYTES + 1, *[1 << 20] * 3, jmod.MAX_LINE_BYTES + 1]


def test_a_failed_append_or_head_write_is_one_line_naming_the_file(tmp_path, monkeypatch):
    with Journal(tmp_path, fsync=False) as j:
        j.append("attempt", **attempt(1))

        def full(*_):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(j._fh, "write", full)
        with pytest.raises(NeedlepointError) as err:
            j.append("attempt", **attempt(2))
        assert str(err.value) == f"{j.path}: cannot append (No space left on device)"
        monkeypatch.undo()
        monkeypatch.setattr(jmod.os, "pwrite", full)
        with pytest.raises(NeedlepointError) as err:
            j.append("attempt", **attempt(3))
        head = tmp_path / jmod.HEAD_NAME
        assert str(err.value) == f"{head}: cannot write (No space left on device)"


def test_closing_after_a_failed_flush_reports_nothing_more(tmp_path, monkeypatch):
    j = Journal(tmp_path, fsync=False)
    j.append("attempt", **attempt(1))

    def full():
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(j._fh, "close", full)
    j.close()  # the failed record was reported when it was appended; close stays quiet
    assert j._head_fd is None


# Every record read back is checked against the journal schema, so the chain rules are pinned
# on schema-valid attempts: only the rule under test may fire.
TIME = "2026-01-01T00:00:00.000000Z"
RULES_SESSION = {
    "session": 2,
    "time": TIME,
    "run_json_sha256": "b" * 64,
    "package_version": "0.1.0",
    "allow": 4,
    "min_gap_s": 0,
    "override_reason": None,
    "timeout_s": 1,
    "deadline_s": 2,
    "input_rate": None,
    "output_rate": None,
    "cost_cap": None,
}


def plain_attempt(seq: int) -> dict:
    return {"seq": seq, "request_sha256": "a" * 64, "time": TIME, "gap_s": None}


def make_plain(run: Path, n: int = 3) -> Path:
    with Journal(run, fsync=False) as j:
        for i in range(n):
            j.append("attempt", **plain_attempt(i + 1))
    return run


def line_list(run: Path) -> list[bytes]:
    return (run / JOURNAL_NAME).read_bytes().split(b"\n")[:-1]


def write(run: Path, new: list[bytes], tail: bytes = b"") -> None:
    (run / JOURNAL_NAME).write_bytes(b"".join(x + b"\n" for x in new) + tail)


def set_head(run: Path, records: int, sha: str) -> None:
    (run / HEAD_NAME).write_text(json.dumps({"format": 1, "records": records, "sha256": sha}))


def test_a_good_chain_reports_each_record_and_its_head(tmp_path: Path) -> None:
    run = make_plain(tmp_path)
    report = read_chain(run)
    assert (report.ok, report.problems, report.warnings, report.torn_tail) == (True, (), (), b"")
    assert [r["n"] for r in report.records] == [0, 1, 2]
    assert [r["type"] for r in report.records] == ["attempt"] * 3
    assert all(r["format"] == 1 for r in report.records)
    assert report.head == sha256_hex(line_list(run)[-1])
    head = (run / HEAD_NAME).read_bytes()
    assert head == canonical_bytes({"format": 1, "records": 3, "sha256": report.head}) + b"\n"


def test_each_record_chains_to_the_bytes_of_the_line_before(tmp_path: Path) -> None:
    run = make_plain(tmp_path)
    records = read_chain(run).records
    assert records[0]["prev"] == GENESIS == "0" * 64
    assert [r["prev"] for r in records[1:]] == [sha256_hex(x) for x in line_list(run)[:-1]]


def test_an_edited_field_breaks_the_next_link(tmp_path: Path) -> None:
    run = make_plain(tmp_path)
    ls = line_list(run)
    ls[0] = canonical_bytes({**json.loads(ls[0]), "seq": 9})
    write(run, ls)
    report = read_chain(run)
    path = run / JOURNAL_NAME
    assert report.problems[0] == (
        f"{path}:2: field prev does not match the previous record "
        "(a record was edited, deleted or moved)"
    )
    assert not report.ok and len(report.records) == 3


def test_a_wrong_index_is_named_with_what_was_found(tmp_path: Path) -> None:
    run = make_plain(tmp_path, 1)
    write(run, [canonical_bytes({**json.loads(line_list(run)[0]), "n": 5})])
    problems = read_chain(run).problems
    assert f"{run / JOURNAL_NAME}:1: field n: expected 0, found 5" in problems


def test_a_missing_index_is_named(tmp_path: Path) -> None:
    run = make_plain(tmp_path, 1)
    record = json.loads(line_list(run)[0])
    del record["n"]
    write(run, [canonical_bytes(record)])
    assert f"{run / JOURNAL_NAME}:1: field n: expected 0, found None" in read_chain(run).problems


@pytest.mark.parametrize("fmt", [2, None, "1"])
def test_another_format_is_refused(tmp_path: Path, fmt: object) -> None:
    run = make_plain(tmp_path, 1)
    write(run, [canonical_bytes({**json.loads(line_list(run)[0]), "format": fmt})])
    assert f"{run / JOURNAL_NAME}:1: field format: expected 1" in read_chain(run).problems


def test_a_rewritten_line_is_not_canonical(tmp_path: Path) -> None:
    run = make_plain(tmp_path, 2)
    ls = line_list(run)
    ls[1] = json.dumps(json.loads(ls[1])).encode()  # same record, other bytes
    write(run, ls)
    report = read_chain(run)
    assert report.problems[0] == (
        f"{run / JOURNAL_NAME}:2: not canonical JSON (the line was rewritten)"
    )


@pytest.mark.parametrize(
    ("line", "problem"), [(b"[1, 2]", "not a JSON object"), (b"\xff{}", "not a JSON line")]
)
def test_a_line_that_is_no_record_is_named_and_still_chained(
    tmp_path: Path, line: bytes, problem: str
) -> None:
    run = make_plain(tmp_path, 2)
    ls = line_list(run)
    ls.insert(1, line)
    write(run, ls)
    report = read_chain(run)
    path = run / JOURNAL_NAME
    # The bad line is hashed like any other, so the record after it is judged against it.
    assert report.problems[:3] == (
        f"{path}:2: {problem}",
        f"{path}:3: field n: expected 2, found 1",
        f"{path}:3: field prev does not match the previous record "
        "(a record was edited, deleted or moved)",
    )
    assert len(report.records) == 2 and report.schema_ok is False

    # A record that names the bad line's hash as its prev is chained to it: only the bad line
    # is a problem, and the chain's head is the last line's hash.
    after = canonical_bytes({**json.loads(ls[2]), "n": 2, "prev": sha256_hex(line)})
    write(run, [ls[0], line, after])
    set_head(run, 3, sha256_hex(after))
    report = read_chain(run)
    assert report.problems == (f"{path}:2: {problem}",)
    assert (report.head, report.schema_ok, len(report.records)) == (sha256_hex(after), False, 2)


@pytest.mark.parametrize(
    ("locked", "state"), [(False, "a crash during a write"), (True, "a runner is writing it")]
)
def test_a_torn_last_line_is_a_warning_that_names_its_size_and_its_likely_cause(
    tmp_path: Path, locked: bool, state: str
) -> None:
    """Unlocked, a torn line is a crash's leftover; under a runner's lock it is the line being
    written, which another reader must not report as damage."""
    run = make_plain(tmp_path, 2)
    write(run, line_list(run), tail=b'{"format":1')
    with FolderLock(run) if locked else contextlib.nullcontext():
        report = read_chain(run)
    assert report.ok and report.torn_tail == b'{"format":1' and report.live is locked
    assert report.warnings == (
        f"{run / JOURNAL_NAME}:3: incomplete last line (11 bytes, {state}); the "
        "next run records its hash and drops it",
    )


def test_reopening_keeps_the_torn_tail_until_a_record_carries_its_hash(tmp_path: Path) -> None:
    run = make_plain(tmp_path, 2)
    good = (run / JOURNAL_NAME).read_bytes()
    write(run, line_list(run), tail=b"xyz")
    torn = (run / JOURNAL_NAME).read_bytes()
    # Opening alone (a resume that is then refused) leaves every byte where it was.
    with Journal(run, fsync=False) as j:
        assert (j.dropped_tail, j.count) == (b"xyz", 2)
    assert (run / JOURNAL_NAME).read_bytes() == torn
    # A record that does not carry the dropped bytes' hash may not cut them.
    with (
        Journal(run, fsync=False) as j,
        pytest.raises(
            NeedlepointError, match=r"^the first record after a torn tail must record its hash$"
        ),
    ):
        j.append("attempt", **plain_attempt(3))
    assert (run / JOURNAL_NAME).read_bytes() == torn
    with Journal(run, fsync=False) as j:
        record = j.append("session", **RULES_SESSION, dropped_tail_sha256=sha256_hex(b"xyz"))
        assert (run / JOURNAL_NAME).read_bytes()[: len(good)] == good
        assert record["n"] == 2 and record["prev"] == sha256_hex(line_list(run)[1])
        j.append("attempt", **plain_attempt(3))  # cut once: later records need no hash
    assert read_chain(run).ok and read_chain(run).warnings == () and read_chain(run).count == 4


def test_the_head_file_missing_is_a_problem_only_with_records(tmp_path: Path) -> None:
    run = make_plain(tmp_path, 1)
    (run / HEAD_NAME).unlink()
    assert read_chain(run).problems == (
        f"{run / HEAD_NAME}: missing, so deleted final records cannot be ruled out",
    )
    (run / JOURNAL_NAME).write_bytes(b"")
    assert read_chain(run).ok


@pytest.mark.parametrize(
    "head",
    [
        b"not json",
        b"[",
        b"[" * 100_000,
        b"\xff",
        b"{}",
        b'{"records": 1}',
        b'{"sha256": "x"}',
        b'{"records": NaN}',
        # NaN where the reader looks for nothing: the head is not JSON all the same
        b'{"format": NaN, "records": 1, "sha256": "x"}',
        b'{"records": 1e400, "sha256": "x"}',
        b'{"records": "a", "sha256": 1}',
        b'{"records": 1, "sha256": 1}',  # each field is checked, not only the pair
        b'{"records": 1.0, "sha256": "x"}',
        b'{"records": true, "sha256": "x"}',  # a bool is an int to Python, not to the format
        b"[]",
    ],
)
def test_an_unreadable_head_file_is_a_problem_not_a_crash(tmp_path: Path, head: bytes) -> None:
    # The whole problem, not a word of it: pytest's folder for this test is named "unreadable".
    run = make_plain(tmp_path, 1)
    (run / HEAD_NAME).write_bytes(head)
    assert read_chain(run).problems == (
        f"{run / HEAD_NAME}: unreadable (not the documented head record)",
    )


@pytest.mark.parametrize(("size", "readable"), [(4096, True), (4097, False)])
def test_the_head_file_is_read_only_to_its_first_4_kib(
    tmp_path: Path, size: int, readable: bool
) -> None:
    """The head record is about 100 bytes: a reader reads 4 KiB of it at most, so a head file
    grown by an edit (or a disk error) is a problem to report, never a file held whole."""
    run = make_plain(tmp_path, 1)
    head = canonical_bytes({"format": 1, "records": 1, "sha256": read_chain(run).head})
    # Whitespace before the record is valid JSON: past 4 KiB, the read ends inside the record.
    (run / HEAD_NAME).write_bytes(b" " * (size - len(head)) + head)
    assert (run / HEAD_NAME).stat().st_size == size
    expected = (
        () if readable else (f"{run / HEAD_NAME}: unreadable (not the documented head record)",)
    )
    assert read_chain(run).problems == expected


@pytest.mark.parametrize(
    ("plant", "why"),
    [
        (lambda head: head.mkdir(), "is a folder where a record should be"),
        (
            lambda head: head.symlink_to(head.parent / JOURNAL_NAME),
            "is a symbolic link; a record is never written or read through a link",
        ),
    ],
)
def test_a_head_that_is_not_a_file_is_named_as_what_it_is(
    tmp_path: Path, plant: Any, why: str
) -> None:
    run = make_plain(tmp_path, 1)
    (run / HEAD_NAME).unlink()
    plant(run / HEAD_NAME)
    assert read_chain(run).problems == (f"{run / HEAD_NAME}: {why}",)


def test_a_head_that_fails_to_read_names_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk error reading the head is a problem of the chain, not a crash of the reader."""
    run = make_plain(tmp_path, 1)

    class Failing(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            raise OSError(errno.EIO, os.strerror(errno.EIO))

    real = jmod.open_read
    monkeypatch.setattr(
        jmod, "open_read", lambda path: Failing() if path.name == HEAD_NAME else real(path)
    )
    assert read_chain(run).problems == (f"{run / HEAD_NAME}: cannot read (Input/output error)",)


def test_a_head_one_record_behind_is_a_warning(tmp_path: Path) -> None:
    run = make_plain(tmp_path, 3)
    set_head(run, 2, sha256_hex(line_list(run)[1]))
    report = read_chain(run)
    assert report.ok and report.warnings == (
        f"{run / HEAD_NAME}: one record behind the journal (a crash between two writes)",
    )


def test_an_empty_head_one_behind_a_single_record_is_a_warning(tmp_path: Path) -> None:
    run = make_plain(tmp_path, 1)
    set_head(run, 0, GENESIS)
    assert read_chain(run).ok


@pytest.mark.parametrize(
    ("records", "which"),
    [
        (1, 0),  # two behind
        (2, 0),  # one behind, but the hash is of another record
        (3, 1),  # the right count with a wrong hash
        (4, 2),  # ahead of the journal
    ],
)
def test_any_other_head_is_a_problem_naming_both_ends(
    tmp_path: Path, records: int, which: int
) -> None:
    run = make_plain(tmp_path, 3)
    sha = sha256_hex(line_list(run)[which])
    set_head(run, records, sha)
    report = read_chain(run)
    end = sha256_hex(line_list(run)[2])
    assert report.problems == (
        f"{run / HEAD_NAME}: says {records} records ending {sha[:12]}, the journal has 3 "
        f"ending {end[:12]} (records deleted or edited)",
    )


READ_WHILE_WRITTEN = ["a" * 64, "b" * 64, "c" * 64]  # the hashes of three records read


def check_head_read_first(root: Path, snapshot: tuple[int, str] | str) -> tuple[list, list]:
    """_check_head's problems and warnings for a head a reader read before the journal, as it
    does while a runner holds the folder."""
    problems: list[str] = []
    warnings: list[str] = []
    jmod._check_head(root, READ_WHILE_WRITTEN, problems, warnings, snapshot)
    return problems, warnings


def test_a_reader_beside_a_runner_judges_the_journal_by_the_head_it_read_first(
    tmp_path: Path,
) -> None:
    """The head a live reader read before the journal is the one the chain is checked against:
    two records past it are a runner's appends (a warning), where a reader alone in the folder
    finds the same files a head two records behind (records deleted or edited)."""
    run = make_plain(tmp_path, 3)
    first = sha256_hex(line_list(run)[0])
    set_head(run, 1, first)
    with FolderLock(run):
        live = read_chain(run)
    assert (live.ok, live.live, live.problems) == (True, True, ())
    assert live.warnings == (
        f"{run / HEAD_NAME}: a runner is writing this folder; read 3 records, "
        "2 after the head it had written",
    )
    alone = read_chain(run)
    assert (alone.ok, alone.warnings) == (False, ())
    assert alone.problems == (
        f"{run / HEAD_NAME}: says 1 records ending {first[:12]}, the journal has 3 ending "
        f"{alone.head[:12]} (records deleted or edited)",
    )


@pytest.mark.parametrize("count", [0, 1, 2])
def test_a_head_read_before_a_runners_appends_names_what_came_after_it(
    tmp_path: Path, count: int
) -> None:
    """Read while a runner appends, the head (read first) may name any earlier record of the
    chain, the empty journal's included: a warning that counts the records read after it."""
    chain = [GENESIS, *READ_WHILE_WRITTEN]
    assert check_head_read_first(tmp_path, (count, chain[count])) == (
        [],
        [
            f"{tmp_path / HEAD_NAME}: a runner is writing this folder; read 3 records, "
            f"{3 - count} after the head it had written"
        ],
    )
    assert check_head_read_first(tmp_path, (3, chain[3])) == ([], [])


@pytest.mark.parametrize(
    ("count", "sha"),
    [
        (4, "d" * 64),  # ahead of what was read
        (-1, "c" * 64),  # a negative count never indexes the chain from its end
        (1, "b" * 64),  # a record's hash under another count
    ],
)
def test_a_head_read_first_that_names_no_record_of_the_chain_is_a_problem(
    tmp_path: Path, count: int, sha: str
) -> None:
    assert check_head_read_first(tmp_path, (count, sha)) == (
        [
            f"{tmp_path / HEAD_NAME}: says {count} records ending {sha[:12]}, the journal has 3 "
            f"ending {'c' * 12} (records deleted or edited)"
        ],
        [],
    )


def test_a_head_missing_or_unreadable_when_read_first_is_a_problem(tmp_path: Path) -> None:
    missing = f"{tmp_path / HEAD_NAME}: missing, so deleted final records cannot be ruled out"
    assert check_head_read_first(tmp_path, "missing") == ([missing], [])
    assert check_head_read_first(tmp_path, "the head's own problem") == (
        ["the head's own problem"],
        [],
    )
    # An empty journal needs no head: nothing can have been deleted from it.
    problems: list[str] = []
    jmod._check_head(tmp_path, [], problems, [], "missing")
    assert problems == []


def test_opening_a_broken_chain_names_the_first_problem(tmp_path: Path) -> None:
    run = make_plain(tmp_path, 2)
    (run / HEAD_NAME).unlink()
    with pytest.raises(NeedlepointError) as info:
        Journal(run, fsync=False)
    assert str(info.value) == (
        f"journal chain broken: {run / HEAD_NAME}: missing, so deleted final records cannot be "
        "ruled out"
    )


def test_a_new_journal_is_durable_before_its_first_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(jmod.os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    folder = tmp_path / "new"
    folder.mkdir()
    with Journal(folder) as j:
        # The empty journal, its folder entry and the head file: three fsyncs by default.
        assert len(calls) == 3 and j.fsync
        head = (folder / HEAD_NAME).read_bytes()
        assert head == canonical_bytes({"format": 1, "records": 0, "sha256": GENESIS}) + b"\n"
    calls.clear()
    make_plain(folder, 2)  # fsync=False: nothing at all
    assert calls == []


def test_the_head_file_is_rewritten_whole_when_it_shrinks(tmp_path: Path) -> None:
    run = make_plain(tmp_path, 2)
    report = read_chain(run)
    padded = canonical_bytes({"format": 1, "records": 2, "sha256": report.head}) + b"\n" * 40
    (run / HEAD_NAME).write_bytes(padded)
    with Journal(run, fsync=False) as j:
        j.append("stop")
        expected = canonical_bytes({"format": 1, "records": 3, "sha256": j.head}) + b"\n"
    assert (run / HEAD_NAME).read_bytes() == expected


def test_the_head_file_is_truncated_only_when_its_length_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A record costs one small pwrite of the head; a truncate per record would add a metadata
    # write to every append. Only a head whose length changed (a new file, a record count
    # gaining a digit, an old head that was longer) is truncated.
    calls: list[int] = []
    real = os.ftruncate
    monkeypatch.setattr(jmod.os, "ftruncate", lambda fd, n: (calls.append(n), real(fd, n))[1])
    run = make_plain(tmp_path, 3)  # the empty head is written (0 -> its length), then 3 same-length
    assert len(calls) == 1
    calls.clear()
    with Journal(run, fsync=False) as j:  # reopened: the head on disk has the new head's length
        j.append("attempt", **plain_attempt(4))
        j.append("attempt", **plain_attempt(5))
    assert calls == []
    with Journal(run, fsync=False) as j:
        for i in range(5, 10):
            j.append("attempt", **plain_attempt(i + 1))  # 9 -> 10 records: one digit longer
        head = canonical_bytes({"format": 1, "records": 10, "sha256": j.head}) + b"\n"
    assert calls == [len(head)]
    assert (run / HEAD_NAME).read_bytes() == head


def test_the_head_file_is_readable_by_all(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        run = make_plain(tmp_path, 1)
    finally:
        os.umask(old)
    assert stat.S_IMODE((run / HEAD_NAME).stat().st_mode) == 0o644


def test_close_releases_both_files(tmp_path: Path) -> None:
    j = Journal(tmp_path, fsync=False)
    j.append("attempt", seq=1)
    j.close()
    assert j._fh.closed and j._head_fd is None


def test_the_runner_holding_the_lock_never_reads_a_lagging_head_as_a_live_writer(
    tmp_path: Path,
) -> None:
    # Another reader, finding the folder locked, excuses a head behind the journal as a runner
    # mid-append. The runner itself holds that lock: for it the same head is records lost.
    run = make_plain(tmp_path, 3)
    first, last = sha256_hex(line_list(run)[0]), sha256_hex(line_list(run)[2])
    set_head(run, 1, first)
    with FolderLock(run), pytest.raises(NeedlepointError) as info:
        Journal(run, fsync=False)
    assert str(info.value) == (
        f"journal chain broken: {run / HEAD_NAME}: says 1 records ending {first[:12]}, the "
        f"journal has 3 ending {last[:12]} (records deleted or edited)"
    )


NO_INTEGERS = "its usage has no integer prompt_tokens and completion_tokens"


def test_journal_state_counts_sessions_and_keeps_the_latest_time() -> None:
    # The session count numbers the next session record, and last_time is the clock a resumed
    # run compares against (a clock that went backwards is refused): both are folded here.
    from needlepoint.run.journal import JournalState

    records = [
        {"n": 0, "type": "session", "time": "2026-12-01T00:00:00Z"},
        {"n": 1, "type": "attempt", "seq": 1, "time": "2026-12-01T00:00:01Z"},
        {"n": 2, "type": "session", "time": "2026-12-01T00:00:05Z"},
        {"n": 3, "type": "session", "time": "2026-12-01T00:00:09Z"},
        {"n": 4, "type": "note"},
    ]
    state = JournalState.of(records)
    assert sorted(state.sessions) == [0, 2, 3] and state.records == 5
    assert state.last_time_text == "2026-12-01T00:00:09Z"
    assert state.last_time == JournalState.of(records[3:4]).last_time
    assert JournalState.of([{"type": "attempt", "seq": 1}]).last_time is None
    assert JournalState.of([{"type": "Session", "time": "2026-12-01T00:00:00Z"}]).sessions == {}


def test_journal_state_keeps_each_seqs_first_attempt_and_adds_up_known_costs() -> None:
    from needlepoint.run.journal import JournalState

    first = {"type": "attempt", "seq": 4, "time": "2026-12-01T00:00:00Z"}
    again = {"type": "attempt", "seq": 4, "time": "2026-12-01T00:01:00Z"}
    paid = [{"type": "outcome", "seq": s, "time": "2026-12-01T00:02:00Z", "cost": c}
            for s, c in ((1, 0.25), (2, 0.5), (3, None))]  # fmt: skip
    state = JournalState.of([first, again, *paid])
    # Only what the rules read is kept of an attempt (memory stays bounded on long journals).
    kept = AttemptRecord(None, 4, None, "2026-12-01T00:00:00Z", None)  # type: ignore[arg-type]
    assert state.attempts == {4: kept} and state.attempt_count == 2
    assert state.spent == 0.75 and state.unknown_cost == [3]


def test_journal_state_counts_outcomes_and_dates_the_latest_one() -> None:
    """The next request's gap counts from the latest outcome (last_done), not from a later
    record such as a stop; every outcome line counts, a repeated seq's too."""
    from needlepoint.run.journal import JournalState

    done = [
        {"type": "outcome", "seq": s, "time": f"2026-12-01T00:0{s}:00Z", "cost": None}
        for s in (1, 2, 2)
    ]
    stop = {"type": "stop", "n": 3, "time": "2026-12-01T00:09:00Z", "reason": "complete"}
    state = JournalState.of([*done, stop])
    assert state.outcome_count == 3 and sorted(state.outcomes) == [1, 2]
    assert state.last_done_text == "2026-12-01T00:02:00Z"
    assert state.last_time_text == "2026-12-01T00:09:00Z"


def test_the_timeline_is_each_record_without_its_body_in_journal_order() -> None:
    # The readers that date a run (its context, a declaration's window) see the journal's records
    # in order, with only type, time and the seq or session each names.
    from needlepoint.run.journal import JournalState

    t = [f"2026-12-01T00:00:0{i}Z" for i in range(6)]
    records = [
        {"n": 0, "type": "session", "time": t[0], "session": 1},
        {"n": 1, "type": "attempt", "seq": 2, "time": t[1]},
        {"n": 2, "type": "stop", "time": t[2], "reason": "allowance", "detail": "x"},
        {"n": 3, "type": "session", "time": t[3], "session": 2},
        {"n": 4, "type": "outcome", "seq": 2, "time": t[4]},
        {"n": 5, "type": "attempt", "seq": 7, "time": t[5]},
    ]
    assert JournalState.of(records).timeline() == [
        {"type": "session", "time": t[0], "session": 1},
        {"type": "attempt", "time": t[1], "seq": 2},
        {"type": "stop", "time": t[2]},
        {"type": "session", "time": t[3], "session": 2},
        {"type": "outcome", "time": t[4], "seq": 2},
        {"type": "attempt", "time": t[5], "seq": 7},
    ]


@pytest.mark.parametrize(
    ("usage", "why"),
    [
        (None, "no usage in the response"),
        ({"prompt_tokens": "7", "completion_tokens": 2}, NO_INTEGERS),
        ({}, NO_INTEGERS),
    ],
    ids=["no-usage", "string-count", "empty-usage"],
)
def test_an_unknown_cost_says_whether_usage_was_missing_or_held_no_counts(
    usage: object, why: str
) -> None:
    # The cost-cap stop line quotes this: a reader must know which of the two went wrong.
    from needlepoint.run.journal import JournalState

    outcome = {"type": "outcome", "seq": 5, "time": "2026-12-01T00:02:00Z", "usage": usage}
    state = JournalState.of([outcome])
    assert (state.why_unknown(5), state.why_unknown(6)) == (why, "no usage in the response")


def test_a_live_head_is_read_until_two_reads_agree(tmp_path, monkeypatch):
    """A runner rewrites the head in place: one read may catch it mid-write, so the reader
    reads again until two agree, at most six reads, and keeps the last."""
    reads: list[object] = []

    def reading(values):
        feed = iter(values)

        def read_head(root):
            reads.append(root)
            return next(feed)

        return read_head

    a, b, c = (1, "a" * 64), (2, "b" * 64), (3, "c" * 64)
    monkeypatch.setattr(jmod, "_read_head", reading([a, a]))
    assert jmod._stable_head(tmp_path) == a and len(reads) == 2  # stable: read twice
    reads.clear()
    monkeypatch.setattr(jmod, "_read_head", reading([a, b, c, c]))
    assert jmod._stable_head(tmp_path) == c and len(reads) == 4  # caught mid-write twice
    reads.clear()
    monkeypatch.setattr(jmod, "_read_head", reading([(i, "d" * 64) for i in range(10)]))
    assert jmod._stable_head(tmp_path) == (5, "d" * 64) and len(reads) == 6  # gives up
    monkeypatch.setattr(jmod, "_read_head", reading([None, None]))
    assert jmod._stable_head(tmp_path) == "missing"


def test_a_walk_folds_every_record_and_keeps_none(tmp_path: Path) -> None:
    run = make_plain(tmp_path, 3)
    walked = walk(run)
    assert walked.reached and walked.chain.ok and walked.chain.count == 3
    assert walked.state.records == 3 and walked.state.attempt_count == 3
    assert walked.chain.records == ()  # folded, not held: a journal can be long


@pytest.mark.parametrize(("upto", "folded"), [(0, 1), (1, 2), (2, 3)])
def test_a_walk_up_to_an_earlier_head_folds_the_journal_as_it_stood_then(
    tmp_path: Path, upto: int, folded: int
) -> None:
    """The audit re-derives a stale results.csv from the journal as it stood at the head the
    file names: the records up to the one that hashes to it, while the whole chain is checked."""
    run = make_plain(tmp_path, 3)
    earlier = walk(run, upto=sha256_hex(line_list(run)[upto]))
    assert (
        earlier.reached
        and earlier.state.records == folded
        and earlier.state.attempt_count == folded
    )
    assert earlier.chain.ok and earlier.chain.count == 3 and earlier.chain.records == ()
    unknown = walk(run, upto="0" * 64)
    assert not unknown.reached and unknown.state.records == 3


def test_a_walk_locates_each_outcome_for_reading_it_again(
    reference_dir: Path, tmp_path: Path
) -> None:
    """An outcome is folded without its body; where it lies in the journal comes with it, so a
    reader that needs the whole record (an answer too long to keep) reads just that line again,
    on a walk up to a head as on a whole one."""
    from needlepoint.run.options import RunOptions
    from needlepoint.run.runner import run_protocol

    run = tmp_path / "run"
    run_protocol(reference_dir, run, RunOptions(allow=2, simulate="perfect", progress="off"))
    for walked in (walk(run), walk(run, upto=read_chain(run).head)):
        outcomes = walked.state.outcomes
        assert walked.reached and len(outcomes) == 2
        for seq, outcome in outcomes.items():
            again = jmod.read_line(run, outcome.at)
            assert (again["type"], again["seq"]) == ("outcome", seq)


@pytest.mark.parametrize("owner", [False, True])
def test_a_locked_folder_is_read_live_by_others_and_plainly_by_its_owner(
    tmp_path: Path, owner: bool
) -> None:
    """Another reader finds a runner's lock and reads a snapshot (``live``); the runner that
    holds the lock reads its own journal plainly. Either way every record reaches the visitor,
    and is kept when asked."""
    run = make_plain(tmp_path, 2)
    seen: list[int] = []
    with FolderLock(run):
        report = read_chain(run, lambda record, at: seen.append(record["n"]), owner=owner)
        walked = walk(run, owner=owner)
        up_to = walk(run, owner=owner, upto=report.head)
        by_default = read_chain(run).live, walk(run).chain.live  # a reader is not the owner
    assert by_default == (True, True)
    assert report.ok and report.live is not owner and walked.chain.live is not owner
    assert seen == [0, 1] and [r["n"] for r in report.records] == [0, 1]
    assert walked.state.records == 2 and up_to.chain.live is not owner and up_to.reached
    assert not read_chain(run).live and not walk(run).chain.live  # unlocked: nobody writes


def test_a_record_read_again_must_hash_as_when_it_was_walked(tmp_path):
    run = make(tmp_path, n=2)
    seen: list[jmod.Locator] = []
    jmod.read_chain(run, lambda record, at: seen.append(at), keep=False)
    assert jmod.read_line(run, seen[1])["seq"] == 2
    raw = (run / JOURNAL_NAME).read_bytes()
    (run / JOURNAL_NAME).write_bytes(raw.replace(b'"seq":2', b'"seq":7'))
    with pytest.raises(NeedlepointError) as err:
        jmod.read_line(run, seen[1])
    assert str(err.value) == (
        f"{run / JOURNAL_NAME}: changed while it was read (byte {seen[1].offset})"
    )
