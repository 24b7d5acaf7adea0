"""contamination.md: the contamination report as a page a reviewer reads top to bottom."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from needlepoint.contamination.formats import iso_from_ns

if TYPE_CHECKING:
    from needlepoint.contamination.report import ContaminationReport


def _cell(value: object) -> str:
    text = "—" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """A GitHub-flavoured Markdown table; an empty one says so instead."""
    if not rows:
        return ["(none)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def report_markdown(report: ContaminationReport) -> str:
    """Render the report; the text depends only on the inputs, never on the clock."""
    o, t, c, m = report.overlap, report.timeline, report.canary, report.manifest
    verdict = "PASSED" if report.passed else "FAILED"
    out = ["# Contamination report", "", f"**Gate: {verdict}** (exit {report.exit_code})", ""]
    out += [f"- **{f.kind}** ({f.check}): {f.message}" for f in report.findings]
    if report.notices:
        out += ["", "Notices:", ""] + [f"- {n}" for n in report.notices]
    out += ["", "## Inputs", ""]
    out += table(["role", "path", "sha256"], [(r, p, h) for r, p, h in report.inputs])

    out += ["", "## Context manifest", ""]
    if m is None:
        out.append("The context was a single file; no manifest.")
    else:
        out += [f"Root `{m.root}`, {len(m.files)} file(s), manifest sha256 `{m.sha256}`.", ""]
        out += table(
            ["path", "size", "mtime (UTC)", "sha256"],
            [(e.path, e.size, e.mtime, e.sha256[:16]) for e in m.files],
        )
        if m.problems:
            out += ["", "Problems:", ""]
            out += table(
                ["path", "kind", "detail"], [(p.path, p.kind, p.detail) for p in m.problems]
            )

    out += ["", "## Reference vs context (overlap)", "", o.sentence() + ".", ""]
    out += table(
        ["reference", "answer", "where", "line"],
        [(x.reference_id, x.answer, x.where, x.text.strip()[:120]) for x in o.kept],
    )
    out += ["", "Discarded as chance:", ""]
    out += table(
        ["reference", "answer", "where", "reason"],
        [(x.reference_id, x.answer, x.where, x.discard_reason) for x in o.discarded],
    )

    out += ["", "## Timeline", "", t.sentence() + ".", ""]
    out += table(
        ["run", "battery", "started (UTC)", "values"],
        [(r.run_id, r.battery, iso_from_ns(r.started_ns), len(r.values)) for r in t.runs],
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

    out += ["", "## Canary and positive control", "", c.sentence() + ".", ""]
    out += table(
        ["condition", "closed questions", "exact", "tool calls"],
        [(s.condition, s.questions, s.exact, s.tool_calls) for s in c.summary],
    )
    flagged = [("dead canary", r) for r in c.dead] + [("leak", r) for r in c.leaks]
    flagged += [("no tool_calls", r) for r in c.missing_tool_calls]
    out += ["", "Flagged rows:", ""]
    out += table(
        ["flag", "line", "run", "question", "answer", "tool calls"],
        [(f, r.line, r.run_id, r.question_id, r.answer, r.tool_calls) for f, r in flagged],
    )
    return "\n".join(out) + "\n"
