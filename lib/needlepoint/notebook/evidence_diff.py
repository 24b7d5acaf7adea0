"""Byte-for-byte comparison of a regenerated evidence folder with its committed copy.

`make test` re-executes the reference notebooks in a scratch folder (nbval checks what they
print); this module then checks what they *wrote*. Every file under the committed folder is a
data file that must come back with the same bytes, except the few listed in ``NOT_COMPARED``,
each with the reason it may differ. A committed file that was not regenerated, or a regenerated
file that is not committed, fails like a changed byte: nothing goes unchecked silently.
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import file_sha256

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
}


def _excluded(rel: str) -> str | None:
    """The NOT_COMPARED pattern covering ``rel``, if any."""
    for pattern in NOT_COMPARED:
        if rel.count("/") == pattern.count("/") and fnmatch.fnmatchcase(rel, pattern):
            return pattern
    return None


def _files(folder: Path) -> list[str]:
    """Every file under ``folder`` as a sorted relative POSIX path."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def _first_difference(a: bytes, b: bytes) -> int:
    """The offset of the first differing byte (the shorter length when one is a prefix)."""
    pairs = enumerate(zip(a, b, strict=False))
    return next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))


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
    old_files = _files(base)
    new_files = set(_files(new))
    expected = [rel for rel in old_files if not _excluded(rel)]
    compared = [rel for rel in expected if rel in new_files]
    differing, details = [], {}
    for rel in compared:
        a, b = (base / rel).read_bytes(), (new / rel).read_bytes()
        if a != b:
            differing.append(rel)
            details[rel] = (
                f"first difference at byte {_first_difference(a, b)}; sha256 "
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
