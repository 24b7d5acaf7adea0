"""The hash chain notices every edit, deletion, reordering and truncation."""

from __future__ import annotations

import json
import os

import pytest

from needlepoint.errors import NeedlepointError
from needlepoint.run import journal as jmod
from needlepoint.run.journal import (
    GENESIS,
    HEAD_NAME,
    JOURNAL_NAME,
    Journal,
    read_chain,
    record_hash,
)


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
        assert b["prev"] == record_hash(a)
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
        json.dumps({"format": 1, "records": 2, "sha256": record_hash(report.records[1])})
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
    assert not report.ok and not report.schema_ok
    assert [p.split(": ", 1)[1] for p in report.problems] == [
        "field time: expected a string, found a number",
        "field seq: expected an integer, found a string",
        "field detail: expected a string, found a list",
    ]


@pytest.mark.parametrize(
    "head",
    [b"[", b'{"records": 1e400, "sha256": "x"}', b"[" * 100_000, b'{"records": NaN}', b"\xff"],
)
def test_unreadable_head_is_a_problem_not_a_crash(tmp_path, head):
    run = make(tmp_path, 1)
    (run / HEAD_NAME).write_bytes(head)
    report = read_chain(run)
    assert not report.ok and "unreadable" in report.problems[-1]


def test_deeply_nested_line_is_not_json(tmp_path):
    run = make(tmp_path, 1)
    with open(run / JOURNAL_NAME, "ab") as fh:
        fh.write(b"[" * 100_000 + b"\n")
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
