"""`registry --history`: run folders that were committed once and are gone from the tree.

Every commit that deleted a ``journal.jsonl`` under the root is read at its parent: the run
folder, the prepared folder its run.json names and, for a pilot, the pilot record are copied
out of git into a scratch folder and read like any run on the record. A run whose journal is
still somewhere in the tree (the same final hash) is not "in history only"; every other one is,
with its decision re-derived from its journal.
"""

from __future__ import annotations

import io
import posixpath
import subprocess
import tarfile
import tempfile
from pathlib import Path

from needlepoint.errors import NeedlepointError
from needlepoint.study.runs import RunEntry, pilot_design_of, read_entry

# Deleted journals examined at most, newest first; a bound on the work, stated when reached.
MAX_DELETED = 200
_TIMEOUT_S = 60


def _git(top: Path, *args: str, text: bool = True) -> str | bytes:
    try:
        done = subprocess.run(
            ["git", "-C", str(top), *args],
            capture_output=True,
            text=text,
            timeout=_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:  # no git, or it hung past the bound
        raise NeedlepointError(f"git {args[0]}: {type(exc).__name__}") from None
    if done.returncode != 0:
        err = done.stderr if text else done.stderr.decode("utf-8", "replace")
        raise NeedlepointError(f"git {args[0]}: {str(err).strip()[:200]}")
    return done.stdout


def deleted_runs(root: Path) -> tuple[Path, list[tuple[str, str]]]:
    """The repository's top folder and (commit, run folder) for each journal a commit deleted."""
    try:
        top = Path(str(_git(root, "rev-parse", "--show-toplevel")).strip())
    except (OSError, subprocess.SubprocessError):
        raise NeedlepointError(f"{root}: git is not available to search the history") from None
    rel = Path(root).resolve().relative_to(top.resolve()).as_posix()
    log = str(
        _git(top, "log", "--all", "--diff-filter=D", "--name-only", "--format=%x00%H", "--", rel)
    )
    found: list[tuple[str, str]] = []
    for chunk in log.split("\x00")[1:]:
        lines = [x for x in chunk.splitlines() if x.strip()]
        commit, paths = lines[0], lines[1:]
        for path in paths:
            if posixpath.basename(path) == "journal.jsonl":
                found.append((commit, posixpath.dirname(path)))
    return top, found


def _files(top: Path, commit: str, folder: str) -> list[str]:
    out = str(_git(top, "ls-tree", "-r", "--name-only", commit, "--", folder + "/"))
    return [x for x in out.splitlines() if x]


def _materialise(top: Path, commit: str, run: str, scratch: Path) -> None:
    """Copy the run folder, its prepared folder and a pilot record out of ``commit``."""
    import json

    from needlepoint.run.folder import RUN_NAME, parse_run_record

    where = f"{commit}:{run}/{RUN_NAME}"
    record = parse_run_record(json.loads(str(_git(top, "show", where))), where)
    prepared = posixpath.normpath(posixpath.join(run, record.prepared_dir))
    wanted = _files(top, commit, run) + _files(top, commit, prepared)
    pilot = posixpath.join(posixpath.dirname(run), "pilot.json")
    wanted += [p for p in _files(top, commit, posixpath.dirname(run)) if p == pilot]
    data = _git(top, "archive", "--format=tar", commit, "--", *sorted(set(wanted)), text=False)
    with tarfile.open(fileobj=io.BytesIO(bytes(data))) as tar:
        tar.extractall(scratch, filter="data")


def history_runs(root: Path, present: set[str]) -> tuple[list[RunEntry], str]:
    """Runs in history only (journals not in ``present``), and a line saying what was searched."""
    top, deleted = deleted_runs(root)
    note = f"history: {len(deleted)} deleted run journal(s) under {root.as_posix()} in git"
    if len(deleted) > MAX_DELETED:
        note += f" (the newest {MAX_DELETED} read)"
    entries: list[RunEntry] = []
    seen = set(present)
    rel_root = Path(root).resolve().relative_to(top.resolve())
    with tempfile.TemporaryDirectory(prefix="needlepoint-history-") as tmp:
        for i, (commit, run) in enumerate(deleted[:MAX_DELETED]):
            scratch = Path(tmp) / str(i)
            try:
                parent = str(_git(top, "rev-parse", f"{commit}^")).strip()
                _materialise(top, parent, run, scratch)
            except (NeedlepointError, ValueError, OSError, tarfile.TarError) as exc:
                shown = f"{commit[:12]}^:{run}"
                entries.append(RunEntry(path=shown, pilot=False, problem=str(exc)[:200]))
                continue
            shown = f"{parent[:12]}:{Path(run).relative_to(rel_root).as_posix()}"
            owner = scratch / posixpath.dirname(run)
            pilot = pilot_design_of(owner) if (owner / "pilot.json").is_file() else None
            entry = read_entry(scratch / run, shown, pilot_design=pilot, root=scratch / rel_root)
            if entry.journal_sha256 and entry.journal_sha256 in seen:
                continue  # the same journal is still on the record (or listed already)
            seen.add(entry.journal_sha256)
            entries.append(entry)
    note += f"; {len(entries)} in history only (any other is still on record in the tree)"
    return entries, note
