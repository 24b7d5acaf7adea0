"""The contamination gate fails closed: a part of the context that could not be read never gives
a clean pass. Each check exits 1, naming the path and the reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.contamination import context_file, reference, result, results, runs
from support.fuzz import run_cli


@pytest.fixture
def looped(tmp_path: Path) -> tuple[Path, Path, Path]:
    """``notes/`` links back to the workspace itself; the answer sits beside it."""
    ws = tmp_path / "ws"
    context_file(ws, "CLAUDE.md", "# Rules\nnothing to see\n")
    context_file(ws, "secret.md", "Pilot hands over under OM-3642.\n")
    os.symlink(".", ws / "notes")  # notes/secret.md would hold the answer: a loop, not read
    ref = reference(tmp_path / "ref.csv", {"R1": "OM-3642"})
    return ws, ref, tmp_path


def test_overlap_fails_closed_on_a_loop(looped: tuple[Path, Path, Path]) -> None:
    ws, ref, _ = looped
    code, out, err = run_cli(
        ["contamination", "overlap", "--reference", str(ref), "--context", str(ws)]
    )
    assert code == 1, out + err
    assert "not read: notes: symlink-loop" in err and "fails closed" in err
    assert "0 of 1 reference answers present" in out


def test_timeline_fails_closed_on_a_dangling_link(looped: tuple[Path, Path, Path]) -> None:
    ws, _, tmp = looped
    (ws / "memory").mkdir()
    os.symlink("../gone.md", ws / "memory" / "today.md")
    runs_csv = runs(tmp / "runs.csv", [("r1", "b", "2025-03-14T11:15:00Z", "OM-3642")])
    code, _, err = run_cli(
        ["contamination", "timeline", "--runs", str(runs_csv), "--context", str(ws)]
    )
    assert code == 1 and "not read: memory/today.md: dangling-symlink" in err


def test_the_report_gate_fails_on_what_it_could_not_read(looped: tuple[Path, Path, Path]) -> None:
    ws, ref, tmp = looped
    runs_csv = runs(tmp / "runs.csv", [("r1", "b", "2025-03-14T11:15:00Z", "XX-0000")])
    results_jsonl = results(tmp / "results.jsonl", [result(answer="x", exact=False)])
    argv = ["contamination", "report", "--reference", str(ref), "--runs", str(runs_csv)]
    argv += ["--results", str(results_jsonl), "--context", str(ws), "--out", str(tmp / "out")]
    code, out, _ = run_cli(argv)
    assert code == 1 and "gate: FAILED" in out
    assert "unread (context): notes: symlink-loop" in out


def test_a_frozen_file_missing_now_fails_closed(looped: tuple[Path, Path, Path]) -> None:
    ws, ref, tmp = looped
    os.unlink(ws / "notes")
    manifest = tmp / "m.json"
    assert run_cli(["contamination", "manifest", "--root", str(ws), "--out", str(manifest)])[0] == 0
    (ws / "CLAUDE.md").unlink()
    code, _, err = run_cli(
        ["contamination", "overlap", "--reference", str(ref), "--context", str(manifest)]
    )
    assert code == 1 and "not read: CLAUDE.md: missing" in err
