"""Reference vs context: exact matches with file:line, discards, and manifest verification."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.contamination import context_file, discards, reference

from needlepoint.contamination.context import load_context
from needlepoint.contamination.formats import read_discards, read_reference
from needlepoint.contamination.manifest import build_manifest, write_manifest
from needlepoint.contamination.overlap import check_overlap
from needlepoint.errors import NeedlepointError


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    context_file(ws, "CLAUDE.md", "# Rules\nPilot hands over under OM-3642.\n")
    context_file(ws, "memory/facts.md", "distance 975 km\nfounded 1975\nOM-3642 again\n")
    context_file(ws, "src/code.py", "KT-4471 = 1\n")  # not automatic context
    ref = reference(
        tmp_path / "ref.csv", {"R1": "OM-3642", "R2": "975", "R3": "KT-4471", "R4": "1"}
    )
    return ws, ref


def test_matches_report_file_and_line_and_share(setup: tuple[Path, Path]) -> None:
    ws, ref = setup
    result = check_overlap(read_reference(ref), load_context(ws))
    assert [(m.reference_id, m.where) for m in result.matches] == [
        ("R1", "CLAUDE.md:2"),
        ("R1", "memory/facts.md:3"),
        ("R2", "memory/facts.md:1"),
    ]
    assert result.present_ids == ("R1", "R2")
    assert result.share == 0.5 and result.leaked
    assert result.sentence().startswith("2 of 4 reference answers present")


def test_no_overlap_is_clean(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    context_file(ws, "CLAUDE.md", "nothing to see; 1975 and XOM-3642\n")
    ref = reference(tmp_path / "ref.csv", {"R1": "OM-3642", "R2": "975"})
    result = check_overlap(read_reference(ref), load_context(ws))
    assert result.matches == () and result.share == 0 and not result.leaked


def test_discard_with_reason_removes_only_that_match(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    ws, ref = setup
    d = discards(tmp_path / "d.csv", [("R2", "memory/facts.md", 1, "a rail distance, by chance")])
    result = check_overlap(read_reference(ref), load_context(ws), read_discards(d))
    assert result.present_ids == ("R1",)
    assert [(m.reference_id, m.discard_reason) for m in result.discarded] == [
        ("R2", "a rail distance, by chance")
    ]
    assert result.unused_discards == ()


def test_discard_without_reason_is_refused(setup: tuple[Path, Path], tmp_path: Path) -> None:
    d = discards(tmp_path / "d.csv", [("R2", "memory/facts.md", 1, "")])
    with pytest.raises(NeedlepointError, match=r"d\.csv:2: field 'reason'"):
        read_discards(d)


def test_discard_of_unknown_id_is_refused_and_stale_one_reported(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    ws, ref = setup
    bad = discards(tmp_path / "bad.csv", [("R9", "memory/facts.md", 1, "chance")])
    with pytest.raises(NeedlepointError, match=r"bad\.csv:2: field 'reference_id': 'R9'"):
        check_overlap(read_reference(ref), load_context(ws), read_discards(bad))
    stale = discards(tmp_path / "stale.csv", [("R2", "memory/facts.md", 2, "moved line")])
    result = check_overlap(read_reference(ref), load_context(ws), read_discards(stale))
    assert [d.file_line for d in result.unused_discards] == [2]
    assert result.present_ids == ("R1", "R2")


def test_manifest_context_verifies_hashes_and_says_so(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    ws, ref = setup
    manifest = tmp_path / "m.json"
    write_manifest(build_manifest(ws), manifest)
    result = check_overlap(read_reference(ref), load_context(manifest))
    assert result.verification is not None and result.verification.verified
    assert result.verification.sentence() == "all 2 frozen files still hash as frozen"

    context_file(ws, "memory/facts.md", "distance 975 km\n")
    (ws / "CLAUDE.md").unlink()
    context_file(ws, "notes/new.md", "OM-3642\n")
    result = check_overlap(read_reference(ref), load_context(manifest))
    check = result.verification
    assert check is not None and not check.verified
    assert [(c.path, c.kind) for c in check.changes] == [
        ("CLAUDE.md", "missing"),
        ("memory/facts.md", "changed"),
        ("notes/new.md", "added"),
    ]
    assert "not the frozen context" in check.sentence()


def test_single_file_context_and_include_override(setup: tuple[Path, Path]) -> None:
    ws, ref = setup
    one = check_overlap(read_reference(ref), load_context(ws / "memory" / "facts.md"))
    assert [m.where for m in one.matches] == ["facts.md:3", "facts.md:1"]
    code = check_overlap(read_reference(ref), load_context(ws, ["src/**"]))
    assert [(m.reference_id, m.where) for m in code.matches] == [
        ("R3", "src/code.py:1"),
        ("R4", "src/code.py:1"),
    ]


def test_undecodable_context_file_is_matched_and_reported(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "bin.md").write_bytes(b"\xff\xfe 975 km\n")
    ref = reference(tmp_path / "ref.csv", {"R2": "975"})
    result = check_overlap(read_reference(ref), load_context(ws))
    assert result.present_ids == ("R2",)
    assert [(p.path, p.kind) for p in result.problems] == [("memory/bin.md", "not-utf8")]


def test_fifo_in_place_of_a_frozen_file_is_reported(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    ws, ref = setup
    manifest = tmp_path / "m.json"
    write_manifest(build_manifest(ws), manifest)
    (ws / "CLAUDE.md").unlink()
    os.mkfifo(ws / "CLAUDE.md")
    result = check_overlap(read_reference(ref), load_context(manifest))  # must not block
    assert ("CLAUDE.md", "not-a-regular-file") in {(p.path, p.kind) for p in result.problems}
    assert result.verification is not None
    assert [(c.path, c.kind) for c in result.verification.changes] == [("CLAUDE.md", "unreadable")]
