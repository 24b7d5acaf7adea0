"""``provenance.jsonl``: which code and environment ran each session of a run, and how busy the
machine was. Kept out of ``run.json`` so that a simulated run's journal hash depends on the run
alone; ``evidence-diff`` skips it (wall-clock times, commits, load)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from needlepoint import __version__
from needlepoint.jsonio import canonical_bytes
from needlepoint.safeio import append_bytes

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


def machine_load() -> dict[str, Any]:
    """The machine's load when a session starts or ends: a busy machine stretches every request
    (a shared 2-core machine once took 10 s requests to over 100 s), so a reader of the
    latencies must know it. ``load_average``: 1, 5 and 15 minutes; None where unknown."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {"load_average": load, "cpus": os.cpu_count()}


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
        "python": platform.python_version(),
        "platform": platform.system(),
        "packages": packages,
        "event": "session_start",
        **machine_load(),
    }
    append_bytes(run_dir / PROVENANCE_NAME, canonical_bytes(line) + b"\n")
