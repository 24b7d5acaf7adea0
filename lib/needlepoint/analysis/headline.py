"""The headline a reader sees first: what was run, then Q1 and Q2 in plain words.

Plain text lines (the command line, notebooks, ``compare``) and their Markdown form both come
from here, so every place says the same thing. Q1 (is there a middle loss?) is descriptive; Q2
(does similarity add to it?) is the preregistered decision, unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from needlepoint.analysis.decision import NOT_EVALUABLE, SUPPORTED, fmt
from needlepoint.analysis.effects import SIMILARITIES
from needlepoint.analysis.inference import Effect, LengthSize, RunContext
from needlepoint.analysis.record import AnalysisDocument, Primary


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


def q1_reading(e: Effect) -> str:
    """Whether the interval shows a middle loss, the reverse, or neither."""
    if e.lower is None or e.upper is None:
        return "too few cases to tell"
    if e.lower > 0:
        return "a middle loss"
    if e.upper < 0:
        return "the middle does better than the ends"
    return "no clear middle loss (the interval includes 0)"


def q1_lines(doc: AnalysisDocument) -> list[str]:
    """Q1: the middle loss per similarity (and per length when there are several)."""
    rows = [r for r in doc.effects.measures if r.measure == "middle loss"]
    n = doc.effects.cases
    head = (
        "Q1, is there a middle loss? (descriptive, not preregistered: (B + E)/2 − M over the "
        f"{n} complete case{'s' * (n != 1)}, {100 * doc.parameters.confidence:g}% case-cluster "
        "intervals)"
    )
    if n == 0:
        return [head, "  no complete case: no estimate (the exploratory table lists the rest)"]
    sizes = {s.length: s for s in doc.context.lengths}
    lengths = sorted({o.length for o in doc.secondary.accuracy})
    lines = [head]
    for r in rows:
        if r.similarity not in SIMILARITIES:
            continue
        at = r.length if r.length is not None or len(lengths) != 1 else lengths[0]
        where = (
            "all lengths"
            if at is None
            else size_text(sizes[at])
            if at in sizes
            else (f"{at} records")
        )
        lines.append(f"  {r.similarity} similarity, {where}: {interval_text(r)}: {q1_reading(r)}")
    return lines


def q2_reading(p: Primary) -> str:
    """The preregistered decision in one plain sentence."""
    if p.decision == NOT_EVALUABLE or p.estimate is None or p.interval is None:
        return f"too few complete cases to answer ({p.reason})"
    est, lower, thr = fmt(p.estimate), p.interval.lower, p.threshold
    if p.decision == SUPPORTED:
        return f"near-duplicate names add about {est} to the middle loss; the interval excludes 0"
    if p.estimate < thr and lower <= 0:
        return (
            f"the added middle loss, {est}, is below the threshold {thr:g} and the interval "
            "reaches 0: the data do not show that near-duplicate names add to it"
        )
    if lower <= 0:
        return (
            f"near-duplicate names add about {est} in these cases, but the interval reaches "
            f"{fmt(lower)}: the rule does not support a real added loss"
        )
    return f"the added loss is above 0, but {est} is below the threshold {thr:g}"


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
    return [
        "Q2, does similarity add to it? (preregistered: middle loss high − low)",
        f"  {value}: {p.decision.upper()}. {reading[:1].upper()}{reading[1:]}.",
    ]


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
    """Table rows: measure, similarity, length, cases, estimate (exact), interval (exact)."""
    out = []
    for r in rows:
        exact = "" if r.estimate_exact is None else f" ({r.estimate_exact})"
        bounds = (
            "—"
            if r.lower is None
            else (f"[{fmt(r.lower)}, {fmt(r.upper or 0)}] ([{r.lower_exact}, {r.upper_exact}])")
        )
        length = "all" if r.length is None else r.length
        name = r.measure if r.condition is None else r.condition
        estimate = "—" if r.estimate is None else f"{fmt(r.estimate)}{exact}"
        out.append([name, r.similarity, length, r.cases, estimate, bounds])
    return out
