"""The run folder's fixed records: ``run.json`` (what this run is) and ``context_manifest.json``
(what was put in front of the model), plus the folder lock that prevents two runners at once.

run.json is written once, when the folder is created; every later session is described in the
journal, whose session records carry run.json's SHA-256.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from needlepoint import __version__
from needlepoint.design.profiles import body_profile
from needlepoint.design.protocol import design_fingerprint
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes, file_sha256, read_json, write_bytes_atomic
from needlepoint.run.declaration import reference
from needlepoint.run.folder_schema import CONTEXT_FORMAT, check_context_manifest, not_a_run_folder
from needlepoint.run.run_record import (
    RUN_FORMAT,
    RUN_KIND,
    CostRecord,
    RunRecord,
    SimulationRecord,
)
from needlepoint.safeio import open_record
from needlepoint.schema import from_plain, to_plain

if TYPE_CHECKING:
    from needlepoint.run.journal_records import JournalState
    from needlepoint.run.settings import Settings

RUN_NAME = "run.json"
CONTEXT_NAME = "context_manifest.json"
LOCK_NAME = ".lock"
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


def read_run_record(run_dir: Path) -> RunRecord:
    """Load run.json, refusing an unknown format and any field that is missing or malformed."""
    path = run_dir / RUN_NAME
    if not os.path.lexists(path):
        not_a_run_folder(Path(run_dir))
    value = read_json(path, follow=False)
    if not isinstance(value, dict) or value.get("format") != RUN_FORMAT:
        raise NeedlepointError(f"{path}: field format: expected {RUN_FORMAT}")
    try:
        record: RunRecord = from_plain(RunRecord, value, "")
    except NeedlepointError as exc:
        raise NeedlepointError(f"{path}: field {exc}") from None
    return record


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
    from needlepoint.run.journal import JOURNAL_NAME, read_chain
    from needlepoint.run.journal_records import JournalState

    if not os.path.lexists(run_dir / JOURNAL_NAME):
        raise NeedlepointError(f"{run_dir / JOURNAL_NAME}: missing although run.json exists")
    path = run_dir / CONTEXT_NAME
    if os.path.lexists(path):
        listed = len(read_context_manifest(run_dir)["sent"])
        state = JournalState()
        read_chain(run_dir, state.add, keep=False, owner=True)
        sent = state.attempt_count
        if listed > sent:
            raise NeedlepointError(
                f"{path}: lists {listed} requests sent, the journal only {sent}: "
                "journal records were removed"
            )


def context_manifest(
    prepared_root: Path,
    prepared_fingerprint: str,
    prepared_files: dict[str, str],
    state: JournalState,
    count: int,
    head: str,
) -> dict[str, Any]:
    """What was in front of the model: the prepared folder's manifest hash and each body sent."""
    return {
        "format": CONTEXT_FORMAT,
        "prepared_dir": str(prepared_root),
        "prepared_manifest_sha256": prepared_fingerprint,
        "prepared_files": dict(sorted(prepared_files.items())),
        "sent": [dict(entry) for entry in state.sent],
        "journal_records": count,
        "journal_sha256": head,
    }


def write_context_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    write_bytes_atomic(run_dir / CONTEXT_NAME, json_bytes(manifest))


def relative_prepared(prepared_root: Path, run_dir: Path) -> str:
    """The prepared folder as seen from the run folder, so evidence carries no machine path."""
    return Path(os.path.relpath(prepared_root.resolve(), run_dir.resolve())).as_posix()


def build_run_record(s: Settings, created: str, run_dir: Path) -> RunRecord:
    """The run.json record for checked settings ``s``.

    Provenance that changes with every commit (git, interpreter, packages) goes to
    provenance.jsonl instead, so a simulated run's journal hash stays a pure function of the run.
    """
    p = s.prepared
    sim = None
    if s.simulate is not None:
        from needlepoint.run.simulate import FAULT_CYCLE

        sim = SimulationRecord(
            mode=s.simulate,
            params=s.sim_params,
            fault_cycle=FAULT_CYCLE if s.simulate == "faulty" else None,
        )
    return RunRecord(
        format=RUN_FORMAT,
        kind=RUN_KIND,
        created=created,
        simulation=s.simulation,
        simulate=sim,
        prepared_dir=relative_prepared(p.root, run_dir),
        prepared_fingerprint=p.fingerprint,
        protocol_id=p.protocol.get("protocol_id"),
        protocol_version=p.protocol.get("version"),
        model=s.model,
        base_url=s.base_url,
        api_key_env=s.api_key_env,
        allow=s.allow,
        min_gap_s=s.min_gap_s,
        protocol_min_gap_s=s.protocol_min_gap_s,
        override_reason=s.override_reason,
        timeout_s=s.timeout_s,
        deadline_s=s.deadline_s,
        cost=CostRecord(input_rate=s.input_rate, output_rate=s.output_rate, cap=s.cost_cap),
        package_version=__version__,
        extra=dict(s.run_meta),
        design_fingerprint=design_fingerprint(p.protocol),
        body_profile=body_profile(p.protocol),
        allow_insecure_http=True if s.allow_insecure_http else None,
        declaration=None if s.declaration is None else reference(s.declaration, run_dir),
    )


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
