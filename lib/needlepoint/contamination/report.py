"""The contamination report: all four checks over one workspace, a verdict, and its two files.

The verdict is a CI gate. A leak (reference answers in the context, or closed facts answered
exactly with zero tool calls), a poisoned rerun, a dead canary, or results without tool_calls
fail it (exit 1). Everything else worth a look is a notice and does not fail it. The report is
written as contamination.json (canonical) and contamination.md, a page a reviewer reads top to
bottom; neither depends on the clock, so equal inputs give equal bytes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from needlepoint.contamination.canary import (
    CanaryResult,
    Transcript,
    agents_md_problems,
    apply_transcripts,
    check_canary,
)
from needlepoint.contamination.context import (
    DEFAULT_INCLUDES,
    UNREAD_KINDS,
    Manifest,
    build_manifest,
    load_context,
    unread_parts,
)
from needlepoint.contamination.inputs import (
    iso_from_ns,
    read_discards,
    read_reference,
    read_results,
    read_runs,
)
from needlepoint.contamination.overlap import (
    OverlapResult,
    TimelineResult,
    check_overlap,
    check_timeline,
)
from needlepoint.jsonio import canonical_bytes, file_sha256, write_bytes_atomic
from needlepoint.safetext import md_code, md_text
from needlepoint.schema import fields_plain, to_plain

REPORT_FORMAT = "contamination-report/1"
EXIT_PASSED, EXIT_FINDING, EXIT_BAD_INPUT = 0, 1, 2


@dataclass(frozen=True)
class Finding:
    """One reason the gate fails."""

    check: str
    kind: str
    message: str


@dataclass(frozen=True)
class Gate:
    """The verdict: the findings that fail it, and the notices that do not."""

    findings: tuple[Finding, ...]
    notices: tuple[str, ...]
    passed: bool = field(init=False)
    exit_code: int = field(init=False)  # 0 when the gate passes, 1 when it found something

    def __post_init__(self) -> None:
        object.__setattr__(self, "passed", not self.findings)
        object.__setattr__(self, "exit_code", EXIT_PASSED if self.passed else EXIT_FINDING)


@dataclass(frozen=True)
class Input:
    """One input file the checks read: its role, its path as given, and its SHA-256."""

    role: str
    path: str
    sha256: str


@dataclass(frozen=True)
class ReportedManifest(Manifest):
    """The frozen manifest as the report embeds it: its document and the SHA-256 naming it."""

    def to_plain(self) -> dict[str, Any]:
        """The manifest's own fields, plus the one value derived from them."""
        return fields_plain(self) | {"sha256": self.sha256}


@dataclass(frozen=True)
class ContaminationReport:
    """The four checks, the manifest they read, and the gate. Its fields are the versioned
    report document; no clock time is in it, so equal inputs give equal bytes."""

    inputs: tuple[Input, ...]
    manifest: ReportedManifest | None
    overlap: OverlapResult
    timeline: TimelineResult
    canary: CanaryResult
    gate: Gate
    format: str = REPORT_FORMAT


def _findings(o: OverlapResult, t: TimelineResult, c: CanaryResult) -> list[Finding]:
    # Fail closed: a part of the context that was not read cannot count as clean.
    found = [
        Finding("context", "unread", f"{part}: not read, so the context cannot be called clean")
        for part in unread_parts(o.problems, o.verification)
    ]
    if o.leaked:
        found.append(Finding("overlap", "leak", o.sentence() + ": " + ", ".join(o.present_ids)))
    if c.leaked:
        ids = ", ".join(f"{r.run_id}/{r.question_id}" for r in c.leaks)
        found.append(
            Finding("canary", "leak", f"closed facts answered exactly with zero tool calls: {ids}")
        )
    if c.dead_canary:
        ids = ", ".join(f"{r.run_id}/{r.question_id}" for r in c.dead_canary)
        found.append(
            Finding("canary", "dead-canary", f"the clean room answered closed facts exactly: {ids}")
        )
    if not c.has_detector:
        lines = ", ".join(str(r.line) for r in c.missing_tool_calls)
        found.append(
            Finding(
                "canary",
                "no-tool-calls",
                f"results without tool_calls (no detector): lines {lines}",
            )
        )
    for problem in c.transcript_problems:
        found.append(Finding("canary", "transcript", problem))
    for p in t.poisoned:
        found.append(
            Finding(
                "timeline",
                "poisoned-rerun",
                f"run {p.run_id} started {iso_from_ns(p.started_ns)}, after {p.file} "
                f"({iso_from_ns(p.file_mtime_ns)}) recorded run(s) {', '.join(p.source_runs)}",
            )
        )
    return found


def _notices(o: OverlapResult, t: TimelineResult, c: CanaryResult) -> list[str]:
    notes = []
    for h in t.artifacts:
        notes.append(
            f"{h.file} was written {h.minutes_after_start:.0f} min after run {h.run_id} started "
            "and holds its results: take it out of the automatic context before any rerun"
        )
    for p in o.problems:
        if p.kind not in UNREAD_KINDS:  # the others are findings
            notes.append(f"context problem: {p.path}: {p.kind} ({p.detail})")
    if o.verification is not None:
        notes.append("manifest: " + o.verification.sentence())
    for d in o.unused_discards:
        notes.append(
            f"{d.source}:{d.source_line}: discard of {d.reference_id} at {d.file}:{d.line} "
            "matched nothing (stale?)"
        )
    if c.tool_calls_source == "transcript":
        notes.append("canary: tool_calls_source: transcript (counted, not taken from results)")
    if not c.has_clean_room:
        notes.append("canary: no closed fact was asked from the clean room")
    return notes


def _manifest_fields(manifest: Manifest) -> tuple[Any, ...]:
    return manifest.root, manifest.includes, manifest.files, manifest.problems


def build_report(
    reference: str | os.PathLike[str],
    runs: str | os.PathLike[str],
    results: str | os.PathLike[str],
    context: str | os.PathLike[str],
    discards: str | os.PathLike[str] | None = None,
    includes: Sequence[str] | None = None,
    transcripts: Sequence[Transcript] = (),
) -> ContaminationReport:
    """Read every input, run all four checks over one loaded context, and judge.

    ``transcripts`` (read by ``contamination.canary``) replace the tool_calls column; the
    AGENTS.md text a Codex rollout injected is hashed against the frozen context manifest."""
    pairs = read_reference(reference)
    run_rows = read_runs(runs)
    result_rows = read_results(results)
    problems: tuple[str, ...] = ()
    if transcripts:
        result_rows, problems = apply_transcripts(result_rows, transcripts)
    discard_rows = read_discards(discards) if discards is not None else ()
    ctx = load_context(context, includes)
    if ctx.kind == "directory":
        manifest = build_manifest(context, DEFAULT_INCLUDES if includes is None else includes)
    else:
        manifest = ctx.manifest
    o = check_overlap(pairs, ctx, discard_rows)
    t = check_timeline(run_rows, ctx)
    if transcripts:
        frozen = [(e.path, e.sha256) for e in manifest.files] if manifest is not None else []
        problems += agents_md_problems(transcripts, frozen)
    c = check_canary(
        result_rows,
        tool_calls_source="transcript" if transcripts else "results",
        transcript_problems=problems,
    )
    roles = [("reference", reference), ("runs", runs), ("results", results)]
    if discards is not None:
        roles.append(("discards", discards))
    if ctx.kind != "directory":
        roles.append(("context", context))
    inputs = tuple(Input(role, os.fspath(p), file_sha256(p)) for role, p in roles)
    shown = None if manifest is None else ReportedManifest(*_manifest_fields(manifest))
    gate = Gate(tuple(_findings(o, t, c)), tuple(_notices(o, t, c)))
    return ContaminationReport(inputs, shown, o, t, c, gate)


# --- contamination.md and contamination.json ---------------------------------------------------


def _cell(value: object) -> str:
    # Context lines and file names come from anyone's workspace: inert text, never markup.
    return "—" if value is None else md_text(value)


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """A GitHub-flavoured Markdown table; an empty one says so instead."""
    if not rows:
        return ["(none)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def report_markdown(report: ContaminationReport) -> str:
    """Render the report; the text depends only on the inputs, never on the clock."""
    o, t, c, m, gate = report.overlap, report.timeline, report.canary, report.manifest, report.gate
    verdict = "PASSED" if gate.passed else "FAILED"
    out = ["# Contamination report", "", f"**Gate: {verdict}** (exit {gate.exit_code})", ""]
    out += [f"- **{f.kind}** ({f.check}): {md_text(f.message)}" for f in gate.findings]
    if gate.notices:
        out += ["", "Notices:", ""] + [f"- {md_text(n)}" for n in gate.notices]
    out += ["", "## Inputs", ""]
    out += table(["role", "path", "sha256"], [(i.role, i.path, i.sha256) for i in report.inputs])

    out += ["", "## Context manifest", ""]
    if m is None:
        out.append("The context was a single file; no manifest.")
    else:
        root = md_code(m.root)
        out += [f"Root {root}, {len(m.files)} file(s), manifest sha256 `{m.sha256}`.", ""]
        out += table(
            ["path", "size", "mtime (UTC)", "sha256"],
            [(e.path, e.size, e.mtime, e.sha256[:16]) for e in m.files],
        )
        if m.problems:
            out += ["", "Problems:", ""]
            out += table(
                ["path", "kind", "detail"], [(p.path, p.kind, p.detail) for p in m.problems]
            )

    out += ["", "## Reference vs context (overlap)", "", md_text(o.sentence()) + ".", ""]
    out += table(
        ["reference", "answer", "where", "line"],
        [(x.reference_id, x.answer, x.where, x.text.strip()[:120]) for x in o.kept],
    )
    out += ["", "Discarded as chance:", ""]
    out += table(
        ["reference", "answer", "where", "reason"],
        [(x.reference_id, x.answer, x.where, x.discard_reason) for x in o.discarded],
    )

    out += ["", "## Timeline", "", md_text(t.sentence()) + ".", ""]
    out += table(
        ["run", "battery", "started (UTC)", "values"],
        [(r.run_id, r.battery, iso_from_ns(r.started_ns), len(r.values)) for r in t.run_list],
    )
    out += ["", "Context files holding a run's values:", ""]
    out += table(
        ["file", "mtime (UTC)", "run", "minutes after run start", "lines"],
        [
            (h.file, iso_from_ns(h.mtime_ns), h.run_id, f"{h.minutes_after_start:+.0f}",
             ", ".join(map(str, h.lines)))
            for h in t.holdings
        ],
    )  # fmt: skip
    out += ["", "Poisoned reruns:", ""]
    out += table(
        ["run", "started (UTC)", "file", "file mtime (UTC)", "from run(s)"],
        [
            (p.run_id, iso_from_ns(p.started_ns), p.file, iso_from_ns(p.file_mtime_ns),
             ", ".join(p.source_runs))
            for p in t.poisoned
        ],
    )  # fmt: skip

    out += ["", "## Canary and positive control", "", md_text(c.sentence()) + ".", ""]
    out += table(
        ["condition", "closed questions", "exact", "tool calls"],
        [(s.condition, s.questions, s.exact, s.tool_calls) for s in c.summary],
    )
    flagged = [("dead canary", r) for r in c.dead_canary] + [("leak", r) for r in c.leaks]
    flagged += [("no tool_calls", r) for r in c.missing_tool_calls]
    out += ["", "Flagged rows:", ""]
    out += table(
        ["flag", "line", "run", "question", "answer", "tool calls"],
        [(f, r.line, r.run_id, r.question_id, r.answer, r.tool_calls) for f, r in flagged],
    )
    return "\n".join(out) + "\n"


def write_report(report: ContaminationReport, out_dir: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write contamination.json (canonical) and contamination.md into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "contamination.json", out / "contamination.md"
    write_bytes_atomic(json_path, canonical_bytes(to_plain(report)) + b"\n")
    write_bytes_atomic(md_path, report_markdown(report).encode("utf-8"))
    return json_path, md_path
