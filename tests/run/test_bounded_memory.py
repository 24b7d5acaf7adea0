"""Memory of reading a run folder is bounded by one record, not by the journal's size.

A journal of long answers (each answer several MiB, kept twice: as the body and as the answer
text) is read by every reader of the run folder (results, audit-run, the analysis, a resume);
each one's peak Python memory stays a small multiple of the largest record, however many such
records the journal holds. docs/runner.md states the bound; benchmarks/bench_streaming.py
measures it against a small journal.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.fuzz import SMALL
from support.runner import KEY_ENV, SENTINEL, live, server_for

from needlepoint.design.prepared import prepare

ANSWER_BYTES = 2 << 20  # each long answer
LONG_ANSWERS = 16  # a journal of about 64 MiB


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("long")
    (root / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    prepared = prepare(root / "prepared", root / "small.json")
    run = root / "run"
    mp = pytest.MonkeyPatch()
    mp.setenv(KEY_ENV, SENTINEL)
    try:
        with server_for(prepared) as server:
            server.script([f"content:UNKNOWN {'x' * ANSWER_BYTES}"] * LONG_ANSWERS)
            live(prepared, run, server, allow=LONG_ANSWERS + 2, timeout_s=30, fsync=False)
    finally:
        mp.undo()
    return run


def peak(work: Callable[[], Any]) -> int:
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _results(run: Path) -> None:
    from needlepoint.run.results import write_results

    write_results(run)


def _audit(run: Path) -> None:
    from needlepoint.run.audit import audit_run

    assert audit_run(run).ok


def _analysis(run: Path) -> None:
    from needlepoint.analysis.inputs import from_run

    from_run(run)


def _resume(run: Path) -> None:
    from needlepoint.run.journal import Journal

    with Journal(run, fsync=False) as journal:
        assert journal.count > LONG_ANSWERS


def _summary(run: Path) -> None:
    from needlepoint.run.results import journal_summary

    assert len(journal_summary(run)) > 1


READERS = [_results, _audit, _analysis, _resume, _summary]


@pytest.mark.parametrize("reader", READERS, ids=lambda f: f.__name__)
def test_reading_a_journal_of_long_answers_costs_one_record(long_run: Path, reader) -> None:
    size = (long_run / "journal.jsonl").stat().st_size
    largest = max(len(line) for line in (long_run / "journal.jsonl").read_bytes().splitlines())
    assert size > LONG_ANSWERS * largest * 0.9  # the journal is many long records
    _results(long_run)  # results.csv exists, so the readers also compare it
    used = peak(lambda: reader(long_run))
    # A record is held as its line and its parsed value, and a long answer once more as a CSV
    # cell (the csv module builds a row as 4-byte characters): a few times the largest record,
    # never the journal, which is 16 such records.
    shown = f"peak {used / 2**20:.0f} MiB for records of {largest / 2**20:.1f} MiB"
    assert used < 8 * largest, shown
    assert used < size / 2, shown


def test_evidence_diff_compares_large_files_a_chunk_at_a_time(tmp_path: Path) -> None:
    from needlepoint.notebook.evidence import diff_evidence

    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        with open(tmp_path / side / "big.bin", "wb") as fh:
            for _ in range(48):
                fh.write(b"\0" * (1 << 20))
    with open(tmp_path / "b" / "big.bin", "r+b") as fh:
        fh.seek(40 << 20)
        fh.write(b"!")
    diff: list[Any] = []
    used = peak(lambda: diff.append(diff_evidence(tmp_path / "a", tmp_path / "b")))
    assert diff[0].differing == ("big.bin",) and f"byte {40 << 20}" in diff[0].details["big.bin"]
    assert used < 8 << 20, f"peak {used / 2**20:.0f} MiB for two 48 MiB files"
