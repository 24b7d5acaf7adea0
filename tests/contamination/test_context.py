"""The context manifest: what is frozen, in what order, and what is reported instead of skipped."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support.contamination import context_file

from needlepoint.contamination import context
from needlepoint.contamination.context import (
    build_manifest,
    read_manifest,
    select_files,
    write_manifest,
)
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import file_sha256


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    for rel in (
        "CLAUDE.md",
        "AGENTS.md",
        "GEMINI.md",
        ".cursorrules",
        ".github/copilot-instructions.md",
        "memory/b.md",
        "memory/a/deep.md",
        "notes/todo.txt",
        "src/main.py",
        "README.md",
        "docs/CLAUDE.md",
    ):
        context_file(root, rel, f"content of {rel}\n", "2025-03-14T12:08:00Z")
    return root


def test_default_includes_cover_agent_context_files_sorted(workspace: Path) -> None:
    m = build_manifest(workspace)
    assert [e.path for e in m.files] == [
        ".cursorrules",
        ".github/copilot-instructions.md",
        "AGENTS.md",
        "CLAUDE.md",
        "GEMINI.md",
        "memory/a/deep.md",
        "memory/b.md",
        "notes/todo.txt",
    ]
    entry = m.files[3]
    assert entry.size == len("content of CLAUDE.md\n")
    assert entry.mtime == "2025-03-14T12:08:00Z"
    assert entry.sha256 == file_sha256(workspace / "CLAUDE.md")
    assert m.problems == ()


def test_includes_can_be_overridden(workspace: Path) -> None:
    m = build_manifest(workspace, ["**/*.py", "**/CLAUDE.md"])
    assert [e.path for e in m.files] == ["CLAUDE.md", "docs/CLAUDE.md", "src/main.py"]
    with pytest.raises(NeedlepointError, match="relative to the root"):
        build_manifest(workspace, ["../etc/passwd"])


def test_manifest_round_trips_and_its_hash_names_the_context(
    workspace: Path, tmp_path: Path
) -> None:
    m = build_manifest(workspace)
    write_manifest(m, tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["format"] == "contamination-manifest/1"
    again = read_manifest(tmp_path / "m.json")
    assert again == m and again.sha256 == m.sha256
    context_file(workspace, "memory/b.md", "changed\n", "2025-03-14T12:08:00Z")
    assert build_manifest(workspace).sha256 != m.sha256


def test_symlink_outside_the_root_is_frozen_and_reported(workspace: Path, tmp_path: Path) -> None:
    outside = context_file(tmp_path, "elsewhere/shared.md", "shared memory\n")
    os.symlink(outside, workspace / "memory" / "shared.md")
    os.symlink(tmp_path / "elsewhere", workspace / "notes" / "linked")
    m = build_manifest(workspace)
    kinds = {(p.path, p.kind) for p in m.problems}
    assert ("memory/shared.md", "symlink-outside-root") in kinds
    assert ("notes/linked", "symlink-outside-root") in kinds
    by_path = {e.path: e for e in m.files}
    assert by_path["memory/shared.md"].outside_root
    assert by_path["memory/shared.md"].sha256 == file_sha256(outside)
    assert by_path["notes/linked/shared.md"].outside_root


def test_symlink_inside_the_root_is_not_a_problem(workspace: Path) -> None:
    os.symlink("b.md", workspace / "memory" / "alias.md")
    m = build_manifest(workspace)
    assert m.problems == ()
    assert {e.path: e.link for e in m.files}["memory/alias.md"] == "b.md"


def test_dangling_symlink_and_loop_are_reported(workspace: Path) -> None:
    os.symlink("nowhere.md", workspace / "memory" / "gone.md")
    os.symlink("..", workspace / "memory" / "a" / "up")
    m = build_manifest(workspace)
    kinds = {(p.path, p.kind) for p in m.problems}
    assert ("memory/gone.md", "dangling-symlink") in kinds
    assert ("memory/a/up", "symlink-loop") in kinds


def test_fifo_named_like_a_file_is_reported_not_read(workspace: Path) -> None:
    os.mkfifo(workspace / "memory" / "pipe.md")
    m = build_manifest(workspace)  # would block forever if it tried to read the FIFO
    assert [(p.path, p.kind) for p in m.problems] == [("memory/pipe.md", "not-a-regular-file")]
    assert "memory/pipe.md" not in {e.path for e in m.files}


def test_unreadable_file_is_reported(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests run as root, where chmod does not stop reads; refuse this one path instead.
    real = context.file_sha256

    def refuse(path: os.PathLike[str]) -> str:
        if Path(path).name == "b.md":
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(context, "file_sha256", refuse)
    m = build_manifest(workspace)
    assert [(p.path, p.kind, p.detail) for p in m.problems] == [
        ("memory/b.md", "unreadable", "Permission denied")
    ]
    assert "memory/b.md" not in {e.path for e in m.files}


def test_unreadable_folder_is_reported(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.scandir

    def refuse(path):
        if Path(path).name == "notes":
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(os, "scandir", refuse)
    _, problems = select_files(workspace)
    assert [(p.path, p.kind) for p in problems] == [("notes", "unreadable")]


def test_root_must_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(NeedlepointError, match="not a directory"):
        build_manifest(tmp_path / "missing")


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"format": "x"}, "field format: 'x' is not one of"),
        ({"format": "contamination-manifest/1", "includes": [], "files": []}, "field root: miss"),
        (
            {"format": "contamination-manifest/1", "root": ".", "includes": [], "files": [{}]},
            r"field files\[0\]\.path: missing",
        ),
        (
            {
                "format": "contamination-manifest/1", "root": ".", "includes": [],
                "files": [{"path": "a", "size": True, "mtime_ns": 1, "sha256": "x"}],
            },
            r"field files\[0\]\.size: expected an integer, found a boolean",
        ),
    ],
)  # fmt: skip
def test_bad_manifest_names_the_field(tmp_path: Path, doc: dict, expected: str) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(NeedlepointError, match=expected):
        read_manifest(path)


def test_manifest_hash_does_not_depend_on_where_the_root_is(
    workspace: Path, tmp_path: Path
) -> None:
    copy = Path(shutil.copytree(workspace, tmp_path / "elsewhere" / "ws2"))
    a, b = build_manifest(workspace), build_manifest(copy)
    assert a.root != b.root and a.files == b.files
    assert a.sha256 == b.sha256


@pytest.mark.parametrize("path", ["../outside.md", "/etc/passwd", "memory/../../x", "a//b", "."])
def test_manifest_path_outside_its_root_is_refused(tmp_path: Path, path: str) -> None:
    entry = {"path": path, "size": 1, "mtime_ns": 1, "sha256": "a" * 64}
    doc = {"format": "contamination-manifest/1", "root": ".", "includes": [], "files": [entry]}
    (tmp_path / "m.json").write_text(json.dumps(doc))
    with pytest.raises(NeedlepointError, match=r"field files\[0\]\.path: .* is not a path inside"):
        read_manifest(tmp_path / "m.json")


@pytest.mark.parametrize(
    ("field", "value"), [("mtime_ns", 10**30), ("mtime_ns", -1), ("sha256", "x"), ("size", -5)]
)
def test_manifest_numbers_and_hashes_out_of_range_are_refused(
    tmp_path: Path, field: str, value: object
) -> None:
    entry = {"path": "a.md", "size": 1, "mtime_ns": 1, "sha256": "a" * 64, field: value}
    doc = {"format": "contamination-manifest/1", "root": ".", "includes": [], "files": [entry]}
    (tmp_path / "m.json").write_text(json.dumps(doc))
    with pytest.raises(NeedlepointError, match=r"files\[0\]\."):
        read_manifest(tmp_path / "m.json")


def test_symlinks_to_the_filesystem_root_and_dev_fd_end_cleanly(workspace: Path) -> None:
    (workspace / "memory" / "root").symlink_to("/")
    (workspace / "memory" / "up").symlink_to("..")
    (workspace / "memory" / "fd").symlink_to("/dev/fd")
    m = build_manifest(workspace)
    kinds = {(p.path, p.kind) for p in m.problems}
    assert ("memory/root", "symlink-loop") in kinds and ("memory/up", "symlink-loop") in kinds
    assert ("memory/fd", "symlink-outside-root") in kinds
    assert all(not e.path.startswith(("memory/root/", "memory/up/")) for e in m.files)


def test_a_walk_past_its_entry_limit_is_one_line(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(context, "MAX_ENTRIES", 3)
    with pytest.raises(NeedlepointError, match="more than 3 entries"):
        build_manifest(workspace)


def test_manifest_out_in_a_missing_folder_is_one_line(workspace: Path, tmp_path: Path) -> None:
    from support.fuzz import run_cli

    out = tmp_path / "missing" / "dir" / "m.json"
    code, _, err = run_cli(
        ["contamination", "manifest", "--root", str(workspace), "--out", str(out)]
    )
    assert code == 2 and err.count("\n") == 1 and "is not a folder" in err
