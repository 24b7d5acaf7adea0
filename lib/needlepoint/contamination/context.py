"""The context the checks read: which files arrive automatically, frozen as a manifest, loaded.

Which files: patterns are matched against the path relative to the workspace root, segment by
segment (``*`` and ``?`` stay inside one segment, ``**`` spans any number of segments, at least
one when it ends the pattern). The manifest freezes them on the run date: each file's path
relative to the root, size, modification time and SHA-256, sorted by path, so "was the answer in
front of the model" can still be asked afterwards. Loading reads a workspace folder, one file,
or a manifest; given a manifest, every frozen file is read back and hashed again, so a check can
say whether it looked at exactly the context that was frozen, or at files that changed since.
Anything that cannot be read is a problem, never dropped silently.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from needlepoint.contamination.inputs import iso_from_ns
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import (
    canonical_bytes,
    file_sha256,
    read_json,
    sha256_hex,
    write_bytes_atomic,
)
from needlepoint.safeio import WALK_MAX_DEPTH as MAX_DEPTH
from needlepoint.safeio import WALK_MAX_ENTRIES as MAX_ENTRIES
from needlepoint.schema import IN_MEMORY, Fields, fields_plain, to_plain

# Files that coding agents load on their own at the start of a session, and the folders
# where they keep memory and notes between sessions.
DEFAULT_INCLUDES: tuple[str, ...] = (
    "CLAUDE.md",
    "CLAUDE.local.md",
    ".claude/CLAUDE.md",
    "AGENTS.md",
    "GEMINI.md",
    ".cursorrules",
    ".github/copilot-instructions.md",
    "memory/**",
    ".memory/**",
    ".claude/memory/**",
    "notes/**",
    ".notes/**",
)


@dataclass(frozen=True)
class Candidate:
    """A selected regular file: its relative path, where it lives, and any symlink it came by."""

    path: str
    location: Path
    link: str | None
    outside_root: bool


@dataclass(frozen=True)
class Problem:
    """Something in the context that could not be read or lies outside the root."""

    path: str
    kind: str
    detail: str


def _full_match(pat: Sequence[str], segs: Sequence[str], pi: int = 0, si: int = 0) -> bool:
    if pi == len(pat):
        return si == len(segs)
    if pat[pi] == "**":
        if pi == len(pat) - 1:
            return si < len(segs)
        return _full_match(pat, segs, pi + 1, si) or (
            si < len(segs) and _full_match(pat, segs, pi, si + 1)
        )
    return (
        si < len(segs) and fnmatchcase(segs[si], pat[pi]) and _full_match(pat, segs, pi + 1, si + 1)
    )


def _may_contain(pat: Sequence[str], segs: Sequence[str], pi: int = 0, si: int = 0) -> bool:
    """Whether a directory with these segments could hold a file that the pattern matches."""
    if si == len(segs):
        return pi < len(pat)
    if pi == len(pat):
        return False
    if pat[pi] == "**":
        return _may_contain(pat, segs, pi + 1, si) or _may_contain(pat, segs, pi, si + 1)
    return fnmatchcase(segs[si], pat[pi]) and _may_contain(pat, segs, pi + 1, si + 1)


def split_pattern(pattern: str) -> tuple[str, ...]:
    """Split a glob into segments, refusing patterns that could never name a relative path."""
    segs = tuple(s for s in pattern.replace("\\", "/").split("/") if s not in ("", "."))
    if not segs or pattern.startswith("/") or ".." in segs:
        raise NeedlepointError(f"--include '{pattern}': expected a glob relative to the root")
    return segs


def select_files(
    root: str | os.PathLike[str], includes: Sequence[str] = DEFAULT_INCLUDES
) -> tuple[tuple[Candidate, ...], tuple[Problem, ...]]:
    """Walk ``root`` in sorted order and return the included files and the problems met."""
    base = Path(root)
    if not base.is_dir():
        raise NeedlepointError(f"{base}: not a directory")
    real_root = os.path.realpath(base)
    patterns = [split_pattern(p) for p in includes]
    found: list[Candidate] = []
    problems: list[Problem] = []

    def inside(real: str) -> bool:
        return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)

    def contains_root(real: str) -> bool:
        return real_root == real or real_root.startswith(real.rstrip(os.sep) + os.sep)

    walked = [0]

    def walk(directory: Path, real_dir: str, segs: tuple[str, ...], active: frozenset[str],
             via: str | None) -> None:  # fmt: skip
        if len(segs) > MAX_DEPTH:
            problems.append(Problem("/".join(segs), "too-deep", f"more than {MAX_DEPTH} levels"))
            return
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            problems.append(Problem("/".join(segs) or ".", "unreadable", exc.strerror or "error"))
            return
        walked[0] += len(entries)
        if walked[0] > MAX_ENTRIES:
            raise NeedlepointError(
                f"{base}: more than {MAX_ENTRIES} entries to look at; narrow --include or "
                "remove symlinks that lead to large folders"
            )
        for entry in entries:
            rel = (*segs, entry.name)
            try:
                visit(entry, rel, real_dir, active, via)
            except OSError as exc:  # it vanished or changed while we looked
                problems.append(Problem("/".join(rel), "unreadable", exc.strerror or "error"))

    def visit(entry: os.DirEntry[str], rel: tuple[str, ...], real_dir: str,
              active: frozenset[str], via: str | None) -> None:  # fmt: skip
        path = "/".join(rel)
        is_link = entry.is_symlink()
        # Plain files and folders need no system call beyond the listing itself.
        if not is_link and entry.is_file(follow_symlinks=False):
            if any(_full_match(p, rel) for p in patterns):
                found.append(Candidate(path, Path(entry.path), via, via is not None))
            return
        if not is_link and entry.is_dir(follow_symlinks=False):
            if any(_may_contain(p, rel) for p in patterns):
                real = os.path.join(real_dir, entry.name)
                walk(Path(entry.path), real, rel, active | {real}, via)
            return
        # Symlinks and special files: the careful path.
        link = os.readlink(entry.path) if is_link else None
        try:
            st = os.stat(entry.path)
        except OSError as exc:
            if any(_full_match(p, rel) for p in patterns):
                kind = "dangling-symlink" if is_link else "unreadable"
                problems.append(Problem(path, kind, exc.strerror or "error"))
            return
        real = os.path.realpath(entry.path) if is_link else os.path.join(real_dir, entry.name)
        outside = is_link and not inside(real)
        if stat.S_ISDIR(st.st_mode):
            if not any(_may_contain(p, rel) for p in patterns):
                return
            if real in active or contains_root(real):
                # A link to the root or above it (``/``, ``..``) would walk the root again.
                problems.append(Problem(path, "symlink-loop", f"-> {link}"))
                return
            if outside:
                problems.append(Problem(path, "symlink-outside-root", f"-> {link}"))
            walk(Path(entry.path), real, rel, active | {real}, via or (link if outside else None))
        elif any(_full_match(p, rel) for p in patterns):
            if outside:
                problems.append(Problem(path, "symlink-outside-root", f"-> {link}"))
            if not stat.S_ISREG(st.st_mode):
                problems.append(Problem(path, "not-a-regular-file", stat.filemode(st.st_mode)))
                return
            found.append(Candidate(path, Path(entry.path), link or via, outside or via is not None))

    walk(base, real_root, (), frozenset({real_root}), None)
    return tuple(found), tuple(problems)


# --- the manifest ------------------------------------------------------------------------------

MANIFEST_FORMAT = "contamination-manifest/1"


@dataclass(frozen=True)
class FileStamp:
    """A context file as the checks go by it: path below the root, size, mtime and SHA-256."""

    path: str
    size: int
    mtime_ns: int
    sha256: str
    mtime: str = field(init=False)  # mtime_ns as an exact ISO 8601 UTC string, for a reader

    def __post_init__(self) -> None:
        object.__setattr__(self, "mtime", iso_from_ns(self.mtime_ns))


@dataclass(frozen=True)
class ManifestEntry(FileStamp):
    """One frozen file. ``link`` is the symlink text it was reached through, if any."""

    link: str | None = None
    outside_root: bool = False


@dataclass(frozen=True)
class Manifest:
    """The frozen composition of a workspace's automatic context. Its fields are the versioned
    document, with the root as it was given (so relative stays relative)."""

    root: str
    includes: tuple[str, ...]
    files: tuple[ManifestEntry, ...]
    problems: tuple[Problem, ...]
    format: str = MANIFEST_FORMAT

    @property
    def sha256(self) -> str:
        """One value naming this context: the canonical document without ``root``, so the same
        files frozen from another checkout or folder name hash the same."""
        doc = fields_plain(self)
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


def manifest_bytes(manifest: Manifest) -> bytes:
    """The manifest file: canonical JSON with a trailing newline."""
    return canonical_bytes(to_plain(manifest)) + b"\n"


def write_manifest(manifest: Manifest, path: str | os.PathLike[str]) -> None:
    """Write the manifest file (``manifest_bytes``)."""
    write_bytes_atomic(path, manifest_bytes(manifest))


# The last instant datetime can show (9999-12-31): later mtimes cannot be written as ISO dates.
_MAX_MTIME_NS = 253_402_300_799 * 10**9


def _is_object(value: Any) -> bool:
    return isinstance(value, dict)


def _inside_root(entry: Fields) -> str:
    """A frozen path must stay inside its root: relative, no '..', no empty segment."""
    path = str(entry.text("path"))
    if path.startswith("/") or any(s in ("", ".", "..") for s in path.split("/")) or "\0" in path:
        raise entry.fail("path", f"{path[:80]!r} is not a path inside the root")
    return path


def read_manifest(path: str | os.PathLike[str]) -> Manifest:
    """Load a manifest written by :func:`write_manifest`, checked field by field through
    ``Fields``; an error names the file and the field."""
    p = Path(path)
    f = Fields(read_json(p, pipes=True), str(p))
    f.choice("format", (MANIFEST_FORMAT,))
    root = f.text("root")
    includes = f.array("includes", lambda v: isinstance(v, str), "a string")
    entries = []
    for i, item in enumerate(f.array("files", _is_object, "an object")):
        e = Fields(item, str(p), f"files[{i}].")
        entries.append(
            ManifestEntry(
                _inside_root(e),
                e.integer("size", low=0),
                e.integer("mtime_ns", low=0, high=_MAX_MTIME_NS),
                e.sha256("sha256"),
                e.text("link", optional=True),
                bool(e.boolean("outside_root", optional=True)),
            )
        )
    problems = []
    for i, item in enumerate(f.array("problems", _is_object, "an object", optional=True) or []):
        q = Fields(item, str(p), f"problems[{i}].")
        problems.append(Problem(q.text("path"), q.text("kind"), q.text("detail")))
    return Manifest(root, tuple(includes), tuple(entries), tuple(problems))


# --- loading -----------------------------------------------------------------------------------

# The checks hold each context file's text in memory; a larger file is reported, not read.
MAX_TEXT_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class ContextFile(FileStamp):
    """One context file's text, with the modification time the checks go by."""

    text: str


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
    frozen_files: int = field(metadata=IN_MEMORY)
    changes: tuple[Change, ...]
    verified: bool = field(init=False)  # nothing was missing, changed or added since the freeze

    def __post_init__(self) -> None:
        object.__setattr__(self, "verified", not self.changes)

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

    @property
    def ref(self) -> ContextRef:
        """The context as a check's report names it."""
        return ContextRef(self.source, len(self.files))


@dataclass(frozen=True)
class ContextRef:
    """Which context a check read: its source and how many files it held."""

    source: str
    files: int


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
        raise NeedlepointError(f"{source}: field root: '{manifest.root}' is not a directory here")
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
