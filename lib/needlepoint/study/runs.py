"""One run folder (or pilot run) as the record lists it: design, variant, decision, completeness,
audit, declaration, and each request's outcome for comparing runs of the same request bytes.

A folder that cannot be read is still listed, with the one-line reason, so a damaged folder
never hides the rest of the record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import sha256_hex

# What identifies an outcome when two runs of the same request are compared.
# (status, kind, SHA-256 of the response text): equal answers compare equal, and a registry of
# runs with huge answers holds 64 hex digits per answer, not the answers.
Answer = tuple[str, str, str | None]


@dataclass(frozen=True)
class RunEntry:
    """One run on the record; ``problem`` is set (and most fields empty) when it is unreadable."""

    path: str
    pilot: bool
    design_fingerprint: str = ""
    protocol_id: str | None = None
    version: int | None = None
    model: str = ""
    body_profile: str = ""
    simulation: bool = False
    planned: int = 0
    attempted: int = 0
    decision: str | None = None
    result: str = ""
    complete_cases: int | None = None
    planned_cases: int | None = None
    audit: str = ""
    declaration: str = "none"
    declaration_sha256: str | None = None
    journal_sha256: str = ""
    # request SHA-256 -> the outcome received for it (a request with no response is absent)
    answers: dict[str, Answer] = field(default_factory=dict, repr=False)
    requests: frozenset[str] = frozenset()
    problem: str | None = None
    # Where it was executed when not by needlepoint's runner (an import: "inspect_ai 0.3.285").
    source: str | None = None

    @property
    def variant(self) -> str:
        return f"{self.model} ({self.body_profile})"

    def verdict(self) -> str:
        """The decision in words: a pilot has none, an unreadable run says why."""
        if self.problem:
            return f"unreadable: {self.problem}"
        if self.pilot:
            return "pilot (calibrates a design; no decision)"
        return f"{self.decision} ({self.result})" if self.result else str(self.decision)


def read_entry(
    run_dir: Path, shown: str, pilot_design: str | None = None, root: Path | None = None
) -> RunEntry:
    """Read one run folder; ``pilot_design`` is the design a pilot calibrates (its group), and
    ``root`` the folder its declaration is shown relative to (default: the run folder)."""
    try:
        return _read(run_dir, shown, pilot_design, root)
    except (NeedlepointError, OSError, ValueError) as exc:
        return RunEntry(path=shown, pilot=pilot_design is not None, problem=str(exc)[:300])


def _read(run_dir: Path, shown: str, pilot_design: str | None, root: Path | None) -> RunEntry:
    from needlepoint.design.prepared import frozen_model
    from needlepoint.design.profiles import body_profile
    from needlepoint.design.protocol import design_fingerprint
    from needlepoint.run.audit import audit_run
    from needlepoint.run.folder import read_run_record
    from needlepoint.run.journal import read_line, walk
    from needlepoint.run.results import load_frozen_plan

    run = read_run_record(run_dir)
    prepared = load_frozen_plan(run_dir, run, None)
    pilot = pilot_design is not None or run.extra.get("pilot") is True
    sha_of = {row.seq: row.request_sha256 for row in prepared.plan}
    walked = walk(run_dir)  # a stream: one record at a time
    chain, attempted = walked.chain, walked.state.attempts
    answers: dict[str, Answer] = {}
    for o in walked.state.outcomes.values():
        if o.http_status is not None and o.seq in sha_of:
            text = o.response_text
            if text is None:  # too long to keep in the fold: read from its line
                text = str(read_line(run_dir, o.at)["classification"]["response_text"])
            digest = sha256_hex(text.encode("utf-8", "replace"))
            answers[sha_of[o.seq]] = (o.status, o.kind, digest)
    audit = audit_run(run_dir)
    first = next((p for p in audit.problems), "")
    audited = "ok" if audit.ok else f"FAILED ({len(audit.problems)}: {first[:120]})"
    decision, result, complete, cases = None, "", None, None
    if not pilot:
        decision, result, complete, cases = _decision(run_dir)
    ref = run.declaration
    return RunEntry(
        path=shown,
        pilot=pilot,
        design_fingerprint=pilot_design or design_fingerprint(prepared.protocol),
        protocol_id=prepared.protocol.get("protocol_id"),
        version=prepared.protocol.get("version"),
        model=frozen_model(prepared),
        body_profile=body_profile(prepared.protocol),
        simulation=run.simulation,
        planned=len(prepared.plan),
        attempted=len(attempted),
        decision=decision,
        result=result,
        complete_cases=complete,
        planned_cases=cases,
        audit=audited,
        declaration="none"
        if ref is None
        else f"`{_shown(run_dir, ref.path, root)}` (sha256 {ref.sha256[:12]}…)",
        declaration_sha256=None if ref is None else ref.sha256,
        journal_sha256=chain.head,
        source=str(run.extra.get("source"))
        if run.extra.get("executed_elsewhere") is True
        else None,
        answers=answers,
        requests=frozenset(sha_of.values()),
    )


def _shown(run_dir: Path, path: str, root: Path | None) -> str:
    """The declaration's path as seen from ``root`` (as run.json has it without one)."""
    if root is None:
        return path
    try:
        return Path(os.path.relpath((run_dir / path).resolve(), root.resolve())).as_posix()
    except ValueError:
        return path


def _decision(run_dir: Path) -> tuple[str | None, str, int | None, int | None]:
    """The run's preregistered decision, as `analyze` would give it (nothing written)."""
    from needlepoint.analysis.document import build_document
    from needlepoint.analysis.inputs import from_run

    try:
        doc = build_document(from_run(run_dir))
    except NeedlepointError as exc:
        return None, f"no analysis: {str(exc)[:160]}", None, None
    p = doc.primary
    result = ""
    if p.estimate is not None and p.interval is not None:
        result = f"{p.estimate:.4g} [{p.interval.lower:.4g}, {p.interval.upper:.4g}]"
    elif p.estimate is not None:
        result = f"{p.estimate:.4g}"
    return p.decision, result, p.complete_cases, p.planned_cases


def pilot_design_of(folder: Path) -> str:
    """The design fingerprint a pilot folder calibrates ('' when its pilot.json is unreadable)."""
    from needlepoint.pilot.record import read_pilot_record

    try:
        return read_pilot_record(folder).design.design_fingerprint
    except (NeedlepointError, OSError):
        return ""
