"""The run folder's fixed records: ``run.json`` (what this run is), ``context_manifest.json``
(what was put in front of the model) and ``provenance.jsonl`` (which code ran each session),
plus the folder lock that prevents two runners at once.

run.json is written once, when the folder is created; every later session is described in the
journal, whose session records carry run.json's SHA-256. This is the one module that names
run.json: every other reads it through ``read_run_record`` and the readers beside it.
Provenance is kept out of run.json so that a simulated run's journal hash depends on the run
alone; ``evidence-diff`` skips it (wall-clock times, commits, load).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from needlepoint import __version__
from needlepoint.design.prepared import Prepared
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import (
    MAX_JSON_FILE_BYTES,
    canonical_bytes,
    file_sha256,
    read_json,
    sha256_hex,
    write_bytes_atomic,
)
from needlepoint.run.journal import JOURNAL_NAME, LOCK_NAME, Journal, walk
from needlepoint.run.records import (
    CONTEXT_FORMAT,
    RUN_FORMAT,
    DeclarationRef,
    RunRecord,
    check_context_manifest,
)
from needlepoint.safeio import append_bytes, open_record, read_limited, relative_path
from needlepoint.schema import from_plain, to_plain

RUN_NAME = "run.json"
CONTEXT_NAME = "context_manifest.json"
# Fields that must not change when a run folder is resumed: otherwise two runs would be pooled.
# A run's declaration is part of what it is: a resume must name the same one.
RESUME_FIXED = (
    "prepared_fingerprint",
    "simulation",
    "simulate",
    "model",
    "base_url",
    "declaration",
)


def json_bytes(value: Any) -> bytes:
    """Run-folder JSON files: canonical, plus a final newline for people reading them."""
    return canonical_bytes(value) + b"\n"


def write_run_record(run_dir: Path, record: RunRecord) -> str:
    """Write run.json once and return its SHA-256."""
    write_bytes_atomic(run_dir / RUN_NAME, json_bytes(to_plain(record)))
    return file_sha256(run_dir / RUN_NAME)


def run_record_sha256(run_dir: Path) -> str:
    """The SHA-256 of run.json as it is on disk: what every session record carries."""
    return sha256_hex(read_limited(run_dir / RUN_NAME, MAX_JSON_FILE_BYTES, follow=False))


def read_run_record(run_dir: Path) -> RunRecord:
    """Load run.json, refusing an unknown format and any field that is missing or malformed."""
    path = run_dir / RUN_NAME
    if not os.path.lexists(path):
        not_a_run_folder(Path(run_dir))
    return parse_run_record(read_json(path, follow=False), str(path))


def parse_run_record(value: Any, where: str) -> RunRecord:
    """run.json's JSON value as its record (``where`` names the file, even one in a git commit),
    refusing an unknown format and any field that is missing or malformed."""
    if not isinstance(value, dict) or value.get("format") != RUN_FORMAT:
        raise NeedlepointError(f"{where}: field format: expected {RUN_FORMAT}")
    try:
        record: RunRecord = from_plain(RunRecord, value, "")
    except NeedlepointError as exc:
        raise NeedlepointError(f"{where}: field {exc}") from None
    return record


def has_run_record(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a run.json: a run folder, new ones included once created."""
    return (Path(run_dir) / RUN_NAME).is_file()


def recorded_declaration(run_dir: Path) -> DeclarationRef | None:
    """The declaration run.json says the run was started under; None without one, or when
    run.json cannot be read (``audit-run`` is where a damaged run.json is reported)."""
    try:
        return read_run_record(Path(run_dir)).declaration
    except (NeedlepointError, OSError):
        return None


def read_context_manifest(run_dir: Path) -> dict[str, Any]:
    """Load context_manifest.json, checked field by field."""
    path = run_dir / CONTEXT_NAME
    return check_context_manifest(read_json(path, follow=False), str(path))


def check_resume(run_dir: Path, saved: RunRecord, wanted: RunRecord) -> None:
    """Refuse to resume a run folder with settings that would pool two different runs."""
    for name in RESUME_FIXED:
        # The saved value is shown as run.json holds it (sorted keys), the wanted one as built.
        was = json.loads(canonical_bytes(to_plain(getattr(saved, name))))
        now = to_plain(getattr(wanted, name))
        if was != now:
            raise NeedlepointError(
                f"{run_dir / RUN_NAME}: field {name} is {was!r}, this run has "
                f"{now!r}; use a new --run-dir"
            )


def check_not_rewound(run_dir: Path) -> None:
    """Refuse to resume a folder whose journal lost records: that would grant fresh budget."""
    if not os.path.lexists(run_dir / JOURNAL_NAME):
        raise NeedlepointError(f"{run_dir / JOURNAL_NAME}: missing although run.json exists")
    path = run_dir / CONTEXT_NAME
    if os.path.lexists(path):
        listed = len(read_context_manifest(run_dir)["sent"])
        sent = walk(run_dir, owner=True).state.attempt_count
        if listed > sent:
            raise NeedlepointError(
                f"{path}: lists {listed} requests sent, the journal only {sent}: "
                "journal records were removed"
            )


def write_context_manifest(run_dir: Path, prepared: Prepared, journal: Journal) -> None:
    """What was in front of the model: the prepared folder's manifest hash and each body sent."""
    manifest = {
        "format": CONTEXT_FORMAT,
        "prepared_dir": relative_path(prepared.root, run_dir),
        "prepared_manifest_sha256": prepared.fingerprint,
        "prepared_files": dict(sorted(prepared.manifest.get("files", {}).items())),
        "sent": [attempt.sent() for attempt in journal.state.sent],
        "journal_records": journal.count,
        "journal_sha256": journal.head,
    }
    write_bytes_atomic(run_dir / CONTEXT_NAME, json_bytes(manifest))


# How long a runner waits for readers that hold the folder lock shared.
READER_WAIT_S = 30.0


def _held_exclusively(path: Path) -> bool:
    """Whether a runner (not just readers) holds the lock file."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


class FolderLock:
    """An exclusive, non-blocking flock on the run folder; the kernel drops it if we die."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK_NAME
        self._fd: int | None = None

    def __enter__(self) -> FolderLock:
        fd = open_record(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + READER_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                # Readers (results, audit-run, analyze) hold it shared for a moment: wait for
                # them; another runner holds it exclusively: refuse at once.
                runner = _held_exclusively(self.path)
                if runner or time.monotonic() > deadline:
                    os.close(fd)
                    why = (
                        "another runner is using this run folder"
                        if runner
                        else f"readers have held its lock for over {READER_WAIT_S:g} s; "
                        "run it again when they end"
                    )
                    raise NeedlepointError(f"{self.path.parent}: {why}") from None
                time.sleep(0.05)
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def not_a_run_folder(folder: Path) -> None:
    """Name the folder given where a run folder was expected, when it is another kind."""
    if (folder / "plan.csv").is_file() and (folder / "manifest.json").is_file():
        raise NeedlepointError(
            f"{folder}: is a prepared folder (plan.csv, manifest.json; no run.json), not a run "
            f"folder: this command takes the run folder that `needlepoint run {folder} "
            "--run-dir RUNDIR ...` writes"
        )
    if (folder / "pilot.json").is_file() and (folder / "run" / "run.json").is_file():
        raise NeedlepointError(
            f"{folder}: is a pilot folder, not a run folder; its run is {folder / 'run'}"
        )


PROVENANCE_NAME = "provenance.jsonl"


def git_commit() -> dict[str, Any] | None:
    """The commit of the package source, when it runs from a git checkout; None otherwise."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--", "."],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head, "package_source_modified": bool(dirty)}


def _git(top: Path, *args: str) -> str | None:
    try:
        return subprocess.run(
            ["git", "-C", str(top), *args], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def _checkout() -> Path | None:
    """The top of the git checkout the package runs from; None outside one."""
    top = _git(Path(__file__).resolve().parent, "rev-parse", "--show-toplevel")
    return Path(top) if top else None


# What a declaration binds as code: a commit that differs only outside these paths (evidence,
# docs, tests) ran the same library with the same pins.
CODE_PATHS = ("lib", "pyproject.toml", "constraints.txt")


def code_changes(old: str, new: str) -> list[str] | None:
    """The code files (``CODE_PATHS``) that differ between two commits of the package's
    checkout; None where git cannot tell (no checkout, an unknown commit)."""
    # Both come from files a run folder holds: only a hex commit reaches git's command line.
    if not all(re.fullmatch(r"[0-9a-f]{7,64}", c) for c in (old, new)):
        return None
    top = _checkout()
    if top is None:
        return None
    changed = _git(top, "diff", "--name-only", old, new, "--", *CODE_PATHS)
    return None if changed is None else sorted(changed.splitlines())


def code_now() -> dict[str, Any]:
    """The code running now, as a declaration binds it (``declaration.CodeRef``): the git
    commit of the package's checkout, whether its tracked files are unmodified, and the
    SHA-256 of its constraints.txt; None for each that cannot be known."""
    top = _checkout()
    root = top or Path(__file__).resolve().parents[3]  # lib/needlepoint/run/ -> the project
    commit = _git(root, "rev-parse", "HEAD") if top else None
    status = _git(root, "status", "--porcelain", "--untracked-files=no") if top else None
    constraints = root / "constraints.txt"
    try:
        pinned = file_sha256(constraints) if constraints.is_file() else None
    except (OSError, ValueError, NeedlepointError):
        pinned = None
    return {
        "commit": commit or None,
        "tree_clean": None if status is None else not status,
        "constraints_sha256": pinned,
    }


def machine_load() -> dict[str, Any]:
    """The machine's load when a session starts or ends: a busy machine stretches every request
    (a shared 2-core machine once took 10 s requests to over 100 s), so a reader of the
    latencies must know it. ``load_average``: 1, 5 and 15 minutes; None where unknown."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {"load_average": load, "cpus": os.cpu_count()}


# A few hundred bytes a session: a provenance.jsonl far larger is not the runner's, and is
# not read.
MAX_PROVENANCE_BYTES = 16 << 20


def read_provenance(run_dir: Path) -> list[dict[str, Any]]:
    """provenance.jsonl's lines, oldest first: the one reader of the file. [] when it is absent,
    unreadable or larger than ``MAX_PROVENANCE_BYTES``; a line that is not a JSON object is
    skipped (provenance describes a run, it decides nothing)."""
    path = run_dir / PROVENANCE_NAME
    try:
        if path.stat().st_size > MAX_PROVENANCE_BYTES:
            return []
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    out = []
    for line in lines:
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def append_provenance(run_dir: Path, time_iso: str, end: bool = False) -> None:
    """Record, per session, which code and environment ran (commit, interpreter, packages) and
    the machine's load; ``end``: one more line when the session ends, with the load then."""
    if end:
        line = {"format": 1, "event": "session_end", "time": time_iso, **machine_load()}
        append_bytes(run_dir / PROVENANCE_NAME, canonical_bytes(line) + b"\n")
        return
    import platform
    from importlib.metadata import PackageNotFoundError, version

    packages = {}
    for name in ("httpx", "numpy", "scipy", "pandas", "matplotlib", "papermill", "tqdm"):
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            packages[name] = None
    line = {
        "format": 1,
        "time": time_iso,
        "package_version": __version__,
        "git": git_commit(),
        "code": code_now(),
        "python": platform.python_version(),
        "platform": platform.system(),
        "packages": packages,
        "event": "session_start",
        **machine_load(),
    }
    append_bytes(run_dir / PROVENANCE_NAME, canonical_bytes(line) + b"\n")
