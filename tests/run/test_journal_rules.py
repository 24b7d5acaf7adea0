"""The journal's chain rules one by one, with the exact problem each break reports.

test_journal.py shows that edits, deletions and reorderings are caught at all; these pin which
rule fires, the line it names and the words a reader gets, and the head file's edge cases
(one record behind is a warning, anything else a problem), so no rule can weaken unnoticed.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes, sha256_hex
from needlepoint.run import journal as jmod
from needlepoint.run.folder import FolderLock
from needlepoint.run.journal import GENESIS, HEAD_NAME, JOURNAL_NAME, Journal, read_chain

# Every record read back is checked against the journal schema, so the chain rules are pinned
# on schema-valid attempts: only the rule under test may fire.
TIME = "2026-01-01T00:00:00.000000Z"
SESSION = {
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


def attempt(seq: int) -> dict:
    return {"seq": seq, "request_sha256": "a" * 64, "time": TIME, "gap_s": None}


def make(run: Path, n: int = 3) -> Path:
    with Journal(run, fsync=False) as j:
        for i in range(n):
            j.append("attempt", **attempt(i + 1))
    return run


def lines(run: Path) -> list[bytes]:
    return (run / JOURNAL_NAME).read_bytes().split(b"\n")[:-1]


def write(run: Path, new: list[bytes], tail: bytes = b"") -> None:
    (run / JOURNAL_NAME).write_bytes(b"".join(x + b"\n" for x in new) + tail)


def set_head(run: Path, records: int, sha: str) -> None:
    (run / HEAD_NAME).write_text(json.dumps({"format": 1, "records": records, "sha256": sha}))


def test_a_good_chain_reports_each_record_and_its_head(tmp_path: Path) -> None:
    run = make(tmp_path)
    report = read_chain(run)
    assert (report.ok, report.problems, report.warnings, report.torn_tail) == (True, (), (), b"")
    assert [r["n"] for r in report.records] == [0, 1, 2]
    assert [r["type"] for r in report.records] == ["attempt"] * 3
    assert all(r["format"] == 1 for r in report.records)
    assert report.head == sha256_hex(lines(run)[-1])
    head = (run / HEAD_NAME).read_bytes()
    assert head == canonical_bytes({"format": 1, "records": 3, "sha256": report.head}) + b"\n"


def test_each_record_chains_to_the_bytes_of_the_line_before(tmp_path: Path) -> None:
    run = make(tmp_path)
    records = read_chain(run).records
    assert records[0]["prev"] == GENESIS == "0" * 64
    assert [r["prev"] for r in records[1:]] == [sha256_hex(x) for x in lines(run)[:-1]]


def test_an_edited_field_breaks_the_next_link(tmp_path: Path) -> None:
    run = make(tmp_path)
    ls = lines(run)
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
    run = make(tmp_path, 1)
    write(run, [canonical_bytes({**json.loads(lines(run)[0]), "n": 5})])
    problems = read_chain(run).problems
    assert f"{run / JOURNAL_NAME}:1: field n: expected 0, found 5" in problems


def test_a_missing_index_is_named(tmp_path: Path) -> None:
    run = make(tmp_path, 1)
    record = json.loads(lines(run)[0])
    del record["n"]
    write(run, [canonical_bytes(record)])
    assert f"{run / JOURNAL_NAME}:1: field n: expected 0, found None" in read_chain(run).problems


@pytest.mark.parametrize("fmt", [2, None, "1"])
def test_another_format_is_refused(tmp_path: Path, fmt: object) -> None:
    run = make(tmp_path, 1)
    write(run, [canonical_bytes({**json.loads(lines(run)[0]), "format": fmt})])
    assert f"{run / JOURNAL_NAME}:1: field format: expected 1" in read_chain(run).problems


def test_a_rewritten_line_is_not_canonical(tmp_path: Path) -> None:
    run = make(tmp_path, 2)
    ls = lines(run)
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
    run = make(tmp_path, 2)
    ls = lines(run)
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
    assert len(report.records) == 2


def test_a_torn_last_line_is_a_warning_that_names_its_size(tmp_path: Path) -> None:
    run = make(tmp_path, 2)
    write(run, lines(run), tail=b'{"format":1')
    report = read_chain(run)
    assert report.ok and report.torn_tail == b'{"format":1'
    assert report.warnings == (
        f"{run / JOURNAL_NAME}:3: incomplete last line (11 bytes, a crash during a write); the "
        "next run records its hash and drops it",
    )


def test_reopening_keeps_the_torn_tail_until_a_record_carries_its_hash(tmp_path: Path) -> None:
    run = make(tmp_path, 2)
    good = (run / JOURNAL_NAME).read_bytes()
    write(run, lines(run), tail=b"xyz")
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
        j.append("attempt", **attempt(3))
    assert (run / JOURNAL_NAME).read_bytes() == torn
    with Journal(run, fsync=False) as j:
        record = j.append("session", **SESSION, dropped_tail_sha256=sha256_hex(b"xyz"))
        assert (run / JOURNAL_NAME).read_bytes()[: len(good)] == good
        assert record["n"] == 2 and record["prev"] == sha256_hex(lines(run)[1])
        j.append("attempt", **attempt(3))  # cut once: later records need no hash
    assert read_chain(run).ok and read_chain(run).warnings == () and read_chain(run).count == 4


def test_the_head_file_missing_is_a_problem_only_with_records(tmp_path: Path) -> None:
    run = make(tmp_path, 1)
    (run / HEAD_NAME).unlink()
    assert read_chain(run).problems == (
        f"{run / HEAD_NAME}: missing, so deleted final records cannot be ruled out",
    )
    (run / JOURNAL_NAME).write_bytes(b"")
    assert read_chain(run).ok


@pytest.mark.parametrize(
    "text",
    ["not json", "{}", '{"records": 1}', '{"sha256": "x"}', '{"records": "a", "sha256": 1}', "[]"],
)
def test_an_unreadable_head_file_is_a_problem(tmp_path: Path, text: str) -> None:
    run = make(tmp_path, 1)
    (run / HEAD_NAME).write_text(text)
    assert read_chain(run).problems == (
        f"{run / HEAD_NAME}: unreadable (not the documented head record)",
    )


def test_a_head_one_record_behind_is_a_warning(tmp_path: Path) -> None:
    run = make(tmp_path, 3)
    set_head(run, 2, sha256_hex(lines(run)[1]))
    report = read_chain(run)
    assert report.ok and report.warnings == (
        f"{run / HEAD_NAME}: one record behind the journal (a crash between two writes)",
    )


def test_an_empty_head_one_behind_a_single_record_is_a_warning(tmp_path: Path) -> None:
    run = make(tmp_path, 1)
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
    run = make(tmp_path, 3)
    sha = sha256_hex(lines(run)[which])
    set_head(run, records, sha)
    report = read_chain(run)
    end = sha256_hex(lines(run)[2])
    assert report.problems == (
        f"{run / HEAD_NAME}: says {records} records ending {sha[:12]}, the journal has 3 "
        f"ending {end[:12]} (records deleted or edited)",
    )


def test_opening_a_broken_chain_names_the_first_problem(tmp_path: Path) -> None:
    run = make(tmp_path, 2)
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
    make(folder, 2)  # fsync=False: nothing at all
    assert calls == []


def test_the_head_file_is_rewritten_whole_when_it_shrinks(tmp_path: Path) -> None:
    run = make(tmp_path, 2)
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
    run = make(tmp_path, 3)  # the empty head is written (0 -> its length), then 3 same-length
    assert len(calls) == 1
    calls.clear()
    with Journal(run, fsync=False) as j:  # reopened: the head on disk has the new head's length
        j.append("attempt", **attempt(4))
        j.append("attempt", **attempt(5))
    assert calls == []
    with Journal(run, fsync=False) as j:
        for i in range(5, 10):
            j.append("attempt", **attempt(i + 1))  # 9 -> 10 records: one digit longer
        head = canonical_bytes({"format": 1, "records": 10, "sha256": j.head}) + b"\n"
    assert calls == [len(head)]
    assert (run / HEAD_NAME).read_bytes() == head


def test_the_head_file_is_readable_by_all(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        run = make(tmp_path, 1)
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
    run = make(tmp_path, 3)
    first, last = sha256_hex(lines(run)[0]), sha256_hex(lines(run)[2])
    set_head(run, 1, first)
    with FolderLock(run), pytest.raises(NeedlepointError) as info:
        Journal(run, fsync=False)
    assert str(info.value) == (
        f"journal chain broken: {run / HEAD_NAME}: says 1 records ending {first[:12]}, the "
        f"journal has 3 ending {last[:12]} (records deleted or edited)"
    )
