"""The results grid: every run's accuracy by length × similarity × position, in one table.

comparison.md sets out each run alone, one table per run; a reader comparing models wants one
table, one CSV and one figure: model × length × similarity × position, each cell with its
correct / valid, the accuracy and an exact 95% (Clopper–Pearson) interval, and each run's
answers to the two questions beside it (Q1: is there a middle loss; Q2: the preregistered
decision). Every count is copied from the run's own analysis (the comparison document's
accuracy cells, which count protocol-valid answers only: a failure is never a wrong answer);
nothing is pooled across runs, and the runs keep the order they were given.

``grid.csv`` has one row per run × length × similarity × position, the run's Q1 and Q2 repeated
on each of its rows so that any filter keeps them; ``grid.md`` has one row per run × length ×
similarity with the four positions as columns, after a table of each run's Q1 and Q2. The
figure draws the same cells as small multiples, one panel per run.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, fields
from pathlib import Path

from needlepoint.analysis.figures import CONDITION_LABELS, SIM_COLOURS, add_note, stable_figure
from needlepoint.analysis.primary import SIMULATION_BANNER
from needlepoint.analysis.report import markdown_table
from needlepoint.analysis.secondary import CONFIDENCE, clopper_pearson
from needlepoint.compare.record import ComparedRun, ComparisonDocument

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
