"""The context manifest: the automatic context of a workspace frozen on the run date.

Each included file is recorded with its path relative to the root, size, modification time and
SHA-256, sorted by path. Afterwards "was the answer in front of the model" can still be asked.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.contamination.formats import iso_from_ns
from needlepoint.contamination.select import DEFAULT_INCLUDES, Problem, select_files
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import (
    canonical_bytes,
    file_sha256,
    read_json,
    sha256_hex,
    write_bytes_atomic,
)

MANIFEST_FORMAT = "contamination-manifest/1"


@dataclass(frozen=True)
class ManifestEntry:
    """One frozen file. ``link`` is the symlink text it was reached through, if any."""

    path: str
    size: int
    mtime_ns: int
    sha256: str
    link: str | None = None
    outside_root: bool = False

    @property
    def mtime(self) -> str:
        """The modification time as an exact ISO 8601 UTC string."""
        return iso_from_ns(self.mtime_ns)


@dataclass(frozen=True)
class Manifest:
    """The frozen composition of a workspace's automatic context."""

    root: str
    includes: tuple[str, ...]
    files: tuple[ManifestEntry, ...]
    problems: tuple[Problem, ...]

    def to_json(self) -> dict[str, Any]:
        """The versioned JSON document (the root as it was given, so relative stays relative)."""
        return {
            "format": MANIFEST_FORMAT,
            "root": self.root,
            "includes": list(self.includes),
            "files": [
                {
                    "path": e.path,
                    "size": e.size,
                    "mtime_ns": e.mtime_ns,
                    "mtime": e.mtime,
                    "sha256": e.sha256,
                    "link": e.link,
                    "outside_root": e.outside_root,
                }
                for e in self.files
            ],
            "problems": [
                {"path": p.path, "kind": p.kind, "detail": p.detail} for p in self.problems
            ],
        }

    @property
    def sha256(self) -> str:
        """One value naming this context: the canonical document without ``root``, so the same
        files frozen from another checkout or folder name hash the same."""
        doc = self.to_json()
        del doc["root"]
        return sha256_hex(canonical_bytes(doc))


def build_manifest(
    root: str | os.PathLike[str], includes: Sequence[str] = DEFAULT_INCLUDES
) -> Manifest:
    """Freeze the included files under ``root``; unreadable ones become problems."""
    candidates, problems = select_files(root, includes)
    entries: list[ManifestEntry] = []
    found = list(problems)
    for c in candidates:
        try:
            st = os.stat(c.location)
            digest = file_sha256(c.location)
        except OSError as exc:
            found.append(Problem(c.path, "unreadable", exc.strerror or str(exc)))
            continue
        entries.append(
            ManifestEntry(c.path, st.st_size, st.st_mtime_ns, digest, c.link, c.outside_root)
        )
    found.sort(key=lambda p: (p.path, p.kind))
    return Manifest(os.fspath(root), tuple(includes), tuple(entries), tuple(found))


def write_manifest(manifest: Manifest, path: str | os.PathLike[str]) -> None:
    """Write the manifest as canonical JSON with a trailing newline."""
    write_bytes_atomic(path, canonical_bytes(manifest.to_json()) + b"\n")


def _field(p: Path, where: str, obj: dict[str, Any], name: str, kind: type) -> Any:
    value = obj.get(name)
    # JSON true/false are Python bools, which are also ints: refuse them where a number belongs.
    if name not in obj or not isinstance(value, kind) or isinstance(value, bool):
        raise NeedlepointError(f"{p}: field '{where}{name}': missing or of the wrong type")
    return value


# The last instant datetime can show (9999-12-31): later mtimes cannot be written as ISO dates.
_MAX_MTIME_NS = 253_402_300_799 * 10**9


def _relative(p: Path, where: str, path: str) -> str:
    """A frozen path must stay inside its root: relative, no '..', no empty segment."""
    parts = path.split("/")
    if path.startswith("/") or any(s in ("", ".", "..") for s in parts) or "\0" in path:
        raise NeedlepointError(
            f"{p}: field '{where}path': {path[:80]!r} is not a path inside the root"
        )
    return path


def read_manifest(path: str | os.PathLike[str]) -> Manifest:
    """Load a manifest written by :func:`write_manifest`; errors name the file and the field."""
    p = Path(path)
    doc = read_json(p, pipes=True)
    if not isinstance(doc, dict):
        raise NeedlepointError(f"{p}: expected a JSON object")
    if doc.get("format") != MANIFEST_FORMAT:
        raise NeedlepointError(
            f"{p}: field 'format': expected '{MANIFEST_FORMAT}', found {doc.get('format')!r}"
        )
    root = _field(p, "", doc, "root", str)
    includes = _field(p, "", doc, "includes", list)
    if not all(isinstance(i, str) for i in includes):
        raise NeedlepointError(f"{p}: field 'includes': expected strings")
    entries = []
    for i, f in enumerate(_field(p, "", doc, "files", list)):
        where = f"files[{i}]."
        if not isinstance(f, dict):
            raise NeedlepointError(f"{p}: field 'files[{i}]': expected an object")
        link = f.get("link")
        if link is not None and not isinstance(link, str):
            raise NeedlepointError(f"{p}: field '{where}link': expected a string or null")
        entry = ManifestEntry(
            _relative(p, where, _field(p, where, f, "path", str)),
            _field(p, where, f, "size", int),
            _field(p, where, f, "mtime_ns", int),
            _field(p, where, f, "sha256", str),
            link,
            f.get("outside_root", False),
        )
        if not isinstance(entry.outside_root, bool):
            raise NeedlepointError(f"{p}: field '{where}outside_root': expected true or false")
        if entry.size < 0 or not 0 <= entry.mtime_ns <= _MAX_MTIME_NS:
            raise NeedlepointError(f"{p}: field '{where}mtime_ns': not a time from 1970 to 9999")
        if len(entry.sha256) != 64 or set(entry.sha256) - set("0123456789abcdef"):
            raise NeedlepointError(f"{p}: field '{where}sha256': expected a hex SHA-256")
        entries.append(entry)
    problems = []
    for i, q in enumerate(doc.get("problems", [])):
        if not isinstance(q, dict):
            raise NeedlepointError(f"{p}: field 'problems[{i}]': expected an object")
        where = f"problems[{i}]."
        problems.append(
            Problem(
                _field(p, where, q, "path", str),
                _field(p, where, q, "kind", str),
                _field(p, where, q, "detail", str),
            )
        )
    return Manifest(root, tuple(includes), tuple(entries), tuple(problems))
