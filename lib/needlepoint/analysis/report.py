"""What a reader sees of an analysis: the headline, and summary.md, its one builder.

The headline says what was run, then Q1 and Q2 in plain words: Q1 (is there a middle loss?) is
descriptive; Q2 (does similarity add to it?) is the preregistered decision, unchanged. Its plain
text lines (the command line, notebooks, ``compare``) and its Markdown form both come from here,
so every place says the same thing.

summary.md renders the analysis document as Markdown tables a reader can check by hand: the
decision, where the effect is, the robustness panel, the diagnostics and the secondary tables,
then the study record's section. ``summary_markdown`` is its only builder, whether `needlepoint
analyze` or a notebook analyses the run: the study record passes its lines down
(``record_lines`` builds them), so the same run and the same record give the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from needlepoint.analysis.primary import (
    NOT_EVALUABLE,
    SIMILARITIES,
    SIMULATION_BANNER,
    SUPPORTED,
    fmt,
)
from needlepoint.analysis.record import (
    AccuracyCell,
    AnalysisDocument,
    Contrast,
    Effect,
    LengthSize,
    Primary,
    RefusalRow,
    RunContext,
    Scenario,
    ShapeRow,
    Shapes,
)
from needlepoint.analysis.shape import DECLINE, RISE
from needlepoint.run.declaration import Declared, run_chain_lines
from needlepoint.run.folder import recorded_declaration


def markdown_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], empty: str = ""
) -> list[str]:
    """A Markdown table's lines: None as a dash, floats to 4 digits. Without rows, the
    sentence ``empty`` says what that means (or nothing at all): never a bare "(none)"."""
    if not rows:
        return [empty, ""] if empty else []
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return [*out, ""]


def cell(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v).replace("|", "\\|")


# --- the headline --------------------------------------------------------------------------------


def dates(context: RunContext) -> str:
    """``2026-12-01``, ``2026-12-01 to 2026-12-03``, or that no journal gave any."""
    if context.first_date is None:
        return "dates unknown (no journal)"
    if context.first_date == context.last_date:
        return context.first_date
    return f"{context.first_date} to {context.last_date}"


def size_text(s: LengthSize) -> str:
    """``12 records ≈ 316 tokens (309–322)``, or characters when no token count exists."""
    median = f"{s.median:g}"
    spread = "" if s.minimum == s.maximum else f" ({s.minimum}–{s.maximum})"
    return f"{s.length} records ≈ {median} {s.unit}{spread}"


def facts_line(doc: AnalysisDocument) -> str:
    """Model, body profile, endpoint host, run dates and sessions, short design fingerprint."""
    p, c = doc.protocol, doc.context
    host = c.endpoint_host or ("none: simulated" if doc.simulation else "not recorded")
    sessions = "" if c.sessions is None else f", {c.sessions} session{'s' * (c.sessions != 1)}"
    design = (p.design_fingerprint or "unknown")[:12]
    return (
        f"model {p.model} ({p.body_profile} profile), endpoint {host}, run {dates(c)}"
        f"{sessions}; design {design}"
    )


def lengths_line(context: RunContext) -> str | None:
    """Prompt sizes per length and where they come from; None when nothing is known."""
    if not context.lengths:
        return None
    sources = sorted({s.source for s in context.lengths})
    return f"lengths: {'; '.join(size_text(s) for s in context.lengths)} ({', '.join(sources)})"


def interval_text(e: Effect) -> str:
    """``0.2857 [0, 0.5]``; without an interval, the estimate alone; without cases, a dash."""
    if e.estimate is None:
        return "—"
    if e.lower is None or e.upper is None:
        return f"{fmt(e.estimate)} (one case: no interval)"
    return f"{fmt(e.estimate)} [{fmt(e.lower)}, {fmt(e.upper)}]"


def p_text(p: float | None) -> str:
    """A p-value in four digits; one that is 0 (no resample on the other side) as < 0.0001."""
    if p is None:
        return "—"
    return "< 0.0001" if p == 0 else fmt(p)


def contrast_text(c: Contrast) -> str:
    """``B − M 0.6667 [0.5, 0.8167] (Holm p < 0.0001)``, or what is missing."""
    if c.estimate is None:
        return f"{c.name} —"
    if c.lower is None or c.upper is None:
        return f"{c.name} {fmt(c.estimate)} (one case: no interval)"
    return (
        f"{c.name} {fmt(c.estimate)} [{fmt(c.lower)}, {fmt(c.upper)}] "
        f"(Holm p {p_text(c.p_adjusted)})"
    )


def shape_reading(row: ShapeRow) -> str:
    """The verdict, the B, M and E counts it reads, and why; a trend says it is no U-shape."""
    counts = ", ".join(f"{k} {v}" for k, v in row.counts.items())
    trend = "; no U-shape" if row.verdict in (DECLINE, RISE) else ""
    return f"{row.verdict} ({counts}): {row.reason}{trend}"


def _where(doc: AnalysisDocument, length: int | None) -> str:
    """``all lengths``, or the length with its prompt size where one is known."""
    lengths = sorted({o.length for o in doc.secondary.accuracy})
    at = length if length is not None or len(lengths) != 1 else lengths[0]
    sizes = {s.length: s for s in doc.context.lengths}
    if at is None:
        return "all lengths"
    return size_text(sizes[at]) if at in sizes else f"{at} records"


def q1_lines(doc: AnalysisDocument) -> list[str]:
    """Q1: the shape of the position curve per similarity (and per length when there are
    several), from B − M and E − M under Holm; the composite middle loss beside it."""
    n = doc.effects.cases
    shapes = doc.effects.shapes
    how = "B − M and E − M" if shapes is not None else "(B + E)/2 − M"
    head = (
        f"Q1, what shape is the position curve? (descriptive, not preregistered: {how} over "
        f"the {n} complete case{'s' * (n != 1)}, {100 * doc.parameters.confidence:g}% "
        "case-cluster intervals"
    )
    if shapes is None:
        head += "; no shape verdict: this analysis.json predates it, run `analyze` again)"
    else:
        head += (
            f"; a U-shape needs both contrasts above 0 (intersection-union), each judged by "
            f"{shapes.method})"
        )
    if n == 0:
        return [head, "  no complete case: no estimate (the exploratory table lists the rest)"]
    loss = {(r.similarity, r.length): r for r in doc.effects.measures if r.measure == "middle loss"}
    lines = [head]
    if shapes is None:
        for (sim, length), r in loss.items():
            if sim in SIMILARITIES:
                lines.append(f"  {sim} similarity, {_where(doc, length)}: middle loss "
                             f"{interval_text(r)}")  # fmt: skip
        return lines
    for row in shapes.rows:
        composite = loss.get((row.similarity, row.length))
        tail = "" if composite is None else f"; middle loss {interval_text(composite)}"
        lines.append(
            f"  {row.similarity} similarity, {_where(doc, row.length)}: {shape_reading(row)}. "
            f"{contrast_text(row.first)}, {contrast_text(row.last)}{tail}"
        )
    lines += [f"  Note: {d}." for d in shapes.disagreements]
    return lines


def q2_reading(p: Primary) -> str:
    """The preregistered decision in one plain sentence."""
    if p.decision == NOT_EVALUABLE or p.estimate is None or p.interval is None:
        return f"too few complete cases to answer ({p.reason})"
    est, lower, thr = fmt(p.estimate), p.interval.lower, p.threshold
    if p.decision == SUPPORTED:
        return f"near-duplicate names raise (B + E)/2 − M by about {est}; the interval excludes 0"
    if p.estimate < thr and lower <= 0:
        return (
            f"the added (B + E)/2 − M, {est}, is below the threshold {thr:g} and the interval "
            "reaches 0: the data do not show that near-duplicate names add to it"
        )
    if lower <= 0:
        return (
            f"near-duplicate names add about {est} in these cases, but the interval reaches "
            f"{fmt(lower)}: the rule does not support a real added loss"
        )
    return f"the added loss is above 0, but {est} is below the threshold {thr:g}"


def change_line(shapes: Shapes) -> str:
    """Where Q2's change sits: each position's accuracy high − low, Holm across the three."""
    parts = ", ".join(contrast_text(c) for c in shapes.changes)
    sits = shapes.change_sits
    return (
        f"  Where the change sits: {sits}. Accuracy high − low per position: {parts} "
        f"({shapes.change_method})."
    )


def q2_lines(doc: AnalysisDocument) -> list[str]:
    """Q2: the preregistered difference, interval and decision, with its plain reading."""
    p = doc.primary
    reading = q2_reading(p)
    value = "—"
    if p.estimate is not None and p.interval is not None:
        value = (
            f"{fmt(p.estimate)} [{fmt(p.interval.lower)}, {fmt(p.interval.upper)}] (exactly "
            f"{p.estimate_exact} [{p.interval.lower_exact}, {p.interval.upper_exact}])"
        )
    lines = [
        "Q2, does similarity add to it? (preregistered: (B + E)/2 − M, high − low)",
        f"  {value}: {p.decision.upper()}. {reading[:1].upper()}{reading[1:]}.",
    ]
    if p.decision != NOT_EVALUABLE and doc.effects.shapes is not None:
        lines.append(change_line(doc.effects.shapes))
    return lines


def headline_lines(doc: AnalysisDocument) -> list[str]:
    """The plain-text headline: facts, lengths, Q1, Q2, and the robustness verdict."""
    lines = [facts_line(doc)]
    lengths = lengths_line(doc.context)
    if lengths:
        lines.append(lengths)
    lines += q1_lines(doc) + q2_lines(doc)
    lines.append(f"Robustness: {doc.robustness.verdict}")
    return lines


def headline_markdown(doc: AnalysisDocument) -> list[str]:
    """The headline as Markdown: the facts as a list, Q1 and Q2 as short paragraphs."""
    lines = [f"- {facts_line(doc)}"]
    lengths = lengths_line(doc.context)
    if lengths:
        lines.append(f"- {lengths}")
    lines.append("")
    for block in (q1_lines(doc), q2_lines(doc)):
        lines.append(f"**{block[0]}**")
        lines.append("")
        lines += [f"- {line.strip()}" for line in block[1:]]
        lines.append("")
    lines += [f"**Robustness: {doc.robustness.verdict}**", ""]
    return lines


def effect_rows(rows: Sequence[Effect]) -> list[list[object]]:
    """Table rows: measure, similarity, length, cases, estimate, interval (the exact fractions
    are in analysis.json, not in the table)."""
    out = []
    for r in rows:
        bounds = "—" if r.lower is None else f"[{fmt(r.lower)}, {fmt(r.upper or 0)}]"
        length = "all" if r.length is None else r.length
        name = r.measure if r.condition is None else r.condition
        estimate = "—" if r.estimate is None else fmt(r.estimate)
        out.append([name, r.similarity, length, r.cases, estimate, bounds])
    return out


# --- summary.md ----------------------------------------------------------------------------------


LEGEND = [
    "**How to read this.** B, M and E: the target record at the beginning, in the middle or at "
    "the end of the records; A: absent (an unrelated record of the same length in the middle, "
    "so the right answer is `UNKNOWN`). For one block, middle loss = (B + E)/2 − M with 1 for a "
    "correct answer and 0 for a wrong one: 1 means both ends right and the middle wrong, 0 no "
    "loss, a negative value the middle better than the ends. A per-case cell such as "
    "`0 / -0.5, -0.5` reads: middle loss under low similarity 0, under high similarity −0.5, "
    "and their difference (high − low) −0.5. Tables show 4 digits; the exact fractions "
    "(`5/14`) are in `analysis.json`. `—` means missing, never 0. Intervals are 95% "
    "case-cluster percentile bootstrap intervals unless named otherwise.",
    "",
]


def shape_lines(shapes: Shapes | None) -> list[str]:
    """Q1's shape verdicts as one table: both contrasts, their Holm-adjusted p, the verdict."""
    if shapes is None:
        return []
    headers = ["similarity", "length", "B, M, E", "B − M", "Holm p", "E − M", "Holm p", "shape"]

    def bounds(c: Contrast) -> str:
        if c.estimate is None:
            return "—"
        if c.lower is None or c.upper is None:
            return fmt(c.estimate)
        return f"{fmt(c.estimate)} [{fmt(c.lower)}, {fmt(c.upper)}]"

    rows = [
        [
            r.similarity,
            "all" if r.length is None else r.length,
            ", ".join(r.counts.values()),
            bounds(r.first),
            p_text(r.first.p_adjusted),
            bounds(r.last),
            p_text(r.last.p_adjusted),
            r.verdict,
        ]
        for r in shapes.rows
    ]
    return [
        "### The shape of the position curve (Q1)",
        "",
        f"Both ends against the middle; a U-shape needs both above 0. {shapes.method}; the "
        "unadjusted p and exact fractions are in `analysis.json` (`effects.shapes`).",
        "",
        *markdown_table(headers, rows),
    ]


def effect_lines(doc: AnalysisDocument) -> list[str]:
    """Middle loss, B − M and E − M per similarity and their differences; accuracy by position."""
    e = doc.effects
    lines = [
        "## Where the effect is (descriptive)",
        "",
        f"Over the {e.cases} complete cases, per case first (lengths averaged), then cases "
        "with equal weight; the high − low row of the middle loss is the preregistered "
        "difference. B − M and E − M split the middle loss into its two ends.",
        "",
    ]
    headers = ["measure", "similarity", "length", "cases", "estimate", "interval"]
    lines += markdown_table(headers, effect_rows(e.measures))
    lines += shape_lines(e.shapes)
    lines += [
        "### Accuracy by position (every case with a valid answer in the cell)",
        "",
        "Drawn against position in `accuracy_by_position_lines.png` (unless run without figures).",
        "",
    ]
    headers = ["position", "similarity", "length", "cases", "accuracy", "interval"]
    return lines + markdown_table(headers, effect_rows(e.positions))


def _scenario_rows(rows: Sequence[Scenario]) -> list[list[object]]:
    out = []
    for s in rows:
        bounds = (
            "—"
            if s.lower_exact is None or s.upper_exact is None
            else f"[{fmt(Fraction(s.lower_exact))}, {fmt(Fraction(s.upper_exact))}]"
        )
        estimate = "—" if s.estimate is None else fmt(s.estimate)
        changed = "**yes**" if s.changes else "no"
        out.append([s.label, s.complete_cases, estimate, bounds, s.decision, changed])
    return out


def robustness_lines(doc: AnalysisDocument) -> list[str]:
    """The panel: missing cells, leave one case out, the other methods, then the verdict."""
    r, p = doc.robustness, doc.primary
    headers = ["what changes", "complete cases", "estimate", "interval", "decision", "changed"]
    lines = ["## Robustness: how much the verdict depends on what", "", "### Missing cells", ""]
    if r.missing:
        lines += [
            "Each response that is not protocol-valid blocks its case. Scored correct and "
            "wrong, one at a time (where it is its case's only missing cell) and all at once at "
            "the extremes:",
            "",
            *markdown_table(headers, _scenario_rows(r.missing)),
        ]
    else:
        lines += ["No missing cell: every planned response is protocol-valid.", ""]
    lines += ["### Leave one case out", ""]
    lines += markdown_table(
        headers, _scenario_rows(r.leave_one_out), "Not evaluable: no case to leave out."
    )
    lines += ["### Other methods on the same complete cases", ""]
    f, b = r.sign_flip, r.second_interval
    if f is not None:
        how = (
            f"all {f.patterns:,} sign patterns"
            if f.method == "exact"
            else f"{f.patterns:,} random patterns, seed {f.seed}"
        )
        lines.append(
            f"- Sign-flip test of the {f.cases} case differences ({how}): one-sided p = "
            f"{fmt(f.p_one_sided)} (exactly {f.p_one_sided_exact}), two-sided "
            f"{fmt(f.p_two_sided)} ({f.p_two_sided_exact}); "
            f"{'agrees with' if f.agrees else 'DISAGREES with'} the decision."
        )
    if b is not None:
        shown = b.note if b.lower is None else f"[{fmt(b.lower)}, {fmt(b.upper or 0)}]"
        agree = {True: "agrees with", False: "DISAGREES with", None: "cannot be compared with"}
        lines.append(
            f"- {b.method}, {b.resamples:,} resamples, seed {b.seed}: {shown}; "
            f"{agree[b.agrees]} the decision (percentile interval "
            + (f"[{p.interval.lower_exact}, {p.interval.upper_exact}])." if p.interval else "—).")
        )
    for m in r.models:
        if m.estimate is None or m.lower is None:
            lines.append(f"- {m.model}: {m.note}.")
            continue
        lines.append(
            f"- {m.model}, {m.covariance}: contrast {fmt(m.estimate)} (SE {fmt(m.se or 0)}), "
            f"[{fmt(m.lower)}, {fmt(m.upper or 0)}], one-sided p {fmt(m.p_one_sided or 0)}; "
            f"{'agrees with' if m.agrees else 'DISAGREES with'} the decision."
        )
    if f is None:
        lines.append("- Not evaluable: the methods need the complete cases the rule requires.")
    lines += [
        "",
        "Where they disagree, the preregistered percentile interval still decides: it was fixed "
        "before any result existed, and the others are shown only to say how much the verdict "
        "rests on that choice. The headline's robustness line sums this panel up.",
        "",
    ]
    return lines


def diagnostic_lines(doc: AnalysisDocument) -> list[str]:
    """Accuracy by block position, half and session; wrong answers by what they name."""
    d = doc.diagnostics
    lines = ["## Diagnostics", "", "### Accuracy of B, M and E by position, half and session", ""]
    lines += markdown_table(
        ["group", "level", "correct / valid", "accuracy"],
        [[r.group, r.level, f"{r.correct}/{r.valid}", r.accuracy] for r in d.accuracy],
    )
    lines += ["### Wrong answers (B, M, E) by what they name", ""]
    lines += markdown_table(
        ["similarity", "names", "count", "share of wrong"],
        [[r.similarity, r.kind, r.count, r.share] for r in d.wrong_kinds],
        "No wrong answer at B, M or E.",
    )
    lines += ["### High similarity: answers by near names before the target", ""]
    lines += markdown_table(
        ["length", "position", "near names before", "valid", "wrong", "naming a near name"],
        [[r.length, r.condition, r.preceding, r.valid, r.wrong, r.near] for r in d.preceding],
    )
    lines += [f"- {n}" for n in d.notes]
    return [*lines, ""] if d.notes else lines


def _rate(r: AccuracyCell | RefusalRow) -> str:
    if not r.valid or r.accuracy is None:
        return "no valid response"
    return f"{r.correct}/{r.valid} ({100 * r.accuracy:.0f}%)"


def _decision_lines(doc: AnalysisDocument) -> list[str]:
    p, comp = doc.primary, doc.completeness
    trust = f" Not verified: {doc.run.unverified}." if doc.run.unverified else ""
    lines = [f"The rule, applied: {p.reason}.{trust}", ""]
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


def summary_markdown(doc: AnalysisDocument, record: Sequence[str] = ()) -> str:
    """Render analysis.json as summary.md; a simulated run says so on the first line.

    ``record``: the study record's lines (``record_lines``), appended last under their heading.
    """
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
        *([f"- {c}" for c in doc.caveats] or ["No caveat applies."]),
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
        "No complete case.",
    )
    lines += ["### Excluded from the primary analysis (exploratory)", ""]
    lines += markdown_table(
        ["case", "length", "loss low", "loss high", "difference", "reason"],
        [
            [r.case, r.length, r.loss_low, r.loss_high, r.difference, r.reason]
            for r in doc.exploratory
        ],
        "Every planned case is complete: nothing is exploratory.",
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
        "No protocol failure, and every planned request was executed.",
    )
    luc = sec.latency_usage_cost
    lat = luc.latency_s
    lines += [
        "### Latency, usage and cost",
        "",
        f"- executed requests: {luc.executed}",
        f"- latency (s): median {cell(lat.median)}, min {cell(lat.min)}, "
        f"max {cell(lat.max)} over {lat.known} known; {lat.unknown} unknown",
        "- token counts and cost: "
        + (
            "made up by the simulator (a fake transport): no endpoint reported them"
            if doc.simulation
            else "as the endpoint reported them in each response's `usage`"
        ),
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


# --- the study record's section ------------------------------------------------------------------


def display(path: Path) -> str:
    """A path as the user gave it; an absolute one relative to here, so no machine path shows."""
    if not path.is_absolute():
        return path.as_posix()
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return path.name


def record_lines(
    run_dirs: Sequence[str | Path],
    base: Path,
    *,
    shown: Sequence[str] | None = None,
    later: Callable[[str], Sequence[Declared]] | None = None,
    undeclared: bool = False,
) -> list[str]:
    """Each declared run's declaration chain for summary.md and comparison.md, paths as seen
    from ``base``: the study record's section, which the study record extends.

    What the study record found under an evidence root comes down from it: ``later``, the
    amendments found there for a declaration's SHA-256; with ``undeclared`` a run started
    without a declaration is named as such. ``shown`` names the runs (default: each as given,
    ``display``). Without them (a notebook, or `analyze` where it finds no evidence root) only
    the declared runs' own chains are listed.
    """
    runs = [Path(p) for p in run_dirs]
    names = [display(r) for r in runs] if shown is None else list(shown)
    lines: list[str] = []
    for run, name in zip(runs, names, strict=True):
        ref = recorded_declaration(run)
        if ref is None and not undeclared:
            continue
        amendments = list(later(ref.sha256)) if ref is not None and later is not None else []
        lines += [*run_chain_lines(run, base, amendments, shown=name), ""]
    return lines[:-1]


def study_record_section(record: Sequence[str]) -> list[str]:
    """The study record's lines under their heading; nothing when there is nothing to say."""
    return ["## The study record", "", *record, ""] if record else []
