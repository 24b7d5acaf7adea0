"""A run folder is something people copy, share and unpack: any name in it may be a planted link.

A link is planted, in turn, at every name the tool writes in a run folder (records, their old
fixed temporary names, the analysis folder and its files), pointing at a file outside. Every
command that writes into the folder (results, a resume with nothing left to send, analyze) and
every reader then runs: each exits 0, 1 or 2 with one line, and no outside file changes.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.fuzz import SMALL, bad_outcome, run_cli

# Every name a command writes in a run folder, and the fixed temporary names it once used.
RECORDS = (
    "run.json",
    "journal.jsonl",
    "journal.head.json",
    "context_manifest.json",
    "provenance.jsonl",
    "results.csv",
    ".lock",
)
OLD_TEMPORARIES = tuple(f"{name}.tmp" for name in RECORDS)
ANALYSIS = ("analysis.json", "summary.md", "accuracy_by_position.png", "completeness.png")
PLANTED = (
    *RECORDS,
    *OLD_TEMPORARIES,
    "analysis",
    *(f"analysis/{n}" for n in ANALYSIS),
    *(f"analysis/{n}.tmp" for n in ANALYSIS),
)
PRECIOUS = b"#!/bin/sh\n# a user's shell start-up file\n"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("links")
    (root / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    assert (
        run_cli(
            ["prepare", "--out", str(root / "prepared"), "--protocol", str(root / "small.json")]
        )[0]
        == 0
    )
    run = root / "run"
    argv = ["run", str(root / "prepared"), "--allow", "32", "--run-dir", str(run)]
    assert run_cli([*argv, "--simulate", "perfect", "--no-progress"])[0] == 0
    assert run_cli(["results", str(run)])[0] == 0
    assert run_cli(["analyze", str(run)])[0] == 0
    return root


def _commands(root: Path) -> list[list[str]]:
    run, prepared = root / "run", root / "prepared"
    resume = ["run", str(prepared), "--allow", "32", "--run-dir", str(run)]
    return [
        ["results", str(run)],
        [*resume, "--simulate", "perfect", "--no-progress"],  # nothing left: rewrites records
        ["analyze", str(run)],
        ["audit-run", str(run)],
        ["analyze", "--results", str(run / "results.csv"), "--prepared", str(prepared)],
    ]


@pytest.mark.parametrize("name", PLANTED)
def test_a_planted_link_never_writes_outside(pristine: Path, tmp_path: Path, name: str) -> None:
    root = Path(shutil.copytree(pristine, tmp_path / "copy", symlinks=True))
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "bashrc"
    target.write_bytes(PRECIOUS)
    planted = root / "run" / name
    if planted.is_dir() and not planted.is_symlink():
        shutil.rmtree(planted)
    elif os.path.lexists(planted):
        planted.unlink()
    planted.symlink_to(outside if name == "analysis" else target)
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    for argv in _commands(root):
        code, out, err = run_cli(argv)
        assert bad_outcome(argv, code, out, err) is None, (argv, code, err)
        after = {p.name: p.read_bytes() for p in outside.iterdir()}
        assert after == before, f"`{' '.join(argv[:2])}` wrote through {name}"


def test_a_link_where_a_record_should_be_is_refused_in_one_line(
    pristine: Path, tmp_path: Path
) -> None:
    root = Path(shutil.copytree(pristine, tmp_path / "copy", symlinks=True))
    (tmp_path / "elsewhere.csv").write_bytes(b"x")
    (root / "run" / "results.csv").unlink()
    (root / "run" / "results.csv").symlink_to(tmp_path / "elsewhere.csv")
    code, _, err = run_cli(["results", str(root / "run")])
    assert code == 2 and "results.csv: is a symbolic link" in err and err.count("\n") == 1
    os.mkfifo(root / "run" / "provenance.jsonl.fifo")
    (root / "run" / "provenance.jsonl").unlink()
    os.rename(root / "run" / "provenance.jsonl.fifo", root / "run" / "provenance.jsonl")
    argv = ["run", str(root / "prepared"), "--allow", "32", "--run-dir", str(root / "run")]
    code, _, err = run_cli([*argv, "--simulate", "perfect", "--no-progress"])
    assert code == 2 and "provenance.jsonl: is a FIFO where a record should be" in err


def _limited(argv: list[str], limit: int) -> subprocess.CompletedProcess[str]:
    """The command in a process that may write files of at most ``limit`` bytes (a full disk,
    as the kernel reports it: EFBIG instead of ENOSPC)."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", "needlepoint", *argv],
        capture_output=True,
        text=True,
        preexec_fn=cap,
        timeout=120,
        check=False,
    )


def test_a_full_disk_names_the_file_and_leaves_no_temporary_file(
    pristine: Path, tmp_path: Path
) -> None:
    root = Path(shutil.copytree(pristine, tmp_path / "copy", symlinks=True))
    (root / "run" / "results.csv").unlink()
    done = _limited(["results", str(root / "run")], 4096)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "results.csv: cannot write" in done.stderr
    assert sorted(p.name for p in (root / "run").iterdir() if "results" in p.name) == []
    fresh = tmp_path / "fresh"
    argv = ["run", str(root / "prepared"), "--allow", "32", "--run-dir", str(fresh)]
    done = _limited([*argv, "--simulate", "perfect", "--no-progress"], 8192)
    assert done.returncode == 2, done.stderr
    assert "journal.jsonl: cannot append" in done.stderr, done.stderr
    assert not [p for p in fresh.iterdir() if p.name.endswith(".tmp")]
