"""Load the context that the checks read: a workspace folder, one file, or a frozen manifest.

Given a manifest, every frozen file is read back and hashed again, so a check can say whether
it looked at exactly the context that was frozen, or at files that changed since.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from needlepoint.contamination.formats import iso_from_ns
from needlepoint.contamination.manifest import Manifest, read_manifest
from needlepoint.contamination.select import DEFAULT_INCLUDES, Problem, select_files
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import sha256_hex

# The checks hold each context file's text in memory; a larger file is reported, not read.
MAX_TEXT_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class ContextFile:
    """One context file's text, with the modification time the checks go by."""

    path: str
    size: int
    mtime_ns: int
    sha256: str
    text: str

    @property
    def mtime(self) -> str:
        """The modification time as an exact ISO 8601 UTC string."""
        return iso_from_ns(self.mtime_ns)


@dataclass(frozen=True)
class Change:
    """A difference between a frozen manifest and the files on disk now."""

    path: str
    kind: str
    detail: str


@dataclass(frozen=True)
class Verification:
    """Whether the files still hash as frozen in the manifest."""

    manifest_sha256: str
    frozen_files: int
    changes: tuple[Change, ...]

    @property
    def verified(self) -> bool:
        """True when nothing was missing, changed or added since the freeze."""
        return not self.changes

    def sentence(self) -> str:
        """One line for reports."""
        if self.verified:
            return f"all {self.frozen_files} frozen files still hash as frozen"
        kinds = sorted({c.kind for c in self.changes})
        return (
            f"{len(self.changes)} difference(s) from the frozen manifest ({', '.join(kinds)}): "
            "the check read today's files, not the frozen context"
        )


@dataclass(frozen=True)
class Context:
    """What the checks read, where it came from, and what could not be read."""

    source: str
    kind: str
    files: tuple[ContextFile, ...]
    problems: tuple[Problem, ...]
    manifest: Manifest | None = None
    verification: Verification | None = None


# Problems that mean part of the context was not read: a check cannot pass over them (the gate
# fails closed). A link outside the root and a file that is not UTF-8 were still read.
UNREAD_KINDS = frozenset(
    {"symlink-loop", "dangling-symlink", "unreadable", "not-a-regular-file", "too-deep"}
    | {"too-large"}
)
UNREAD_CHANGES = frozenset({"missing", "unreadable"})


def unread_parts(problems: Sequence[Problem], verification: Verification | None) -> list[str]:
    """``path: kind (detail)`` for each part of the context that could not be read."""
    out = [f"{p.path}: {p.kind} ({p.detail})" for p in problems if p.kind in UNREAD_KINDS]
    changes = verification.changes if verification is not None else ()
    out += [f"{c.path}: {c.kind} ({c.detail})" for c in changes if c.kind in UNREAD_CHANGES]
    return out


def _decode(path: str, data: bytes, problems: list[Problem]) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(Problem(path, "not-utf8", f"undecodable byte at offset {exc.start}"))
        return data.decode("utf-8", errors="replace")


def _read(
    path: str, location: Path, problems: list[Problem]
) -> tuple[os.stat_result, bytes] | None:
    try:
        # O_NONBLOCK: a FIFO put where a frozen file was must be reported, not block the check.
        with os.fdopen(os.open(location, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                problems.append(Problem(path, "not-a-regular-file", stat.filemode(st.st_mode)))
                return None
            if st.st_size > MAX_TEXT_BYTES:
                problems.append(Problem(path, "too-large", f"{st.st_size} bytes"))
                return None
            # In pieces: read(MAX_TEXT_BYTES + 1) would allocate the whole limit up front.
            pieces, total = [], 0
            while total <= MAX_TEXT_BYTES and (piece := fh.read(1 << 20)):
                pieces.append(piece)
                total += len(piece)
            data = b"".join(pieces)
            if len(data) > MAX_TEXT_BYTES:  # it grew while we read it
                problems.append(Problem(path, "too-large", f"over {MAX_TEXT_BYTES} bytes"))
                return None
            return st, data
    except OSError as exc:
        problems.append(Problem(path, "unreadable", exc.strerror or str(exc)))
        return None


def _from_manifest(source: str, manifest: Manifest) -> Context:
    root = Path(manifest.root)
    if not root.is_dir():
        raise NeedlepointError(f"{source}: field 'root': '{manifest.root}' is not a directory here")
    problems = list(manifest.problems)
    changes: list[Change] = []
    files: list[ContextFile] = []
    for e in manifest.files:
        location = root / e.path
        if not os.path.lexists(location):
            changes.append(Change(e.path, "missing", "frozen file no longer exists"))
            continue
        got = _read(e.path, location, problems)
        if got is None:
            changes.append(Change(e.path, "unreadable", "frozen file cannot be read now"))
            continue
        _, data = got
        digest = sha256_hex(data)
        if digest != e.sha256:
            changes.append(
                Change(e.path, "changed", f"sha256 {digest[:12]}… ≠ frozen {e.sha256[:12]}…")
            )
        text = _decode(e.path, data, problems)
        files.append(ContextFile(e.path, len(data), e.mtime_ns, digest, text))
    frozen = {e.path for e in manifest.files}
    candidates, _ = select_files(root, manifest.includes)
    for c in candidates:
        if c.path not in frozen:
            changes.append(Change(c.path, "added", "included now but not frozen"))
    check = Verification(manifest.sha256, len(manifest.files), tuple(changes))
    return Context(source, "manifest", tuple(files), tuple(problems), manifest, check)


def load_context(source: str | os.PathLike[str], includes: Sequence[str] | None = None) -> Context:
    """Load a workspace folder (with ``includes``), one file, or a ``*.json`` manifest."""
    p = Path(source)
    name = os.fspath(source)
    if p.is_file() and p.suffix == ".json":
        if includes is not None:
            raise NeedlepointError(f"{p}: --include applies to a folder, not to a manifest")
        return _from_manifest(name, read_manifest(p))
    problems: list[Problem] = []
    if p.is_dir():
        candidates, found = select_files(p, DEFAULT_INCLUDES if includes is None else includes)
        problems.extend(found)
        targets = [(c.path, c.location) for c in candidates]
        kind = "directory"
    elif p.is_file():
        targets, kind = [(p.name, p)], "file"
    elif p.exists():
        raise NeedlepointError(f"{p}: not a regular file or folder")
    else:
        raise NeedlepointError(f"{p}: file not found")
    files: list[ContextFile] = []
    for path, location in targets:
        got = _read(path, location, problems)
        if got is not None:
            st, data = got
            text = _decode(path, data, problems)
            files.append(ContextFile(path, len(data), st.st_mtime_ns, sha256_hex(data), text))
    problems.sort(key=lambda q: (q.path, q.kind))
    return Context(name, kind, tuple(files), tuple(problems))
