"""`audit-run`'s checks of a run's declaration: the run proves that the declaration came first.

A run started with ``--declaration`` records the declaration file's SHA-256 in run.json and in
its journal's first record, which is written before the first request. The audit checks that the
file still has that SHA-256 (so a declaration edited afterwards fails, by name), that every
session carries it, that the declaration does not already list this run's journal, and, for a
live run, that it was made before the run's first session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import file_sha256
from needlepoint.run.clock import parse_iso_utc
from needlepoint.run.declaration import Declared, read_declaration
from needlepoint.run.journal import JOURNAL_NAME, JournalState
from needlepoint.run.records import RunRecord, SessionRecord


@dataclass
class DeclarationFindings:
    """What the declaration checks found: problems, and the checks that passed (by name)."""

    problems: list[str] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)

    def count(self, name: str) -> None:
        self.passed.append(name)


def check_declaration(root: Path, run: RunRecord, journal: JournalState) -> DeclarationFindings:
    """Every declaration check of one run folder; nothing to find without a declaration."""
    audit = DeclarationFindings()
    ref = run.declaration
    sessions = journal.sessions
    if ref is None:
        stray = [n for n, s in sessions.items() if s.declaration_sha256 is not None]
        if stray:
            audit.problems.append(
                f"{root / JOURNAL_NAME}:{stray[0] + 1}: a session cites a declaration that "
                "run.json does not record"
            )
        return audit
    path = root / JOURNAL_NAME
    first = sessions.get(0)
    if journal.records and (first is None or first.declaration_sha256 != ref.sha256):
        audit.problems.append(
            f"{path}:1: the first record does not carry the declaration's SHA-256 "
            f"{ref.sha256[:12]} that run.json records"
        )
    else:
        audit.count("declaration in the first record")
    for n, r in list(sessions.items())[1:]:
        if r.declaration_sha256 != ref.sha256:
            audit.problems.append(
                f"{path}:{n + 1}: session {r.session} cites another declaration than run.json"
            )
    path = root / ref.path
    where = f"declaration {ref.path}"
    try:
        actual = file_sha256(path)
    except (OSError, ValueError, NeedlepointError):
        audit.problems.append(f"{where}: missing (run.json records SHA-256 {ref.sha256[:12]})")
        return audit
    if actual != ref.sha256:
        audit.problems.append(
            f"{where}: SHA-256 {actual[:12]} differs from the {ref.sha256[:12]} that run.json "
            "and the journal recorded when the run began (the declaration was changed since)"
        )
        return audit
    try:
        declared = read_declaration(path)
    except NeedlepointError as exc:
        audit.problems.append(f"{where}: unreadable: {exc}")
        return audit
    audit.count("declaration sha256")
    _check_order(root, declared, list(sessions.values()), audit, where, run.simulation)
    return audit


def _check_order(
    root: Path,
    declared: Declared,
    sessions: list[SessionRecord],
    audit: DeclarationFindings,
    where: str,
    sim: bool,
) -> None:
    """The declaration must not know this run's journal, and (live) must be older than it."""
    record = declared.record
    here = root.resolve()
    evidence_root = declared.path.parent / record.root
    for head in record.heads:
        if (evidence_root / head.path).resolve() == here and head.records:
            audit.problems.append(
                f"{where}: lists this run's journal with {head.records} records: it was "
                "written after the run began"
            )
    if record.simulation and not sim:
        audit.problems.append(f"{where}: made on a simulated clock, but this run is live")
        return
    if sim or not sessions:
        return  # a simulated clock proves no order in time
    first = sessions[0].time
    if parse_iso_utc(record.time) > parse_iso_utc(first):
        audit.problems.append(
            f"{where}: made at {record.time}, after the run's first session at {first}"
        )
    else:
        audit.count("declaration before the first session")
