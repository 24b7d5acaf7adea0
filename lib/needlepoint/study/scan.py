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
from needlepoint.jsonio import read_json
from needlepoint.pilot.folder import OnRecord, index_materials, record_overlap, request_hashes
from needlepoint.run.folder import RUN_NAME, read_run_record
from needlepoint.run.journal import JOURNAL_NAME
from needlepoint.safeio import WALK_MAX_DEPTH as MAX_DEPTH
from needlepoint.safeio import WALK_MAX_ENTRIES as MAX_ENTRIES

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


# Fresh materials for a new version: what the designs already run under the root asked, and
# the version numbers their protocols use.
#
# A new design version (a design fingerprint no run under the root has) must not ask a target
# name, target code or request that a design already run asked, by the pilot's disjointness rule
# (docs/pilot.md) plus identical request bytes, unless `prepare --reuse-materials REASON` records
# why. A version number already used by another design of the same protocol id is refused, and a
# calibrated version's seed avoids every design on record.


@dataclass(frozen=True)
class DesignRun:
    """One prepared folder that a run under the root used, and what it asked."""

    path: str
    design_fingerprint: str
    record: OnRecord


def designs_run(root: Path) -> list[DesignRun]:
    """Every prepared folder used by a run or pilot under ``root``, once (unreadable: skipped)."""
    from needlepoint.design.generate import generate_cases
    from needlepoint.design.prepared import load_prepared
    from needlepoint.design.protocol import design_fingerprint

    base = Path(root)
    seen: set[Path] = set()
    out = []
    for rel in scan(base).runs:
        try:
            folder = (base / rel / read_run_record(base / rel).prepared_dir).resolve()
            if folder in seen:
                continue
            seen.add(folder)
            prepared = load_prepared(folder)
        except (NeedlepointError, OSError, KeyError, TypeError, ValueError):
            continue
        shown = Path(_relative(folder, base)).as_posix()
        materials = index_materials(generate_cases(prepared.protocol), f"`{shown}`")
        requests = frozenset(row.request_sha256 for row in prepared.plan)
        fingerprint = design_fingerprint(prepared.protocol)
        out.append(DesignRun(shown, fingerprint, OnRecord(materials, requests, fingerprint)))
    return out


def _relative(folder: Path, base: Path) -> str:
    try:
        return folder.relative_to(base.resolve()).as_posix()
    except ValueError:
        return folder.name


def records_for(root: Path | None, exclude: str | None = None) -> tuple[OnRecord, ...]:
    """The designs on record as ``calibrate`` avoids them (``exclude``: a design fingerprint)."""
    if root is None:
        return ()
    return tuple(d.record for d in designs_run(root) if d.design_fingerprint != exclude)


def reuse_of(protocol: dict[str, Any], root: Path) -> list[str]:
    """For a new design version: the first overlap with each design run under ``root``."""
    from needlepoint.design.generate import generate_cases
    from needlepoint.design.protocol import design_fingerprint

    runs = designs_run(root)
    mine = design_fingerprint(protocol)
    if any(d.design_fingerprint == mine for d in runs):
        return []  # a model variant of a design on record: the same materials by definition
    new = index_materials(generate_cases(protocol), "the new version")
    requests = request_hashes(protocol)
    found = (record_overlap(new, requests, (d.record,)) for d in runs)
    return [f for f in found if f is not None]


def check_fresh(
    protocol: dict[str, Any], root: Path | None, reason: str | None
) -> tuple[dict[str, Any], list[str]]:
    """The protocol to prepare (with ``materials_reuse`` when a reason covers a reuse) and what
    to print; a reuse without a reason is refused with one line."""
    if root is None:
        return protocol, ["materials: no evidence root given or found; nothing on record checked"]
    overlaps = reuse_of(protocol, root)
    from needlepoint.analysis.report import display  # no machine path in what is printed

    if not overlaps:
        note = f"materials: nothing shared with the designs run under {display(root)}"
        if reason:
            note += " (--reuse-materials not needed, not recorded)"
        return protocol, [note]
    if not (reason or "").strip():
        raise NeedlepointError(
            f"the new version reuses materials of a design already run under "
            f"{display(root)}: {overlaps[0]}; give it another seeds.materials, or "
            "--reuse-materials REASON to record why"
        )
    marked = dict(protocol, materials_reuse={"reason": reason.strip(), "overlaps": overlaps})
    return marked, [f"materials reused, recorded with the reason: {o}" for o in overlaps]


def versions_on_record(
    root: Path, exclude: Path | None = None
) -> dict[tuple[str, int], dict[str, str]]:
    """(protocol id, version) -> {design fingerprint: first file} for every protocol under root."""
    from needlepoint.design.protocol import design_fingerprint

    base = Path(root)
    skip = None if exclude is None else exclude.resolve()
    out: dict[tuple[str, int], dict[str, str]] = {}
    for rel in scan(base).protocols:
        path = (base / rel).resolve()
        if skip is not None and (path == skip or skip in path.parents):
            continue
        try:
            p = read_json(path)
            key = (str(p["protocol_id"]), int(p["version"]))
            fingerprint = design_fingerprint(p)
        except (NeedlepointError, KeyError, TypeError, ValueError):
            continue
        out.setdefault(key, {}).setdefault(fingerprint, rel)
    return out


def check_version(
    root: Path | None,
    protocol_id: str,
    version: int,
    fingerprint: str | None = None,
    exclude: Path | None = None,
) -> None:
    """Refuse a version that another design of the same protocol id uses under ``root``.

    ``fingerprint``: the new design's, when known (its own variants may share the version).
    """
    if root is None:
        return
    used = versions_on_record(root, exclude).get((protocol_id, version), {})
    others = {fp: rel for fp, rel in used.items() if fp != fingerprint}
    if others:
        fp, rel = sorted(others.items(), key=lambda x: x[1])[0]
        raise NeedlepointError(
            f"version {version} of {protocol_id} is already used by another design under "
            f"{root.as_posix()} ({rel}, design {fp[:12]}…); choose a version no design there uses"
        )
