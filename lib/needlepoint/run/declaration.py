"""The declaration record: a plan's text, its time, and what results existed when it was written.

`needlepoint declare` (``needlepoint.study.declare``) writes it; this module reads it, so that the
runner can bind a run to it (its SHA-256 in run.json and in the journal's first record, before
the first request) and `audit-run`, `analyze` and `compare` can check and show it without
importing the study package. docs/schema.md states every field.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import file_sha256, sha256_hex
from needlepoint.run.clock import parse_iso_utc
from needlepoint.run.records import DeclarationRef
from needlepoint.schema import read_versioned

DECLARATION_FORMAT = "needlepoint-declaration"
DECLARATION_VERSION = 1
# A chain of amendments longer than this is refused rather than followed (a loop, or abuse).
MAX_CHAIN = 64
HEAD_KINDS = ("run", "pilot")
_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class PlanText:
    """The plan as declared: its file name (no folder), its SHA-256 and its whole text."""

    file: str
    sha256: str
    text: str


@dataclass(frozen=True)
class Amends:
    """The declaration an amendment replaces, by the SHA-256 of its file."""

    sha256: str
    path: str
    time: str


@dataclass(frozen=True)
class JournalHead:
    """One run or pilot journal under the evidence root when the declaration was written."""

    path: str
    kind: str
    records: int
    sha256: str
    attempts: int
    outcomes: int
    last_time: str | None
    declaration_sha256: str | None


@dataclass(frozen=True)
class AnalysisHead:
    """One analysis under the evidence root when the declaration was written."""

    path: str
    journal_sha256: str | None
    decision: str


@dataclass(frozen=True)
class DeclarationRecord:
    """A declaration (or, when ``amends`` is set, an amendment) as written by `declare`."""

    format: str
    version: int
    package_version: str
    time: str
    simulation: bool
    plan: PlanText
    amends: Amends | None
    root: str
    heads: tuple[JournalHead, ...]
    analyses: tuple[AnalysisHead, ...]

    def outcomes_governed(self, earlier: set[str]) -> list[JournalHead]:
        """The journals with outcomes that ran under a declaration in ``earlier``.

        For an amendment, ``earlier`` is every declaration it amends (directly or not): a head
        listed here is a result the amender could have seen before changing the rules for it.
        """
        return [h for h in self.heads if h.outcomes and h.declaration_sha256 in earlier]


@dataclass(frozen=True)
class Declared:
    """A declaration file read and checked: where it is, its SHA-256 and its record."""

    path: Path
    sha256: str
    record: DeclarationRecord


def read_declaration(path: str | Path) -> Declared:
    """Read a declaration file strictly; its plan text must still hash to its recorded SHA-256."""
    p = Path(path)
    if p.is_dir():
        raise NeedlepointError(f"{p}: is a folder; give the declaration file (DECL.json)")
    record: DeclarationRecord = read_versioned(
        p, DeclarationRecord, DECLARATION_FORMAT, DECLARATION_VERSION
    )
    _check(record, str(p))
    return Declared(p, file_sha256(p), record)


def read_for_run(path: str | Path, *, live: bool) -> Declared:
    """A declaration a run may be started under: readable, and, for a live run, made on a real
    clock (a simulated clock proves no order in time). Checked before anything is written."""
    declared = read_declaration(path)
    if live and declared.record.simulation:
        raise NeedlepointError(
            f"{path}: made on a simulated clock, so it proves no order in time; "
            "a live run needs a declaration made with `needlepoint declare`"
        )
    return declared


def _check(r: DeclarationRecord, where: str) -> None:
    """What the types alone do not say: times, hashes, kinds and paths a reader can follow."""

    def fail(name: str, problem: str) -> NeedlepointError:
        return NeedlepointError(f"{where}: field {name}: {problem}")

    def time(name: str, value: str | None) -> None:
        try:
            if value is not None:
                parse_iso_utc(value)
        except (ValueError, OverflowError, OSError):
            raise fail(name, f"{value[:40]!r} is not an ISO-8601 time") from None

    def digest(name: str, value: str | None) -> None:
        if value is not None and not _HEX.fullmatch(value):
            raise fail(name, "expected a lower-case hex SHA-256 digest")

    def relative(name: str, value: str) -> None:
        if "\x00" in value or Path(value).is_absolute() or len(value) > 4096:
            raise fail(name, "expected a relative path")

    time("time", r.time)
    digest("plan.sha256", r.plan.sha256)
    if sha256_hex(r.plan.text.encode("utf-8", "surrogatepass")) != r.plan.sha256:
        raise fail("plan.sha256", "does not match the plan's text")
    relative("root", r.root)
    if r.amends is not None:
        digest("amends.sha256", r.amends.sha256)
        time("amends.time", r.amends.time)
        relative("amends.path", r.amends.path)
    for i, h in enumerate(r.heads):
        name = f"heads[{i}]"
        relative(f"{name}.path", h.path)
        digest(f"{name}.sha256", h.sha256)
        digest(f"{name}.declaration_sha256", h.declaration_sha256)
        time(f"{name}.last_time", h.last_time)
        if h.kind not in HEAD_KINDS:
            raise fail(f"{name}.kind", f"{h.kind!r} is not one of {', '.join(HEAD_KINDS)}")
        if min(h.records, h.attempts, h.outcomes) < 0:
            raise fail(name, "counts must not be negative")
    for i, a in enumerate(r.analyses):
        relative(f"analyses[{i}].path", a.path)
        digest(f"analyses[{i}].journal_sha256", a.journal_sha256)


def reference(declared: Declared, run_dir: Path) -> DeclarationRef:
    """run.json's reference to a declaration: its path as seen from the run folder."""
    rel = os.path.relpath(declared.path.resolve(), Path(run_dir).resolve())
    return DeclarationRef(Path(rel).as_posix(), declared.sha256)


def chain(start: str | Path) -> list[Declared]:
    """The declaration at ``start`` and every one it amends, oldest first, each hash checked."""
    out: list[Declared] = []
    seen: set[str] = set()
    current = read_declaration(start)
    while True:
        if current.sha256 in seen or len(out) >= MAX_CHAIN:
            raise NeedlepointError(
                f"{current.path}: its chain of amendments loops or exceeds {MAX_CHAIN}"
            )
        seen.add(current.sha256)
        out.append(current)
        amends = current.record.amends
        if amends is None:
            return out[::-1]
        previous = current.path.parent / amends.path
        if not previous.is_file():
            raise NeedlepointError(
                f"{current.path}: the declaration it amends, {amends.path}, is missing"
            )
        nxt = read_declaration(previous)
        if nxt.sha256 != amends.sha256:
            raise NeedlepointError(
                f"{current.path}: the declaration it amends, {amends.path}, has SHA-256 "
                f"{nxt.sha256[:12]}, not the {amends.sha256[:12]} it cites (changed since)"
            )
        current = nxt
