"""summary.md: the analysis document rendered as Markdown tables a reader can check by hand."""

from __future__ import annotations

from collections.abc import Sequence

from needlepoint.analysis.decision import SIMULATION_BANNER
from needlepoint.analysis.markdown import cell, markdown_table
from needlepoint.analysis.record import AnalysisDocument
from needlepoint.analysis.tables import AccuracyCell, RefusalRow


def _rate(r: AccuracyCell | RefusalRow) -> str:
    if not r.valid or r.accuracy is None:
        return "no valid response"
    return f"{r.correct}/{r.valid} ({100 * r.accuracy:.0f}%)"


def _decision_lines(doc: AnalysisDocument) -> list[str]:
    p, comp = doc.primary, doc.completeness
    trust = f" Not verified: {doc.run.unverified}." if doc.run.unverified else ""
    lines = [f"**Decision: {p.decision}** — {p.reason}.{trust}", ""]
    iv = p.interval
    if iv:
        how = (
            f"exact enumeration of {iv.resamples:,} multisets of {iv.cases} cases, no random seed"
            if iv.method == "exact"
            else f"Monte Carlo, {iv.resamples:,} resamples of {iv.cases} cases, seed {iv.seed}"
        )
        lines.append(
            f"Difference in middle loss (high − low): **{p.estimate:.4g}** "
            f"(exactly {p.estimate_exact}); {100 * iv.confidence:g}% case-cluster "
            f"percentile interval [{iv.lower:.4g}, {iv.upper:.4g}] "
            f"(exactly [{iv.lower_exact}, {iv.upper_exact}]; {how}). "
            f"Threshold {p.threshold:g}."
        )
    lines += [
        "",
        f"Complete: {p.complete_cases} of {p.planned_cases} cases, "
        f"{comp.pairs_complete} of {comp.pairs_planned} pairs, "
        f"{comp.blocks_complete} of {comp.blocks_planned} blocks.",
        "",
    ]
    return lines


def study_record_section(record: Sequence[str]) -> list[str]:
    """The study record's lines (declaration chain, other runs on record) under their heading;
    nothing when there is nothing to say. The lines come from the caller, finished."""
    return ["## The study record", "", *record, ""] if record else []


def summary_markdown(doc: AnalysisDocument, record: Sequence[str] = ()) -> str:
    """Render analysis.json as summary.md; a simulated run says so on the first line.

    ``record``: the study record's lines (see ``study_record_section``), appended last.
    """
    from needlepoint.analysis.headline import headline_markdown
    from needlepoint.analysis.summary_panels import (
        LEGEND,
        diagnostic_lines,
        effect_lines,
        robustness_lines,
    )

    lines: list[str] = []
    if doc.simulation:
        lines += [f"# {SIMULATION_BANNER}", ""]
    proto, sec = doc.protocol, doc.secondary
    lines += [
        f"# Analysis: {proto.id} v{proto.version}",
        "",
        *headline_markdown(doc),
        *LEGEND,
        f"- protocol fingerprint: `{proto.fingerprint}`",
        f"- run fingerprint (journal): `{doc.run.journal_sha256 or 'none recorded'}`",
        f"- source: {doc.run.source}; analysis format {doc.format} v{doc.version}",
        "",
        "## Primary analysis (preregistered)",
        "",
        *_decision_lines(doc),
        "### Caveats",
        "",
        *([f"- {c}" for c in doc.caveats] or ["(none)"]),
        "",
        "### Per complete case",
        "",
    ]
    lengths = sorted({r.length for c in doc.primary.cases for r in c.lengths})
    lines += markdown_table(
        ["case", *[f"loss low/high, diff at {n}" for n in lengths], "case difference"],
        [
            [c.case]
            + [f"{r.loss_low:g} / {r.loss_high:g}, {r.difference:g}" for r in c.lengths]
            + [c.exact]
            for c in doc.primary.cases
        ],
    )
    lines += ["### Excluded from the primary analysis (exploratory)", ""]
    lines += markdown_table(
        ["case", "length", "loss low", "loss high", "difference", "reason"],
        [
            [r.case, r.length, r.loss_low, r.loss_high, r.difference, r.reason]
            for r in doc.exploratory
        ],
    )
    lines += markdown_table(
        ["seq", "case", "length", "similarity", "condition", "category", "kind"],
        [
            [e.seq, e.case, e.length, e.similarity, e.condition, e.category, e.kind or "—"]
            for e in doc.exclusions
        ],
    )
    lines += effect_lines(doc) + robustness_lines(doc) + diagnostic_lines(doc)
    lines += ["## Secondary tables", "", "### Accuracy (correct / protocol-valid)", ""]
    lines += markdown_table(
        ["similarity", "length", "condition", "accuracy", "not valid"],
        [[c.similarity, c.length, c.condition, _rate(c), c.not_valid] for c in sec.accuracy],
    )
    lines += ["### Refusal accuracy on condition A", ""]
    lines += markdown_table(
        ["group", "level", "accuracy", "not valid"],
        [[r.group, r.level, _rate(r), r.not_valid] for r in sec.refusal],
    )
    lines += ["### Errors by condition and similarity", ""]
    lines += markdown_table(
        [
            "condition",
            "similarity",
            "valid",
            "errors",
            "wrong code",
            "near-name distractor",
            "kinds",
        ],
        [
            [
                r.condition,
                r.similarity,
                r.valid,
                r.errors,
                r.wrong_code,
                f"{r.near_distractor}"
                + (
                    f" ({100 * r.near_distractor_share:.0f}%)"
                    if r.wrong_code and r.near_distractor_share is not None
                    else ""
                ),
                ", ".join(f"{k} {v}" for k, v in r.kinds.items()) or "—",
            ]
            for r in sec.errors
        ],
    )
    lines += ["### Protocol failures and unexecuted requests", ""]
    lines += markdown_table(
        ["kind", "count", "indeterminate"],
        [[r.kind, r.count, "yes" if r.indeterminate else "no"] for r in sec.protocol_failures],
    )
    luc = sec.latency_usage_cost
    lat = luc.latency_s
    lines += [
        "### Latency, usage and cost",
        "",
        f"- executed requests: {luc.executed}",
        f"- latency (s): median {cell(lat.median)}, min {cell(lat.min)}, "
        f"max {cell(lat.max)} over {lat.known} known; {lat.unknown} unknown",
    ]
    # Reasoning tokens only where the server reported some: most endpoints never do.
    reasoning = luc.reasoning_tokens
    reported = (
        [("reasoning_tokens", reasoning)] if reasoning is not None and reasoning.known else []
    )
    for field, u in (
        ("prompt_tokens", luc.prompt_tokens),
        ("completion_tokens", luc.completion_tokens),
        *reported,
        ("cost", luc.cost),
    ):
        total = (
            cell(u.total)
            if u.total is not None
            else (f"unknown (at least {cell(u.known_sum)})" if u.known else "unknown")
        )
        lines.append(f"- {field}: total {total}; {u.known} known, {u.unknown} unknown")
    ob = sec.order_balance
    lines += ["", "### Execution-order balance (blocks: planned / executed / complete)", ""]
    lines += markdown_table(
        ["length", "similarity", *ob.orders],
        [
            [s.length, s.similarity]
            + [
                f"{s.orders[o].planned} / {s.orders[o].executed} / {s.orders[o].complete}"
                for o in ob.orders
            ]
            for s in ob.strata
        ],
    )
    if doc.figures:
        lines += ["## Figures", ""]
        lines += [f"![{name}]({file})" for name, file in doc.figures.items()]
        lines.append("")
    return "\n".join([*lines, *study_record_section(record)])
