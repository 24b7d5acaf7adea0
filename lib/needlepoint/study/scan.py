"""What lies under an evidence root: prepared folders, runs, pilots, analyses, comparisons,
calibration records and declarations, found by the files that mark them.

The walk never follows a symbolic link, looks at no more than ``MAX_ENTRIES`` entries and
``MAX_DEPTH`` levels, skips hidden folders (``.git``) and visits everything in sorted order, so
the same tree always gives the same listing. Paths are relative to the root, with ``/``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.run.folder import RUN_NAME
from needlepoint.run.journal import JOURNAL_NAME

MAX_ENTRIES = 100_000
MAX_DEPTH = 64
# A JSON file larger than this is no declaration or calibration record of ours.
MAX_RECORD_BYTES = 16 << 20
_MARKS = (b'"needlepoint-declaration"', b'"needlepoint-calibration"', b'"seeds"')


@dataclass
class Found:
    """Every marked folder and file under one root, each list sorted by path."""

    root: Path
    prepared: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    pilots: list[str] = field(default_factory=list)
    analyses: list[str] = field(default_factory=list)
    comparisons: list[str] = field(default_factory=list)
    calibrations: list[str] = field(default_factory=list)
    declarations: list[str] = field(default_factory=list)
    # Protocol files: every prepared folder's protocol.json, a pilot's design.json, and any
    # protocol file (a calibrated version, say) kept under the root.
    protocols: list[str] = field(default_factory=list)

    def counts(self) -> str:
        """``3 prepared folders, 2 runs, ...`` for a heading line."""
        parts = [
            (len(self.prepared), "prepared folder"),
            (len(self.runs), "run"),
            (len(self.pilots), "pilot"),
            (len(self.calibrations), "calibration record"),
            (len(self.analyses), "analysis"),
            (len(self.comparisons), "comparison"),
            (len(self.declarations), "declaration"),
        ]
        return ", ".join(f"{n} {_plural(word, n)}" for n, word in parts)


def _plural(word: str, n: int) -> str:
    if n == 1:
        return word
    return word[:-2] + "es" if word.endswith("is") else word + "s"


def scan(root: str | Path) -> Found:
    """Walk ``root`` once and sort what it holds; a missing root is refused with one line."""
    base = Path(root)
    if not base.is_dir():
        raise NeedlepointError(f"{base}: no such evidence folder")
    found = Found(base)
    seen = 0
    for here, dirs, files in os.walk(base, followlinks=False, onerror=_refuse):
        rel = Path(here).relative_to(base)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if len(rel.parts) > MAX_DEPTH:
            raise NeedlepointError(f"{here}: more than {MAX_DEPTH} folders deep")
        seen += len(dirs) + len(files)
        if seen > MAX_ENTRIES:
            raise NeedlepointError(f"{base}: more than {MAX_ENTRIES} entries to look at")
        names = set(files)
        where = rel.as_posix()
        if {"manifest.json", "protocol.json", "plan.csv"} <= names:
            found.prepared.append(where)
        if {RUN_NAME, JOURNAL_NAME} <= names:
            found.runs.append(where)
        if "pilot.json" in names:
            found.pilots.append(where)
        if "analysis.json" in names:
            found.analyses.append(where)
        if "comparison.json" in names:
            found.comparisons.append(where)
        for name in sorted(n for n in names if n.endswith(".json")):
            kind = _marked(Path(here) / name)
            if kind is not None:
                getattr(found, kind).append((rel / name).as_posix())
    return found


def _refuse(exc: OSError) -> None:
    raise NeedlepointError(f"{exc.filename}: cannot read ({exc.strerror})")


def _marked(path: Path) -> str | None:
    """What a JSON file is by its top level: a declaration, a calibration record, a protocol."""
    import json

    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_RECORD_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if not any(mark in data for mark in _MARKS):
        return None  # a cheap look first: only files that mention a mark are parsed
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    fmt = value.get("format")
    if fmt == "needlepoint-declaration":
        return "declarations"
    if fmt == "needlepoint-calibration":
        return "calibrations"
    if "protocol_id" in value and isinstance(value.get("seeds"), dict):
        return "protocols"
    return None


def lenient_field(value: Any, *keys: str) -> Any:
    """``value[k1][k2]…`` of a JSON value, or None where any step is missing or not an object."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def lenient_json(path: Path) -> Any:
    """A JSON file's value, or None when it cannot be read: listing a record never fails on
    one damaged file (the audit and the readers are where it is refused)."""
    from needlepoint.jsonio import read_json

    try:
        return read_json(path)
    except NeedlepointError:
        return None
