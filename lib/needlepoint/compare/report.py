"""What a reader sees of a comparison: comparison.md, and the figures, each run in the order given.

comparison.md sets the comparison document out as tables a reader can check against each
analysis. The only ordering stated is the one the intervals show: two runs are ordered only when
their intervals do not overlap, and that is said of those two. The figures show every run's
difference and interval, its accuracy and its failures, one row (or one row of panels) per run,
each drawn inside ``stable_figure``, so its PNG bytes depend only on the comparison.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from needlepoint.analysis.figures import (
    CONDITION_LABELS,
    MIDDLE_LOSS_NOTE,
    SIM_COLOURS,
    accuracy_panel,
    add_note,
    difference_limits,
    stable_figure,
    threshold_line,
)
from needlepoint.analysis.primary import SIMULATION_BANNER
from needlepoint.analysis.report import markdown_table, study_record_section
from needlepoint.analysis.secondary import CONFIDENCE, clopper_pearson
from needlepoint.compare.record import ComparedCell, ComparedRun, ComparisonDocument
from needlepoint.safetext import md_code


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
            r.decision if r.interval is None else f"{r.decision}; {r.robustness}",
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
        "Every run's accuracy by length × similarity × position in one table: [grid.md](grid.md) "
        "(and grid.csv, grid.png).",
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
                    md_code(r.run_dir),
                    f"`{r.protocol_fingerprint}`",
                    f"`{r.journal_sha256}`",
                )
                for r in doc.runs
            ],
        ),
    ]
    lines = [*lines, *study_record_section(record)]
    return "\n".join(lines).rstrip("\n") + "\n"


# --- the figures ---------------------------------------------------------------------------------


def _label(run: ComparedRun) -> str:
    """A run's tick label: its name (label or model), SIMULATION, and the model if named else."""
    tag = "  SIMULATION" if run.simulation else ""
    model = "" if run.shown.startswith(run.model) else f"\n{run.model}"
    return f"{run.shown}{tag}{model}"


def _figure(
    doc: ComparisonDocument,
    size: tuple[float, float],
    margins: tuple[float, float, float, float],
    title: str,
    path: str | Path,
) -> Any:
    """``stable_figure`` for a comparison: its red first line is the simulation label, or the
    mixed one."""
    return stable_figure(size, margins, title, doc.simulation, path, doc.label or SIMULATION_BANNER)


def forest(doc: ComparisonDocument, path: str | Path) -> Path:
    """Each run's difference with its interval, zero and the threshold; no combined estimate."""
    runs = doc.runs
    title = "Similarity difference in middle loss (high − low), each run analysed alone"
    size = (9.5, 1.85 + 0.55 * len(runs))
    with _figure(doc, size, (2.8, 2.6, 0.55, 0.95), title, path) as fig:
        ax = fig.subplots()
        shown = [(y, r.interval, r.difference) for y, r in enumerate(runs) if r.interval]
        if shown:
            ax.hlines(
                [y for y, _, _ in shown],
                [iv[0] for _, iv, _ in shown],
                [iv[1] for _, iv, _ in shown],
                color="black",
                lw=2.5,
                label=f"{100 * doc.confidence:g}% interval",
            )
            ax.scatter(
                [d for _, _, d in shown],
                [y for y, _, _ in shown],
                marker="D",
                color="black",
                s=50,
                zorder=3,
                label="difference",
            )
        for y, run in enumerate(runs):
            text = (
                f"{run.difference:.3f} [{run.interval[0]:.3f}, {run.interval[1]:.3f}]"
                if run.interval is not None and run.difference is not None
                else "no interval"
            )
            text += f"\n{run.decision} ({run.complete_cases}/{run.planned_cases} cases)"
            ax.text(1.02, y, text, transform=ax.get_yaxis_transform(), va="center", fontsize=8)
        ax.axvline(0, color="grey", lw=1)
        threshold_line(ax, doc.threshold)
        ax.set_yticks(range(len(runs)), [_label(r) for r in runs], fontsize=8)
        ax.set_ylim(len(runs) - 0.5, -0.5)
        values = [v for _, iv, d in shown for v in (*iv, d) if v is not None]
        ax.set_xlim(*difference_limits(values))
        ax.set_xlabel("difference in middle loss, high − low similarity (runs in the order given)")
        ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncols=3, fontsize=8, frameon=False)
        add_note(fig, MIDDLE_LOSS_NOTE)
    return Path(path)


def _cell_text(c: ComparedCell) -> str:
    # the exploratory lenient count only where it says something new
    lenient = f" [{c.lenient_correct}]" if c.lenient_correct != c.correct else ""
    text = f"{c.correct}/{c.valid}{lenient}" if c.valid else "none valid"
    return text + (f" +{c.not_valid}" if c.not_valid else "")


def accuracy_panels(doc: ComparisonDocument, path: str | Path) -> Path:
    """Small multiples: strict accuracy by position × length, one row per run, one column per
    similarity, with correct/valid (and the lenient count, exploratory) on every cell."""
    runs = doc.runs
    first = runs[0].accuracy
    sims = list(dict.fromkeys(c.similarity for c in first))
    lengths = sorted({c.length for c in first})
    conds = list(dict.fromkeys(c.condition for c in first))
    title = "Exact-correct rate by position and length, per run [lenient, where it differs]"
    panel_h = 0.5 + 0.62 * len(conds)
    size = (2.0 + 3.3 * len(sims) + 1.1, 0.9 + panel_h * len(runs))
    with _figure(doc, size, (1.6, 1.3, 0.55, 0.55), title, path) as fig:
        fig.subplots_adjust(wspace=0.08, hspace=0.4)
        axes = fig.subplots(len(runs), len(sims), squeeze=False, sharey=True)
        image = None
        for row, run in enumerate(runs):
            for col, sim in enumerate(sims):
                ax = axes[row][col]
                cells = [c for c in run.accuracy if c.similarity == sim]
                image = accuracy_panel(ax, cells, conds, lengths, _cell_text, 7.5)
                last = row == len(runs) - 1
                ax.set_xticks(
                    range(len(lengths)), [f"{n} records" if last else "" for n in lengths]
                )
                ax.set_yticks(
                    range(len(conds)), [CONDITION_LABELS.get(c, c) for c in conds], fontsize=8
                )
                name = f"{run.shown}{' (SIMULATION)' if run.simulation else ''}"
                ax.set_title(f"{name} · {sim} similarity", fontsize=8.5)
        if image is not None:
            top, bottom = axes[0][-1].get_position(), axes[-1][-1].get_position()
            cax = fig.add_axes(
                (top.x1 + 0.25 / fig.get_figwidth(), bottom.y0, 0.015, top.y1 - bottom.y0)
            )
            fig.colorbar(image, cax=cax, label="correct / valid (strict)")
    return Path(path)


def failures(doc: ComparisonDocument, path: str | Path) -> Path:
    """Protocol failures by kind and unexecuted requests, one stacked bar per run."""
    runs = doc.runs
    kinds = [*sorted({k for r in runs for k in r.protocol_failures}), "unexecuted"]
    title = "Protocol failures by kind, and unexecuted requests, per run"
    size = (9.5, 1.5 + 0.55 * len(runs))
    with _figure(doc, size, (2.8, 2.6, 0.55, 0.6), title, path) as fig:
        ax = fig.subplots()
        from matplotlib import colormaps

        palette = colormaps["tab20"]
        left = [0] * len(runs)
        for i, kind in enumerate(kinds):
            counts = [
                r.unexecuted if kind == "unexecuted" else r.protocol_failures.get(kind, 0)
                for r in runs
            ]
            if not any(counts):
                continue
            colour = "#bdbdbd" if kind == "unexecuted" else palette(i % 20)
            ax.barh(range(len(runs)), counts, left=left, color=colour, label=kind, height=0.6)
            left = [a + b for a, b in zip(left, counts, strict=True)]
        planned = max((sum(c.valid + c.not_valid for c in r.accuracy) for r in runs), default=1)
        if any(left):  # with none anywhere, one sentence says so; "0" labels would cross it
            for y, total in enumerate(left):
                ax.text(total, y, f"  {total}", va="center", fontsize=8)
        else:
            ax.text(
                0.5,
                0.5,
                "no protocol failure and no unexecuted request in any run",
                ha="center",
                va="center",
                transform=ax.transAxes,
            )
        ax.set_yticks(range(len(runs)), [_label(r) for r in runs], fontsize=8)
        ax.set_ylim(len(runs) - 0.5, -0.5)
        ax.set_xlim(0, max(max(left, default=0) * 1.15, 1))
        ax.set_xlabel(f"requests (of {planned} planned per run)")
        if any(left):
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    return Path(path)


# The results grid: every run's accuracy by length × similarity × position, in one table.
#
# comparison.md sets out each run alone, one table per run; a reader comparing models wants one
# table, one CSV and one figure: model × length × similarity × position, each cell with its
# correct / valid, the accuracy and an exact 95% (Clopper–Pearson) interval, and each run's
# answers to the two questions beside it (Q1: is there a middle loss; Q2: the preregistered
# decision). Every count is copied from the run's own analysis (the comparison document's
# accuracy cells, which count protocol-valid answers only: a failure is never a wrong answer);
# nothing is pooled across runs, and the runs keep the order they were given.
#
# ``grid.csv`` has one row per run × length × similarity × position, the run's Q1 and Q2 repeated
# on each of its rows so that any filter keeps them; ``grid.md`` has one row per run × length ×
# similarity with the four positions as columns, after a table of each run's Q1 and Q2. The
# figure draws the same cells as small multiples, one panel per run.

GRID_CSV = "grid.csv"
GRID_MD = "grid.md"
GRID_FIGURE = "grid.png"
POSITIONS = ("B", "M", "E", "A")


@dataclass(frozen=True)
class GridRow:
    """One run × length × similarity × position cell: correct of ``n`` valid answers, the
    accuracy and its exact interval (None where no answer was valid), and the run's Q1 and Q2."""

    run: str
    model: str
    simulation: bool
    length: int
    similarity: str
    position: str
    correct: int
    n: int
    accuracy: float | None
    ci_low: float | None
    ci_high: float | None
    not_valid: int
    q1_shape: str
    q2_decision: str
    q2_difference: float | None
    q2_low: float | None
    q2_high: float | None


def q1_shape(run: ComparedRun) -> str:
    """The run's Q1 in words: the shape verdict per similarity over all lengths, as its
    analysis reads it (analysis.shape)."""
    if run.shape is None:
        return "no shape verdict (a comparison written before it existed)"
    return run.shape


def q2_text(run: ComparedRun) -> str:
    """The run's Q2: the decision, the difference and its interval."""
    if run.difference is None or run.interval is None:
        return run.decision
    return f"{run.decision}: {run.difference:.3g} [{run.interval[0]:.3g}, {run.interval[1]:.3g}]"


def grid_rows(doc: ComparisonDocument) -> list[GridRow]:
    """Every cell of every run, in the runs' order, then length, similarity and position."""
    out = []
    for run in doc.runs:
        shape = q1_shape(run)
        low, high = run.interval if run.interval is not None else (None, None)
        order = {p: i for i, p in enumerate(POSITIONS)}
        sims = list(dict.fromkeys(c.similarity for c in run.accuracy))
        cells = sorted(
            run.accuracy,
            key=lambda c: (c.length, sims.index(c.similarity), order.get(c.condition, 9)),
        )
        for c in cells:
            interval = clopper_pearson(c.correct, c.valid)
            out.append(
                GridRow(
                    run=run.shown,
                    model=run.model,
                    simulation=run.simulation,
                    length=c.length,
                    similarity=c.similarity,
                    position=c.condition,
                    correct=c.correct,
                    n=c.valid,
                    accuracy=c.accuracy,
                    ci_low=None if interval is None else interval[0],
                    ci_high=None if interval is None else interval[1],
                    not_valid=c.not_valid,
                    q1_shape=shape,
                    q2_decision=run.decision,
                    q2_difference=run.difference,
                    q2_low=low,
                    q2_high=high,
                )
            )
    return out


def _csv_value(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format(value, ".6g")
    return str(value)


def grid_csv(doc: ComparisonDocument) -> bytes:
    """grid.csv: a header, then one row per cell (empty where a value does not exist)."""
    names = [f.name for f in fields(GridRow)]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(names)
    for row in grid_rows(doc):
        writer.writerow([_csv_value(getattr(row, n)) for n in names])
    return buffer.getvalue().encode("utf-8")


def _cell(row: GridRow | None) -> str:
    if row is None:
        return "—"
    if row.accuracy is None or row.ci_low is None or row.ci_high is None:
        return f"none valid of {row.not_valid}" if row.not_valid else "—"
    return f"{row.accuracy:.2f} ({row.correct}/{row.n}) [{row.ci_low:.2f}, {row.ci_high:.2f}]"


def grid_markdown(doc: ComparisonDocument) -> str:
    """grid.md: each run's Q1 and Q2, then the grid with the positions as columns."""
    rows = grid_rows(doc)
    lines = [f"**{doc.label}**", ""] if doc.label else []
    lines += ["# Results grid", ""]
    lines += [
        "Each run analysed alone and set side by side; nothing is pooled. A cell is the "
        f"exact-correct rate over the valid answers (correct/n) with its exact "
        f"{100 * CONFIDENCE:g}% (Clopper–Pearson) interval; failures are not wrong answers and "
        "are not in n. B, M, E: the target at the beginning, middle or end; A: absent (the "
        "right answer is UNKNOWN). The same cells, one row per position, are in grid.csv.",
        "",
        "## The two questions, per run",
        "",
    ]
    # the model only where a label names the run; the robustness verdict's first word (its
    # reasons are in comparison.md and each summary.md)
    named = any(r.shown != r.model for r in doc.runs)
    answers = [
        [r.shown, *([r.model] if named else []), q1_shape(r), q2_text(r), _verdict(r)]
        for r in doc.runs
    ]
    headers = ["run", *(["model"] if named else []), "Q1: middle loss?", "Q2: decision"]
    lines += markdown_table([*headers, "robustness"], answers)
    lines += ["## Accuracy by length × similarity × position", ""]
    keys = list(dict.fromkeys((r.run, r.length, r.similarity) for r in rows))
    by = {(r.run, r.length, r.similarity, r.position): r for r in rows}
    table = [
        [run, length, sim, *(_cell(by.get((run, length, sim, p))) for p in POSITIONS)]
        for run, length, sim in keys
    ]
    headers = ["run", "records", "similarity", *(CONDITION_LABELS[p] for p in POSITIONS)]
    lines += markdown_table(headers, table)
    return "\n".join(lines).rstrip("\n") + "\n"


def _verdict(run: ComparedRun) -> str:
    return run.robustness.split(":")[0]


def grid_figure(doc: ComparisonDocument, path: str | Path) -> Path:
    """Small multiples: one panel per run (no empty panel), accuracy by position with its exact
    interval, one line per length × similarity (colour: similarity; line style and marker:
    length); A, where the right answer is UNKNOWN, stands apart, unjoined."""
    rows = grid_rows(doc)
    every = list(dict.fromkeys(r.run for r in rows))
    runs = drawn_runs(rows)
    left_out = [r for r in every if r not in runs]
    cols = min(len(runs), 3)
    nrows = math.ceil(len(runs) / cols)
    lengths = sorted({r.length for r in rows})
    markers = ("o", "s", "^", "D", "v", "P")
    styles = ("-", ":", "-.", "--")
    title = f"Exact-correct rate by position, per run, with exact {100 * CONFIDENCE:g}% intervals"
    size = (1.2 + 3.6 * cols + 1.9, 1.1 + 3.0 * nrows)
    banner = doc.label or SIMULATION_BANNER
    with stable_figure(size, (0.9, 2.1, 0.6, 0.7), title, doc.simulation, path, banner) as fig:
        fig.subplots_adjust(wspace=0.12, hspace=0.45)
        axes = fig.subplots(nrows, cols, squeeze=False, sharey=True)
        for extra in axes.flat[len(runs) :]:
            fig.delaxes(extra)  # no empty panel
        series = list(dict.fromkeys((r.length, r.similarity) for r in rows))
        for i, run in enumerate(runs):
            ax = axes.flat[i]
            for k, (length, sim) in enumerate(series):
                dx = (k - (len(series) - 1) / 2) * 0.06
                cells = {
                    r.position: r
                    for r in rows
                    if (r.run, r.length, r.similarity) == (run, length, sim)
                }
                li = lengths.index(length)
                colour = SIM_COLOURS.get(sim, "black")
                kw = {"color": colour, "marker": markers[li % len(markers)], "ms": 4.5}
                label = f"{length} records, {sim} similarity" if i == 0 else None
                joined = [
                    (j + dx, cells[p])
                    for j, p in enumerate(POSITIONS[:3])
                    if p in cells and cells[p].accuracy is not None
                ]
                ax.plot(
                    [x for x, _ in joined],
                    [c.accuracy for _, c in joined],
                    ls=styles[li % len(styles)],
                    lw=1.4,
                    label=label,
                    **kw,
                )
                absent = cells.get("A")
                if absent is not None and absent.accuracy is not None:
                    ax.plot([3 + dx], [absent.accuracy], ls="none", **kw)
                for j, p in enumerate(POSITIONS):
                    c = cells.get(p)
                    if c is not None and c.ci_low is not None and c.ci_high is not None:
                        ax.vlines(j + dx, c.ci_low, c.ci_high, color=colour, lw=1, alpha=0.55)
            ax.axvline(2.5, color="#bdbdbd", lw=0.8)
            ax.set_xticks(range(len(POSITIONS)), list(POSITIONS))
            ax.set_xlim(-0.5, len(POSITIONS) - 0.5)
            ax.set_ylim(-0.03, 1.03)
            ax.grid(axis="y", color="#e0e0e0", lw=0.6)
            sim_tag = "  (SIMULATION)" if any(r.simulation for r in rows if r.run == run) else ""
            ax.set_title(_short(run) + sim_tag, fontsize=8.5)
            if i % cols == 0:
                ax.set_ylabel("correct / valid")
            if i >= len(runs) - cols:
                ax.set_xlabel("position (A: target absent)", fontsize=8)
        if left_out:
            add_note(fig, f"not drawn (no valid answer): {', '.join(map(_short, left_out))}")
        fig.legend(loc="upper left", bbox_to_anchor=(1 - 2.0 / size[0], 1 - 0.9 / size[1]),
                   fontsize=7.5, frameon=False)  # fmt: skip
    return Path(path)


def drawn_runs(rows: list[GridRow]) -> list[str]:
    """The runs the figure has a panel for: those with at least one valid answer (a panel with
    nothing in it says less than the note naming the run)."""
    return list(dict.fromkeys(r.run for r in rows if r.accuracy is not None))


def _short(name: str) -> str:
    """A panel title that fits its panel (the full name is in grid.md and grid.csv)."""
    return name if len(name) <= 44 else name[:43] + "…"


def write_grid(doc: ComparisonDocument, out: Path, figure: bool = True) -> list[str]:
    """Write grid.csv and grid.md (and the figure) into ``out``; the names written."""
    from needlepoint.jsonio import write_bytes_atomic

    write_bytes_atomic(out / GRID_CSV, grid_csv(doc))
    write_bytes_atomic(out / GRID_MD, grid_markdown(doc).encode("utf-8"))
    if not figure or not drawn_runs(grid_rows(doc)):
        return [GRID_CSV, GRID_MD]
    grid_figure(doc, out / GRID_FIGURE)
    return [GRID_CSV, GRID_MD, GRID_FIGURE]
