"""Which files under a workspace root arrive in an agent's context automatically.

Patterns are matched against the path relative to the root, segment by segment: ``*`` and
``?`` stay inside one segment, ``**`` spans any number of segments (at least one when it ends
the pattern). Anything that cannot be read is returned as a problem, never dropped silently.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from needlepoint.errors import NeedlepointError

# Bounds on a walk: a symlink to a large folder must end in one line, not exhaust the machine.
MAX_ENTRIES = 100_000
MAX_DEPTH = 64

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
