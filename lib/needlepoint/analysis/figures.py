"""The analysis figures as PNG files: readable labels, counts on the cells, byte-for-byte stable.

Every figure is drawn inside ``stable_figure``: on a bare ``matplotlib.figure.Figure`` (Agg),
never through pyplot, so it touches no global figure registry and needs no closing; the default
style is applied for each one so a notebook's rcParams cannot change the bytes, and the PNG
metadata carries no version. So the PNG bytes depend only on the numbers.

``position_lines`` is the plot the field publishes: accuracy against the target's position (B,
M, E), one line per background length × similarity, each point with its case-cluster interval.
In a comparison every model has its own colour (similarity by line style, length by marker); in
one run's analysis the colour is the similarity.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from needlepoint.analysis.primary import POSITIONS, SIMULATION_BANNER
from needlepoint.analysis.record import AccuracyCell, Effect, Primary
from needlepoint.safeio import write_bytes_atomic


@contextmanager
def stable_figure(
    size: tuple[float, float],
    margins: tuple[float, float, float, float],
    title: str,
    simulation: bool,
    path: str | Path,
    banner: str = SIMULATION_BANNER,
) -> Iterator[Any]:
    """Yield a fresh Figure in the default style, title it, then save it as a stable PNG.

    With ``simulation`` the title is preceded by ``banner`` in red (the simulation label unless
    another is given, e.g. a comparison of simulated and live runs).

    ``margins`` are (left, right, top, bottom) in inches around the axes area. Fixed margins
    instead of a layout engine: the figures look the same for every run, and drawing them does
    not need a second measuring pass over every label.
    """
    import matplotlib.style
    from matplotlib.figure import Figure

    width, height = size
    left, right, top, bottom = margins
    top += 0.3 if simulation else 0.0  # room for the banner line
    with matplotlib.style.context("default"):
        fig = Figure(figsize=(width, height + (0.3 if simulation else 0.0)), dpi=100)
        h = fig.get_figheight()
        fig.subplots_adjust(
            left=left / width, right=1 - right / width, top=1 - top / h, bottom=bottom / h
        )
        yield fig
        text = f"{banner}\n{title}" if simulation else title
        fig.suptitle(
            text,
            y=1 - 0.08 / h,
            va="top",
            fontweight="bold",
            color="#b2182b" if simulation else "black",
        )
        # No "Software" entry: the bytes must not change with the matplotlib version string.
        # Drawn into memory, then written through the one safe-write helper (never a link).
        buffer = io.BytesIO()
        fig.savefig(
            buffer, format="png", metadata={"Software": None}, pil_kwargs={"compress_level": 1}
        )
        write_bytes_atomic(path, buffer.getvalue())
    fig.clear()


# Printed under every figure of the difference in middle loss, so it can be read on its own.
MIDDLE_LOSS_NOTE = (
    "middle loss = (B + E)/2 − M, from exact-correct answers (0 or 1) of one case, length and "
    "similarity;\ndifference = middle loss at high similarity − middle loss at low similarity "
    "(each lies between −2 and 2)"
)


def difference_limits(values: Sequence[float]) -> tuple[float, float]:
    """Symmetric x limits that show every value: ±1.1 at least, never cutting a marker."""
    reach = max([1.0, *(abs(v) for v in values)])
    return -reach - 0.1, reach + 0.1


def threshold_line(ax: Any, threshold: float) -> None:
    """The preregistered threshold as a dashed red line, labelled with its value."""
    ax.axvline(threshold, color="#b2182b", ls="--", lw=1.2, label=f"threshold {threshold:g}")


def add_note(fig: Any, text: str) -> None:
    """A small explanatory note along the bottom edge of the figure."""
    fig.text(0.01, 0.06 / fig.get_figheight(), text, fontsize=7.5, color="#444444", va="bottom")


# --- one run's figures ---------------------------------------------------------------------------


CONDITION_LABELS = {"B": "B (beginning)", "M": "M (middle)", "E": "E (end)", "A": "A (absent)"}
# Green for a right answer only: a wrong answer is red (it was drawn light green, a "good"
# colour); failures and indeterminate outcomes, which are not answers at all, are purple.
STATUS_COLOURS = {
    "correct": "#1a9850",
    "error": "#d73027",
    "protocol_failure": "#5e3c99",
    "indeterminate": "#b2abd2",
    "unexecuted": "#bdbdbd",
}
STATUS_LABELS = {
    "correct": "valid: correct",
    "error": "valid: wrong",
    "protocol_failure": "failed",
    "indeterminate": "indeterminate",
    "unexecuted": "unexecuted",
}


def accuracy_panel(
    ax: Any,
    cells: Sequence[Any],
    conds: Sequence[str],
    lengths: Sequence[int],
    label: Callable[[Any], str],
    fontsize: float,
) -> Any:
    """One panel of correct / valid by position × length: each cell's accuracy as its colour
    and ``label(cell)`` on it (dark on light cells and where none is valid). The image, for a
    colour bar."""
    import numpy as np

    grid = np.full((len(conds), len(lengths)), np.nan)
    for c in cells:
        if c.accuracy is not None:
            grid[conds.index(c.condition), lengths.index(c.length)] = c.accuracy
    image = ax.imshow(np.ma.masked_invalid(grid), vmin=0, vmax=1, cmap="viridis", aspect="auto")
    for c in cells:
        dark = c.accuracy is not None and c.accuracy > 0.55
        ax.text(
            lengths.index(c.length),
            conds.index(c.condition),
            label(c),
            ha="center",
            va="center",
            fontsize=fontsize,
            color="black" if dark or not c.valid else "white",
        )
    return image


def _cell_text(c: AccuracyCell) -> str:
    text = (
        f"{c.correct}/{c.valid}\n{100 * c.accuracy:.0f}%"
        if c.valid and c.accuracy is not None
        else "no valid\nresponse"
    )
    return text + (f"\n+{c.not_valid} not valid" if c.not_valid else "")


def accuracy_heatmap(
    cells: Sequence[AccuracyCell], path: str | Path, simulation: bool = False
) -> Path:
    """Accuracy by position × length, one panel per similarity, with n on every cell."""
    sims = list(dict.fromkeys(c.similarity for c in cells))
    lengths = sorted({c.length for c in cells})
    conds = list(dict.fromkeys(c.condition for c in cells))
    title = "Exact-correct rate by position and background length"
    size = (1.6 + 3.2 * len(sims) + 1.1, 1.5 + 0.85 * len(conds))
    with stable_figure(size, (1.5, 1.3, 0.75, 0.75), title, simulation, path) as fig:
        fig.subplots_adjust(wspace=0.08)
        axes = fig.subplots(1, len(sims), squeeze=False, sharey=True)[0]
        image = None
        for ax, sim in zip(axes, sims, strict=True):
            mine = [c for c in cells if c.similarity == sim]
            image = accuracy_panel(ax, mine, conds, lengths, _cell_text, 9)
            ax.set_xticks(range(len(lengths)), [f"{n} records" for n in lengths])
            ax.set_yticks(range(len(conds)), [CONDITION_LABELS.get(c, c) for c in conds])
            ax.set_title(f"{sim} similarity")
            ax.set_xlabel("background length")
        if image is not None:
            right = axes[-1].get_position()
            cax = fig.add_axes(
                (right.x1 + 0.25 / fig.get_figwidth(), right.y0, 0.015, right.height)
            )
            fig.colorbar(image, cax=cax, label="correct / valid")
    return Path(path)


def forest_plot(primary: Primary, path: str | Path, simulation: bool = False) -> Path:
    """Per-case similarity difference with the overall estimate, interval and threshold."""
    cases = primary.cases
    title = "Similarity difference in middle loss (high − low), per complete case"
    rows = len(cases) + 1
    with stable_figure(
        (8.5, 1.85 + 0.4 * rows), (1.4, 1.5, 0.55, 0.95), title, simulation, path
    ) as fig:
        ax = fig.subplots()
        markers = ["^", "v", "s", "P"]
        # One scatter per series (not per point): each call builds its own collection.
        if cases:
            ax.scatter(
                [c.difference for c in cases],
                range(len(cases)),
                color="#2166ac",
                zorder=3,
                s=40,
                label="case mean",
            )
            n_len = len(cases[0].lengths)
            for k in range(n_len):
                ax.scatter(
                    [c.lengths[k].difference for c in cases],
                    [y + 0.22 * (k - (n_len - 1) / 2) for y in range(len(cases))],
                    marker=markers[k % len(markers)],
                    facecolors="none",
                    edgecolors="#4393c3",
                    s=28,
                    zorder=2,
                    label=f"length {cases[0].lengths[k].length}",
                )
        y_all = len(cases)
        interval = primary.interval
        if primary.estimate is not None and interval:
            ax.hlines(y_all, interval.lower, interval.upper, color="black", lw=2.5)
            ax.scatter(primary.estimate, y_all, marker="D", color="black", s=60, zorder=3)
            label = f"overall {primary.estimate:.3f}\n[{interval.lower:.3f}, "
            label += f"{interval.upper:.3f}]"
        else:
            label = "overall:\nnot evaluable"  # two lines: one was cut at the left edge
        ax.axvline(0, color="grey", lw=1)
        threshold_line(ax, primary.threshold)
        ax.set_yticks(range(rows), [c.case for c in cases] + [label])
        ax.invert_yaxis()
        shown = [c.difference for c in cases]
        shown += [r.difference for c in cases for r in c.lengths if r.difference is not None]
        if primary.estimate is not None and interval:
            shown += [primary.estimate, interval.lower, interval.upper]
        ax.set_xlim(*difference_limits(shown))
        ax.set_xlabel("difference in middle loss, high − low similarity")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
        add_note(fig, MIDDLE_LOSS_NOTE)
    return Path(path)


def bootstrap_plot(primary: Primary, path: str | Path, simulation: bool = False) -> Path:
    """The bootstrap distribution of the mean difference, with threshold, zero and interval."""
    interval = primary.interval
    title = "Case-cluster bootstrap distribution of the difference"
    with stable_figure((8.5, 3.8), (0.9, 1.7, 0.8, 0.6), title, simulation, path) as fig:
        ax = fig.subplots()
        if interval and primary.estimate is not None:
            values = [d.value for d in interval.distribution]
            probs = [d.weight / interval.total_weight for d in interval.distribution]
            width = min((b - a for a, b in itertools.pairwise(values)), default=0.02)
            ax.bar(values, probs, width=width * 0.9, color="#4393c3", zorder=2)
            low = min(values[0], 0.0) - 2 * width
            ax.set_xlim(low, max(values[-1], primary.threshold) + 2 * width)
            ax.axvspan(
                interval.lower,
                interval.upper,
                color="#fddbc7",
                zorder=0,
                label=f"{100 * interval.confidence:g}% interval",
            )
            ax.axvline(
                primary.estimate,
                color="black",
                lw=1.5,
                label=f"estimate {primary.estimate:.3f}",
            )
            how = f"{interval.method}, {interval.resamples:,} "
            how += "multisets" if interval.method == "exact" else f"resamples, seed {interval.seed}"
            if interval.degenerate:
                how += "; zero width: every case has the same difference"
            ax.set_title(how, fontsize=9)
        else:
            ax.text(
                0.5,
                0.5,
                f"not evaluable: {primary.reason}",
                ha="center",
                va="center",
                transform=ax.transAxes,
                wrap=True,
            )
        ax.axvline(0, color="grey", lw=1, label="zero")
        threshold_line(ax, primary.threshold)
        ax.set_xlabel("mean difference over resampled cases")
        ax.set_ylabel("bootstrap probability")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return Path(path)


def completeness_grid(outcomes: Sequence[Any], path: str | Path, simulation: bool = False) -> Path:
    """Every planned request in execution order: one row per block, coloured by outcome."""
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    blocks: dict[int, list[Any]] = {}
    for o in sorted(outcomes, key=lambda o: o.seq):
        blocks.setdefault(o.block, []).append(o)
    rows = [b for _, b in sorted(blocks.items())]
    width = max(len(b) for b in rows)
    keys = list(STATUS_COLOURS)
    grid = np.full((len(rows), width), np.nan)
    for y, block in enumerate(rows):
        for x, o in enumerate(block):
            grid[y, x] = keys.index("indeterminate" if o.category == "indeterminate" else o.status)
    title = "Completeness in execution order (one row per block)"
    size = (8.4, 1.1 + 0.22 * len(rows))
    with stable_figure(size, (2.9, 1.4, 0.45, 0.6), title, simulation, path) as fig:
        ax = fig.subplots()
        # One image instead of a patch per cell: the grid is drawn in a single pass.
        ax.imshow(
            np.ma.masked_invalid(grid),
            cmap=ListedColormap(list(STATUS_COLOURS.values())),
            vmin=-0.5,
            vmax=len(keys) - 0.5,
            aspect="auto",
            interpolation="nearest",
        )
        # Row labels carry the seq range and condition order, so cells need no text of their
        # own (128 cell labels would triple the drawing time).
        labels = [
            f"{b[0].case} {b[0].length} {b[0].similarity}  {b[0].order}  seq {b[0].seq}–{b[-1].seq}"
            for b in rows
        ]
        # Plain texts rather than 32 y ticks: a Tick object costs several artists to build.
        ax.set_yticks([])
        for y, label in enumerate(labels):
            ax.text(-0.6, y, label, ha="right", va="center", fontsize=7, family="monospace")
        for y, block in enumerate(rows):
            for x, o in enumerate(block):
                if o.status in ("error", "protocol_failure"):  # name what went wrong, briefly
                    ax.text(
                        x,
                        y,
                        f"{o.condition}: {_short(o.kind)}",
                        ha="center",
                        va="center",
                        fontsize=6.5,
                    )
        ax.set_xticks(range(width), [f"#{x + 1}" for x in range(width)])
        # Cell borders as two line collections; minor ticks would build a Tick object per line.
        ax.hlines(np.arange(len(rows) + 1) - 0.5, -0.5, width - 0.5, color="white", lw=1.5)
        ax.vlines(np.arange(width + 1) - 0.5, -0.5, len(rows) - 0.5, color="white", lw=1.5)
        ax.set_xlabel("position within block (its condition: the order on the left)")
        present = {keys[int(k)] for k in np.unique(grid[~np.isnan(grid)])}
        ax.legend(
            handles=[
                Patch(color=STATUS_COLOURS[k], label=STATUS_LABELS[k]) for k in keys if k in present
            ],
            loc="upper left",
            bbox_to_anchor=(1.01, 1),
            fontsize=7,
        )
    return Path(path)


def _short(kind: str) -> str:
    """A cell-sized name for an error or failure kind."""
    if kind.startswith("code_when_absent:"):
        return "code on A"
    if kind.startswith("indeterminate"):
        return "indeterminate"
    return {
        "near_distractor_code": "near-name code",
        "other_present_code": "other code",
        "false_unknown": "false UNKNOWN",
        "http_status": "HTTP status",
        "model_mismatch": "wrong model",
    }.get(kind, kind.replace("_", " "))[:18]


# --- accuracy by position ------------------------------------------------------------------------


SIM_COLOURS = {"low": "#2166ac", "high": "#b2182b"}
SIM_STYLES = {"low": "-", "high": "--"}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
TITLE = "Accuracy by target position, with case-cluster intervals"


def _lines(rows: Sequence[Effect]) -> list[tuple[int, str, list[Effect | None]]]:
    """(length, similarity, the B/M/E rows) for every length × similarity present."""
    keys = list(dict.fromkeys((r.length or 0, r.similarity) for r in rows))
    out = []
    for length, sim in keys:
        by = {r.condition: r for r in rows if (r.length or 0, r.similarity) == (length, sim)}
        out.append((length, sim, [by.get(p) for p in POSITIONS]))
    return out


def _draw(ax, series: Sequence[tuple[str, str, str, str, list[Effect | None]]]) -> None:
    """Each series: (label, colour, line style, marker, B/M/E rows), dodged sideways a little."""
    width = 0.05 * max(len(series) - 1, 0)
    for i, (label, colour, style, marker, points) in enumerate(series):
        dx = -width / 2 + (width * i / (len(series) - 1) if len(series) > 1 else 0.0)
        xs = [j + dx for j, p in enumerate(points) if p is not None and p.estimate is not None]
        ys = [p.estimate for p in points if p is not None and p.estimate is not None]
        ax.plot(xs, ys, color=colour, ls=style, marker=marker, ms=5, lw=1.5, label=label)
        for j, p in enumerate(points):
            if p is not None and p.lower is not None and p.upper is not None:
                ax.vlines(j + dx, p.lower, p.upper, color=colour, lw=1, alpha=0.6)
    ax.set_xticks(range(len(POSITIONS)), [CONDITION_LABELS[p] for p in POSITIONS])
    ax.set_xlim(-0.4, len(POSITIONS) - 0.6)
    ax.set_ylim(-0.03, 1.03)
    ax.set_ylabel("exact-correct rate (correct / valid)")
    ax.grid(axis="y", color="#e0e0e0", lw=0.6)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)


def position_lines(rows: Sequence[Effect], path: str | Path, simulation: bool = False) -> Path:
    """One run: a line per length × similarity (colour: similarity; marker: length)."""
    lines = _lines(rows)
    lengths = sorted({n for n, _, _ in lines})
    series = [
        (f"{n} records, {sim} similarity", SIM_COLOURS.get(sim, "black"),
         SIM_STYLES.get(sim, "-"), MARKERS[lengths.index(n) % len(MARKERS)], points)
        for n, sim, points in lines
    ]  # fmt: skip
    with stable_figure((8.0, 4.4), (0.9, 2.4, 0.5, 0.6), TITLE, simulation, path) as fig:
        _draw(fig.subplots(), series)
    return Path(path)
