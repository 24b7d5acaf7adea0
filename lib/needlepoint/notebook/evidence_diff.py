"""Byte-for-byte comparison of a regenerated evidence folder with its committed copy.

`make test` re-executes the reference notebooks in a scratch folder (nbval checks what they
print); this module then checks what they *wrote*. Every file under the committed folder is a
data file that must come back with the same bytes, except the few listed in ``NOT_COMPARED``,
each with the reason it may differ. A committed file that was not regenerated, or a regenerated
file that is not committed, fails like a changed byte: nothing goes unchecked silently.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import file_sha256
from needlepoint.safeio import open_read

CHUNK = 1 << 20  # bytes compared at a time

# Pattern (relative POSIX path; without "/" it matches top-level files only) -> why it may vary.
NOT_COMPARED: dict[str, str] = {
    # papermill records each cell's start and end time in the executed notebook; nbval
    # re-executes it and compares every printed output, which is what the notebook proves
    "*.ipynb": "executed notebooks: nbval compares their outputs; their metadata holds times",
    # written by `needlepoint pipeline` from the executed notebook after execution, not by a
    # notebook; what they show is the notebook's outputs, which nbval compares
    "*.html": "HTML renderings of the executed notebooks, made by the pipeline, not by them",
    # the nbconvert template's stylesheet, shared by the renderings above and named by its
    # own SHA-256
    "notebook-*.css": "the renderings' shared stylesheet, named by its SHA-256",
    # provenance is the one run file that must differ: the wall-clock start and git commit
    "run/provenance.jsonl": "the run's wall-clock time and git commit",
    "compare/runs/*/provenance.jsonl": "each compared run's wall-clock time and git commit",
    "pilot/run/provenance.jsonl": "the pilot run's wall-clock time and git commit",
    "depth/run/provenance.jsonl": "the depth run's wall-clock time and git commit",
}


def _excluded(rel: str) -> str | None:
    """The NOT_COMPARED pattern covering ``rel``, if any."""
    for pattern in NOT_COMPARED:
        if rel.count("/") == pattern.count("/") and fnmatch.fnmatchcase(rel, pattern):
            return pattern
    return None


def _files(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` that is not a folder: sorted relative POSIX path -> kind.

    Symbolic links are listed as links and never followed (a link to a folder is not walked),
    and so are FIFOs and other special files: an extra link is an extra file like any other.
    """
    found: dict[str, str] = {}
    for top, dirs, names in os.walk(folder, followlinks=False):
        here = Path(top)
        for name in [*names, *(d for d in dirs if (here / d).is_symlink())]:
            mode = os.lstat(here / name).st_mode
            kind = "file" if stat.S_ISREG(mode) else "special file"
            found[(here / name).relative_to(folder).as_posix()] = (
                "symbolic link" if stat.S_ISLNK(mode) else kind
            )
    return dict(sorted(found.items()))


def _first_difference(a: Path, b: Path) -> int | None:
    """The offset of the first differing byte (None when equal; the shorter length when one is
    a prefix), read a chunk at a time: a file of gigabytes costs two chunks of memory."""
    offset = 0
    with open_read(a) as fa, open_read(b) as fb:
        while True:
            x, y = fa.read(CHUNK), fb.read(CHUNK)
            if x != y:
                pairs = enumerate(zip(x, y, strict=False))
                return offset + next((i for i, (p, q) in pairs if p != q), min(len(x), len(y)))
            if not x:
                return None
            offset += len(x)


@dataclass(frozen=True)
class EvidenceDiff:
    """What a comparison found: compared files, and each kind of mismatch by relative path."""

    compared: tuple[str, ...]
    not_compared: tuple[str, ...]
    differing: tuple[str, ...]
    details: dict[str, str]
    not_regenerated: tuple[str, ...]
    not_committed: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not (self.differing or self.not_regenerated or self.not_committed)

    def lines(self) -> list[str]:
        """Human-readable result: one line per problem, then what was compared and skipped."""
        out = [f"differs: {rel} ({self.details[rel]})" for rel in self.differing]
        out += [f"committed but not regenerated: {rel}" for rel in self.not_regenerated]
        out += [f"regenerated but not committed: {rel}" for rel in self.not_committed]
        folders = Counter(rel.split("/")[0] if "/" in rel else "." for rel in self.compared)
        counts = ", ".join(f"{name} {n}" for name, n in sorted(folders.items()))
        out.append(f"compared byte for byte: {len(self.compared)} data files ({counts})")
        skipped = Counter(_excluded(rel) for rel in self.not_compared)
        for pattern, reason in NOT_COMPARED.items():
            if skipped[pattern]:
                out.append(f"not compared: {skipped[pattern]} x {pattern} ({reason})")
        bad = len(self.differing) + len(self.not_regenerated) + len(self.not_committed)
        out.append(
            f"evidence-diff {'OK' if self.ok else 'FAILED'}: "
            + (f"all {len(self.compared)} files identical" if self.ok else f"{bad} file(s) differ")
        )
        return out


def diff_evidence(committed: str | Path, regenerated: str | Path) -> EvidenceDiff:
    """Compare every data file of ``committed`` with the same path under ``regenerated``."""
    base, new = Path(committed), Path(regenerated)
    for folder in (base, new):
        if not folder.is_dir():
            raise NeedlepointError(f"{folder}: not a folder")
    old_kinds, new_kinds = _files(base), _files(new)
    old_files, new_files = list(old_kinds), set(new_kinds)
    expected = [rel for rel in old_files if not _excluded(rel)]
    compared = [rel for rel in expected if rel in new_files]
    differing, details = [], {}
    for rel in compared:
        kinds = (old_kinds[rel], new_kinds[rel])
        if kinds != ("file", "file"):
            differing.append(rel)
            details[rel] = f"a {kinds[0]} committed, a {kinds[1]} now; only files compare equal"
            continue
        at = _first_difference(base / rel, new / rel)
        if at is not None:
            differing.append(rel)
            details[rel] = (
                f"first difference at byte {at}; sha256 "
                f"{file_sha256(base / rel)[:16]} committed, {file_sha256(new / rel)[:16]} now"
            )
    return EvidenceDiff(
        compared=tuple(compared),
        not_compared=tuple(rel for rel in old_files if _excluded(rel)),
        differing=tuple(differing),
        details=details,
        not_regenerated=tuple(rel for rel in expected if rel not in new_files),
        not_committed=tuple(
            sorted(rel for rel in new_files - set(old_files) if not _excluded(rel))
        ),
    )
