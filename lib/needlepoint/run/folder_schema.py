"""The documented fields of ``context_manifest.json``, checked on every read.

A run folder may be copied, archived and handed around; whoever reads it back (resume,
``audit-run``) meets a damaged file as one line naming the field, never a traceback.
(``run.json`` is read through its typed record, ``run_record.RunRecord``.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.schema import Fields

CONTEXT_FORMAT = 1


def check_context_manifest(value: Any, where: str) -> dict[str, Any]:
    """context_manifest.json: the prepared folder's hashes and every request body sent."""
    f = Fields(value, where)
    f.choice("format", (CONTEXT_FORMAT,))
    f.text("prepared_dir")
    f.sha256("prepared_manifest_sha256")
    files = f.nested("prepared_files")
    assert files is not None
    for name in files.obj:
        files.sha256(name)
    f.array("sent", lambda v: isinstance(v, dict), "an object")
    for i, entry in enumerate(f.obj["sent"]):
        e = Fields(entry, where, f"sent[{i}].")
        e.integer("seq")
        e.sha256("request_sha256")
        e.text("time")
    f.integer("journal_records", low=0)
    f.sha256("journal_sha256")
    return value


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
