"""A run's declaration, in the one place it is checked: the record `needlepoint declare` writes
(a plan's text, its time and what results existed then), a run bound to it, the audit that the
run proves the declaration came first, and its chain as a reader sees it.

The runner records the file's SHA-256 in run.json and in the journal's first record, before the
first request. The audit checks that the file still has it, that every session carries it, that
the declaration does not already list this run's journal, and, for a live run, that it was made
before the run's first session. An amendment made after outcomes it governs (outcomes under an
earlier declaration of its chain) is flagged. docs/schema.md states every field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import file_sha256, sha256_hex
from needlepoint.run.clock import parse_iso_utc
from needlepoint.run.folder import code_now, read_provenance, recorded_declaration
from needlepoint.run.journal import JOURNAL_NAME, JournalState
from needlepoint.run.records import RunRecord, SessionRecord
from needlepoint.safeio import relative_path
from needlepoint.schema import AddedLater, read_versioned

DECLARATION_FORMAT = "needlepoint-declaration"
DECLARATION_VERSION = 1
# A chain of amendments longer than this is refused rather than followed (a loop, or abuse).
MAX_CHAIN = 64
HEAD_KINDS = ("run", "pilot")
_HEX = re.compile(r"[0-9a-f]{64}")
_COMMIT = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
MAX_PUBLISHED = 2000


def published_place(url: str) -> str:
    """Where a declaration was published, checked: an absolute URL (``https://…``, or any
    ``scheme://…``), one line, at most 2000 characters."""
    from urllib.parse import urlsplit

    text = url.strip(" ")
    if not text or len(text) > MAX_PUBLISHED or not text.isprintable():
        raise NeedlepointError(
            f"{url[:60]!r} is not a place: give one URL of at most {MAX_PUBLISHED} characters"
        )
    parts = urlsplit(text)
    if not parts.scheme or not (parts.netloc or parts.path):
        raise NeedlepointError(f"{text[:60]!r} is not a URL (e.g. https://osf.io/abcde)")
    return text


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
class CodeRef:
    """The code a declaration binds: the git commit of the checkout the package runs from,
    whether its tracked files were unmodified (untracked files are not counted: a plan and
    its declaration are new files), and the SHA-256 of its ``constraints.txt`` (the pinned
    environment). Each is None where it cannot be known (no git, no constraints file)."""

    commit: str | None
    tree_clean: bool | None
    constraints_sha256: str | None

    def differs_from(self, other: CodeRef) -> list[str]:
        """What differs, in words; a part either side does not know is not compared."""
        out = []
        if self.commit and other.commit and self.commit != other.commit:
            out.append(f"commit {other.commit[:12]}, not the declared {self.commit[:12]}")
        if other.tree_clean is False:
            out.append("its tracked files were modified")
        a, b = self.constraints_sha256, other.constraints_sha256
        if a and b and a != b:
            out.append(f"constraints.txt {b[:12]}, not the declared {a[:12]}")
        return out


def current_code() -> CodeRef:
    """The code running now: commit, clean flag and constraints.txt of the package's checkout."""
    return CodeRef(**code_now())


@dataclass(frozen=True)
class DeclarationRecord(AddedLater):
    """A declaration (or, when ``amends`` is set, an amendment) as written by `declare`.

    ``code`` (the code it binds) and ``published`` (where the user published it) came later:
    a declaration written before them has neither, and a simulated one never binds code.
    """

    ADDED_LATER: ClassVar[tuple[str, ...]] = ("code", "published")

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
    code: CodeRef | None = None
    published: str | None = None

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
    if r.code is not None:
        digest("code.constraints_sha256", r.code.constraints_sha256)
        if r.code.commit is not None and not _COMMIT.fullmatch(r.code.commit):
            raise fail("code.commit", "expected a lower-case hex git commit")
    if r.published is not None:
        try:
            published_place(r.published)
        except NeedlepointError as exc:
            raise fail("published", str(exc)) from None
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


@dataclass
class DeclarationFindings:
    """What the declaration checks found: problems, and the checks that passed (by name)."""

    problems: list[str] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

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
    _check_code(root, declared, audit, where)
    return audit


def session_code(run_dir: Path) -> list[CodeRef]:
    """The code each session ran, as provenance.jsonl recorded it at its start (the runner's
    ``code``; an older line's ``git`` commit alone). Unreadable lines are skipped."""
    out = []
    for rec in read_provenance(run_dir):
        if rec.get("event", "session_start") != "session_start":
            continue
        code, git = rec.get("code"), rec.get("git")
        if isinstance(code, dict):
            commit, clean, pinned = (
                code.get("commit"), code.get("tree_clean"), code.get("constraints_sha256")
            )  # fmt: skip
        elif isinstance(git, dict):
            commit, clean, pinned = git.get("commit"), None, None
        else:
            continue
        out.append(
            CodeRef(
                commit if isinstance(commit, str) else None,
                clean if isinstance(clean, bool) else None,
                pinned if isinstance(pinned, str) else None,
            )
        )
    return out


def _check_code(root: Path, declared: Declared, audit: DeclarationFindings, where: str) -> None:
    """A run whose sessions ran other code than the declaration bound is flagged (a warning:
    a declared bug fix is legitimate, but a reader must be told)."""
    bound = declared.record.code
    if bound is None:
        return
    ran = session_code(root)
    if not ran:
        audit.warnings.append(f"{where}: binds code, but provenance.jsonl records none to compare")
        return
    for i, code in enumerate(ran, 1):
        differs = bound.differs_from(code)
        if differs:
            audit.warnings.append(
                f"{where}: session {i} ran other code than declared: {'; '.join(differs)}"
                + _commit_note(bound, code)
            )
    if not any(bound.differs_from(c) for c in ran):
        audit.count("code as declared")


def _commit_note(bound: CodeRef, ran: CodeRef) -> str:
    """What git says differs in the code between the declared and the run's commit: a commit
    that only adds evidence (the declaration itself, a pilot) runs the same library."""
    from needlepoint.run.folder import CODE_PATHS, code_changes

    if not bound.commit or not ran.commit or bound.commit == ran.commit:
        return ""
    changed = code_changes(bound.commit, ran.commit)
    if changed is None:
        return " (git cannot compare the two commits here)"
    if not changed:
        return f" ({', '.join(CODE_PATHS)} identical in the two commits)"
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    return f" ({len(changed)} code file(s) differ between the two commits: {shown})"


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


def flagged(entries: list[Declared]) -> dict[str, list[JournalHead]]:
    """Amendments made after outcomes they govern: SHA-256 -> the journals that had outcomes.

    ``entries`` is a chain, oldest first; an amendment governs what the declarations before it
    governed, so an outcome recorded under one of them is an outcome the amender could see.
    """
    out: dict[str, list[JournalHead]] = {}
    for i, entry in enumerate(entries):
        if entry.record.amends is None:
            continue
        governed = entry.record.outcomes_governed({e.sha256 for e in entries[:i]})
        if governed:
            out[entry.sha256] = governed
    return out


def _shown(path: Path, base: Path) -> str:
    try:
        return relative_path(path, base)
    except ValueError:  # another drive: no relative path exists
        return path.name


def chain_lines(entries: list[Declared], base: Path, cited: str | None = None) -> list[str]:
    """The chain as Markdown list items, oldest first, each with its time and what it cites.

    Paths are shown relative to ``base`` (a run or an output folder), so the lines carry no
    machine path; ``cited`` marks the declaration a run was started under.
    """
    flags = flagged(entries)
    lines = []
    for entry in entries:
        r = entry.record
        what = "amendment" if r.amends else "declaration"
        clock = " (simulated clock: the time proves nothing)" if r.simulation else ""
        outcomes = sum(h.outcomes for h in r.heads)
        line = (
            f"- {what} `{_shown(entry.path, base)}` (sha256 `{entry.sha256[:12]}…`), made "
            f"{r.time}{clock}: plan `{r.plan.file}` (sha256 `{r.plan.sha256[:12]}…`); on record "
            f"then: {len(r.heads)} journal(s) with {outcomes} outcome(s), "
            f"{len(r.analyses)} analysis(es)"
        )
        if r.amends:
            line += f"; amends `{r.amends.sha256[:12]}…` (made {r.amends.time})"
        if entry.sha256 in flags:
            seen = ", ".join(f"`{h.path}` {h.outcomes}" for h in flags[entry.sha256])
            line += (
                "; **FLAG: made after outcomes it governs** (outcomes under the declaration it "
                f"amends: {seen})"
            )
        if entry.sha256 == cited:
            line += "; **the run was started under this one**"
        lines.append(line)
    return lines


def run_chain_lines(
    run_dir: Path, base: Path, later: list[Declared] | None = None, shown: str | None = None
) -> list[str]:
    """A run's declaration chain as Markdown lines (none when it was started without one).

    ``later`` adds amendments found elsewhere (the study record searches the evidence root for
    them); the run's own chain is followed back from the file run.json names, whose SHA-256 must
    still be the one recorded.
    """
    ref = recorded_declaration(run_dir)
    name = shown or Path(run_dir).name
    if ref is None:
        return [f"`{name}` was started without a declaration."]
    head = f"Declaration chain of `{name}` (oldest first):"
    path = Path(run_dir) / ref.path
    try:
        entries = chain(path)
    except NeedlepointError as exc:
        return [head, f"- `{ref.path}` (sha256 `{ref.sha256[:12]}…`): cannot be read: {exc}"]
    if entries[-1].sha256 != ref.sha256:
        return [
            head,
            f"- `{_shown(path, base)}`: **PROBLEM**: SHA-256 `{entries[-1].sha256[:12]}…` "
            f"differs from the `{ref.sha256[:12]}…` the run recorded (changed since)",
        ]
    known = {e.sha256 for e in entries}
    entries += [e for e in later or [] if e.sha256 not in known]
    return [head, *chain_lines(entries, base, cited=ref.sha256)]
