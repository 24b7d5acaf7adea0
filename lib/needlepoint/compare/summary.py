"""comparison.md: the comparison document as tables a reader can check against each analysis.

Runs keep the order they were given. The only ordering stated is the one the intervals show:
two runs are ordered only when their intervals do not overlap, and that is said of those two.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from needlepoint.analysis.markdown import markdown_table
from needlepoint.analysis.summary import study_record_section
from needlepoint.compare.record import ComparedCell, ComparedRun, ComparisonDocument


def _rate(correct: int, valid: int, rate: float | None) -> str:
    return "—" if rate is None else f"{correct}/{valid} ({100 * rate:.0f}%)"


def run_name(run: ComparedRun) -> str:
    """How tables and lines name a run: its name (label or model), and SIMULATION if simulated."""
    return f"{run.shown} (SIMULATION)" if run.simulation else run.shown


def interval_order(runs: Sequence[ComparedRun]) -> list[str]:
    """Sentences for each pair of runs whose intervals do not overlap; nothing else is ordered."""
    lines = []
    for a, b in itertools.combinations(runs, 2):
        if a.interval is None or b.interval is None:
            continue
        if a.interval[0] > b.interval[1]:
            lines.append(f"- {run_name(a)} is above {run_name(b)}: the intervals do not overlap.")
        elif b.interval[0] > a.interval[1]:
            lines.append(f"- {run_name(b)} is above {run_name(a)}: the intervals do not overlap.")
    return lines


def _primary(doc: ComparisonDocument) -> list[str]:
    rows = [
        (
            run_name(r),
            r.model,
            r.body_profile,
            f"{r.complete_cases} of {r.planned_cases}",
            r.difference,
            "—" if r.interval is None else f"[{r.interval[0]:.4g}, {r.interval[1]:.4g}]",
            r.decision,
        )
        for r in doc.runs
    ]
    headers = ["run", "model", "body", "complete cases", "difference", "interval", "decision"]
    order = interval_order(doc.runs)
    evaluable = sum(r.interval is not None for r in doc.runs)
    return [
        *markdown_table(headers, rows),
        f"Threshold {doc.threshold:g}; {100 * doc.confidence:g}% case-cluster bootstrap "
        "intervals, each from its own run. Each run's decision is its own preregistered "
        "decision; no estimate combines runs.",
        "",
        "### What the intervals show",
        "",
        *(
            order
            or [
                "No two intervals are disjoint: the data do not order these runs."
                if evaluable > 1
                else "Fewer than two runs have an interval: nothing can be ordered."
            ]
        ),
        "",
        "### Reasons and caveats, per run",
        "",
        *[
            line
            for r in doc.runs
            for line in [f"- **{run_name(r)}**: {r.reason}."] + [f"  - {c}" for c in r.caveats]
        ],
        "",
    ]


def _failures(doc: ComparisonDocument) -> list[str]:
    """One row per failure kind that occurs (then unexecuted), one column per run."""
    kinds = sorted({k for r in doc.runs for k in r.protocol_failures})
    rows = [(k, *[r.protocol_failures.get(k, 0) for r in doc.runs]) for k in kinds]
    rows.append(("unexecuted", *[r.unexecuted for r in doc.runs]))
    return markdown_table(["kind", *[run_name(r) for r in doc.runs]], rows)


def _lenient(cell: ComparedCell) -> str:
    """The lenient score beside the strict one, only where it differs (equal adds nothing)."""
    if cell.lenient_correct == cell.correct:
        return ""
    return f"; lenient {_rate(cell.lenient_correct, cell.valid, cell.lenient_accuracy)}"


def _cells(run: ComparedRun) -> list[str]:
    def key(c: ComparedCell) -> tuple[str, int]:
        return (c.similarity, c.length)

    conds = list(dict.fromkeys(c.condition for c in run.accuracy))
    rows = []
    for (sim, length), group in itertools.groupby(run.accuracy, key=key):
        by = {c.condition: c for c in group}
        rows.append(
            (
                sim,
                length,
                *[
                    _rate(by[c].correct, by[c].valid, by[c].accuracy)
                    + _lenient(by[c])
                    + (f"; +{by[c].not_valid} not valid" if by[c].not_valid else "")
                    for c in conds
                ],
            )
        )
    return [f"#### {run_name(run)}", "", *markdown_table(["similarity", "length", *conds], rows)]


_CELLS_NOTE = (
    "Correct / valid (strict); the lenient score follows a cell only where it differs from the "
    "strict one."
)


def _item(line: str) -> str:
    """A headline line as a list item; its indented lines (Q1's and Q2's values) nested."""
    return f"  - {line.strip()}" if line.startswith("  ") else f"- {line}"


def comparison_markdown(doc: ComparisonDocument, record: Sequence[str] = ()) -> str:
    """Render comparison.json as comparison.md; a simulation says so on the first line.

    ``record``: the study record's lines (declaration chains, other runs on record), last.
    """
    lines: list[str] = [f"# {doc.label}", ""] if doc.label else []
    lines += [
        f"# Comparison: {len(doc.runs)} runs of one design ({doc.protocol_id})",
        "",
        f"- design fingerprint: `{doc.design_fingerprint}`",
        f"- comparison format {doc.format} v{doc.version}; runs in the order given",
        "",
        "Each run is analysed alone by the preregistered analysis, exactly as `needlepoint "
        "analyze` would; nothing is pooled.",
        "",
        "## Each run: what was run, then Q1 and Q2",
        "",
        *[
            line
            for r in doc.runs
            for line in [f"### {run_name(r)}", "", *[_item(x) for x in r.headline], ""]
        ],
        "## Primary analysis, per run",
        "",
        *_primary(doc),
        "## Protocol failures by kind, and unexecuted requests",
        "",
        *_failures(doc),
        "## Scores: strict, and lenient (exploratory)",
        "",
        "Strict is the protocol's score (Java trim, then exact match). Lenient counts an answer "
        "as right when the expected code (`UNKNOWN` on A) appears in it as a whole token, the "
        "way substring-match benchmarks score; it is exploratory, over the same protocol-valid "
        "responses, and never enters a decision.",
        "",
        *markdown_table(
            ["run", "group", "strict", "lenient", "not valid"],
            [
                (
                    run_name(r),
                    s.group,
                    _rate(s.correct, s.valid, s.accuracy),
                    _rate(s.lenient_correct, s.valid, s.lenient_accuracy),
                    s.not_valid,
                )
                for r in doc.runs
                for s in r.scores
            ],
        ),
        "### Accuracy by position, similarity and length",
        "",
        _CELLS_NOTE,
        "",
        *[line for r in doc.runs for line in _cells(r)],
        "## Fingerprints",
        "",
        *markdown_table(
            ["run", "model", "run folder", "protocol fingerprint", "journal sha256"],
            [
                (
                    run_name(r),
                    r.model,
                    f"`{r.run_dir}`",
                    f"`{r.protocol_fingerprint}`",
                    f"`{r.journal_sha256}`",
                )
                for r in doc.runs
            ],
        ),
    ]
    lines = [*lines, *study_record_section(record)]
    return "\n".join(lines).rstrip("\n") + "\n"
