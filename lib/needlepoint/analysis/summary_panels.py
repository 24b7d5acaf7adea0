"""summary.md's sections beside the preregistered decision: the legend, where the effect is, the
robustness panel and the diagnostics. ``summary.summary_markdown`` places them."""

from __future__ import annotations

from collections.abc import Sequence

from needlepoint.analysis.decision import fmt
from needlepoint.analysis.headline import effect_rows
from needlepoint.analysis.inference import Scenario
from needlepoint.analysis.markdown import markdown_table
from needlepoint.analysis.record import AnalysisDocument

LEGEND = [
    "**How to read this.** B, M and E: the target record at the beginning, in the middle or at "
    "the end of the records; A: absent (an unrelated record of the same length in the middle, "
    "so the right answer is `UNKNOWN`). For one block, middle loss = (B + E)/2 − M with 1 for a "
    "correct answer and 0 for a wrong one: 1 means both ends right and the middle wrong, 0 no "
    "loss, a negative value the middle better than the ends. A per-case cell such as "
    "`0 / -0.5, -0.5` reads: middle loss under low similarity 0, under high similarity −0.5, "
    "and their difference (high − low) −0.5. Exact values are fractions (`5/14`). `—` means "
    "missing, never 0. Intervals are 95% case-cluster percentile bootstrap intervals unless "
    "named otherwise.",
    "",
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
    headers = ["measure", "similarity", "length", "cases", "estimate (exact)", "interval (exact)"]
    lines += markdown_table(headers, effect_rows(e.measures))
    lines += [
        "### Accuracy by position (every case with a valid answer in the cell)",
        "",
        "Drawn against position in `accuracy_by_position_lines.png` (unless run without figures).",
        "",
    ]
    headers = ["position", "similarity", "length", "cases", "accuracy (exact)", "interval (exact)"]
    return lines + markdown_table(headers, effect_rows(e.positions))


def _scenario_rows(rows: Sequence[Scenario]) -> list[list[object]]:
    out = []
    for s in rows:
        bounds = "—" if s.lower_exact is None else f"[{s.lower_exact}, {s.upper_exact}]"
        estimate = "—" if s.estimate_exact is None else s.estimate_exact
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
    lines += markdown_table(headers, _scenario_rows(r.leave_one_out))
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
        "rests on that choice.",
        "",
        f"**Verdict: {r.verdict}**",
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
    )
    lines += ["### High similarity: answers by near names before the target", ""]
    lines += markdown_table(
        ["length", "position", "near names before", "valid", "wrong", "naming a near name"],
        [[r.length, r.condition, r.preceding, r.valid, r.wrong, r.near] for r in d.preceding],
    )
    lines += [f"- {n}" for n in d.notes]
    return [*lines, ""] if d.notes else lines
