"""Timeline: files written after a run holding its results, poisoned reruns, equal timestamps."""

from __future__ import annotations

from pathlib import Path

from support.contamination import context_file, runs

from needlepoint.contamination.context import build_manifest, load_context, write_manifest
from needlepoint.contamination.inputs import read_runs
from needlepoint.contamination.overlap import check_timeline

R1 = ("r1", "ref", "2025-03-14T11:15:00Z", "SR-7720")


def run_check(tmp_path: Path, file_mtime: str, rows: list[tuple[str, str, str, str]]):
    ws = tmp_path / "ws"
    context_file(ws, "memory/session.md", "run r1 answered SR-7720\n", file_mtime)
    context_file(ws, "CLAUDE.md", "rules\n", "2025-03-01T00:00:00Z")
    return check_timeline(read_runs(runs(tmp_path / "runs.csv", rows)), load_context(ws))


def test_file_after_run_poisons_later_reruns_only(tmp_path: Path) -> None:
    result = run_check(
        tmp_path,
        "2025-03-14T12:08:00Z",
        [
            ("r0", "ref", "2025-03-14T09:00:00Z", "KT-0001"),
            R1,
            ("r2", "ref", "2025-03-14T14:30:00Z", ""),
            ("other", "canary", "2025-03-14T15:00:00Z", ""),
        ],
    )
    (artifact,) = result.artifacts
    assert (artifact.file, artifact.run_id, artifact.minutes_after_start) == (
        "memory/session.md",
        "r1",
        53.0,
    )
    assert [(p.run_id, p.file, p.source_runs) for p in result.poisoned] == [
        ("r2", "memory/session.md", ("r1",))
    ]  # r0 ran before the file existed; "other" is a different battery
    assert result.has_poisoned_rerun


def test_file_before_run_is_not_an_artifact_and_poisons_nothing(tmp_path: Path) -> None:
    result = run_check(
        tmp_path, "2025-03-14T10:00:00Z", [R1, ("r2", "ref", "2025-03-14T14:30:00Z", "")]
    )
    (holding,) = result.holdings
    assert not holding.after_run and holding.minutes_after_start == -75.0
    assert result.artifacts == () and result.poisoned == () and not result.has_poisoned_rerun


def test_no_run_values_in_context_is_clean(tmp_path: Path) -> None:
    result = run_check(
        tmp_path,
        "2025-03-14T12:08:00Z",
        [
            ("r1", "ref", "2025-03-14T11:15:00Z", "SR-772"),
            ("r2", "ref", "2025-03-14T14:30:00Z", ""),
        ],
    )
    assert result.holdings == () and result.poisoned == ()


def test_equal_timestamp_with_the_run_start_is_not_after_the_run(tmp_path: Path) -> None:
    # The file existed at the run's start, so it did not come from this run.
    result = run_check(
        tmp_path, "2025-03-14T11:15:00Z", [R1, ("r2", "ref", "2025-03-14T14:30:00Z", "")]
    )
    (holding,) = result.holdings
    assert not holding.after_run and result.poisoned == ()


def test_one_microsecond_after_the_start_is_after_the_run(tmp_path: Path) -> None:
    result = run_check(
        tmp_path,
        "2025-03-14T11:15:00.000001Z",
        [R1, ("r2", "ref", "2025-03-14T14:30:00Z", "")],
    )
    assert [h.run_id for h in result.artifacts] == ["r1"]
    assert [p.run_id for p in result.poisoned] == ["r2"]


def test_rerun_starting_exactly_at_the_file_mtime_is_poisoned(tmp_path: Path) -> None:
    result = run_check(
        tmp_path,
        "2025-03-14T12:08:00Z",
        [
            R1,
            ("r2", "ref", "2025-03-14T12:08:00Z", ""),
            ("r3", "ref", "2025-03-14T12:07:59.999999Z", ""),
        ],
    )
    assert [p.run_id for p in result.poisoned] == ["r2"]


def test_manifest_mtimes_are_the_frozen_ones(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    context_file(ws, "memory/session.md", "SR-7720\n", "2025-03-14T12:08:00Z")
    manifest = tmp_path / "m.json"
    write_manifest(build_manifest(ws), manifest)
    context_file(ws, "memory/session.md", "SR-7720\n", "2025-03-14T09:00:00Z")  # touched later
    rows = [R1, ("r2", "ref", "2025-03-14T14:30:00Z", "")]
    result = check_timeline(read_runs(runs(tmp_path / "runs.csv", rows)), load_context(manifest))
    assert [p.run_id for p in result.poisoned] == ["r2"]
    live = check_timeline(read_runs(tmp_path / "runs.csv"), load_context(ws))
    assert live.poisoned == ()
