"""The comparison figures: every run's difference and interval, its accuracy, its failures.

Each figure shows the runs in the order given, one row (or one row of panels) per run, and is
drawn inside ``stable_figure``, so its PNG bytes depend only on the comparison.
"""

from __future__ import annotations

from pathlib import Path

from needlepoint.analysis.figure import (
    MIDDLE_LOSS_NOTE,
    add_note,
    difference_limits,
    stable_figure,
)
from needlepoint.analysis.primary import SIMULATION_BANNER
from needlepoint.compare.record import ComparedRun, ComparisonDocument

_CONDITIONS = {"B": "B (beginning)", "M": "M (middle)", "E": "E (end)", "A": "A (absent)"}


def _label(run: ComparedRun) -> str:
    """A run's tick label: its name (label or model), SIMULATION, and the model if named else."""
    tag = "  SIMULATION" if run.simulation else ""
    model = "" if run.shown.startswith(run.model) else f"\n{run.model}"
    return f"{run.shown}{tag}{model}"


def _banner(doc: ComparisonDocument) -> str:
    """The figure's red first line: the simulation label, or the mixed one."""
    return doc.label or SIMULATION_BANNER


def forest(doc: ComparisonDocument, path: str | Path) -> Path:
    """Each run's difference with its interval, zero and the threshold; no combined estimate."""
    runs = doc.runs
    title = "Similarity difference in middle loss (high − low), each run analysed alone"
    size = (9.5, 1.85 + 0.55 * len(runs))
    with stable_figure(
        size, (2.8, 2.6, 0.55, 0.95), title, doc.simulation, path, _banner(doc)
    ) as fig:
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
        ax.axvline(
            doc.threshold, color="#b2182b", ls="--", lw=1.2, label=f"threshold {doc.threshold:g}"
        )
        ax.set_yticks(range(len(runs)), [_label(r) for r in runs], fontsize=8)
        ax.set_ylim(len(runs) - 0.5, -0.5)
        values = [v for _, iv, d in shown for v in (*iv, d) if v is not None]
        ax.set_xlim(*difference_limits(values))
        ax.set_xlabel("difference in middle loss, high − low similarity (runs in the order given)")
        ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncols=3, fontsize=8, frameon=False)
        add_note(fig, MIDDLE_LOSS_NOTE)
    return Path(path)


def accuracy_panels(doc: ComparisonDocument, path: str | Path) -> Path:
    """Small multiples: strict accuracy by position × length, one row per run, one column per
    similarity, with correct/valid (and the lenient count, exploratory) on every cell."""
    import numpy as np

    runs = doc.runs
    first = runs[0].accuracy
    sims = list(dict.fromkeys(c.similarity for c in first))
    lengths = sorted({c.length for c in first})
    conds = list(dict.fromkeys(c.condition for c in first))
    title = "Exact-correct rate by position and length, per run [lenient, where it differs]"
    panel_h = 0.5 + 0.62 * len(conds)
    size = (2.0 + 3.3 * len(sims) + 1.1, 0.9 + panel_h * len(runs))
    with stable_figure(
        size, (1.6, 1.3, 0.55, 0.55), title, doc.simulation, path, _banner(doc)
    ) as fig:
        fig.subplots_adjust(wspace=0.08, hspace=0.4)
        axes = fig.subplots(len(runs), len(sims), squeeze=False, sharey=True)
        image = None
        for row, run in enumerate(runs):
            for col, sim in enumerate(sims):
                ax = axes[row][col]
                grid = np.full((len(conds), len(lengths)), np.nan)
                cells = [c for c in run.accuracy if c.similarity == sim]
                for c in cells:
                    if c.accuracy is not None:
                        grid[conds.index(c.condition), lengths.index(c.length)] = c.accuracy
                image = ax.imshow(
                    np.ma.masked_invalid(grid), vmin=0, vmax=1, cmap="viridis", aspect="auto"
                )
                for c in cells:
                    # the exploratory lenient count only where it says something new
                    lenient = f" [{c.lenient_correct}]" if c.lenient_correct != c.correct else ""
                    text = f"{c.correct}/{c.valid}{lenient}" if c.valid else "none valid"
                    if c.not_valid:
                        text += f" +{c.not_valid}"
                    dark = c.accuracy is not None and c.accuracy > 0.55
                    ax.text(
                        lengths.index(c.length),
                        conds.index(c.condition),
                        text,
                        ha="center",
                        va="center",
                        fontsize=7.5,
                        color="black" if dark or not c.valid else "white",
                    )
                last = row == len(runs) - 1
                ax.set_xticks(
                    range(len(lengths)), [f"{n} records" if last else "" for n in lengths]
                )
                ax.set_yticks(range(len(conds)), [_CONDITIONS.get(c, c) for c in conds], fontsize=8)
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
    with stable_figure(
        size, (2.8, 2.6, 0.55, 0.6), title, doc.simulation, path, _banner(doc)
    ) as fig:
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
