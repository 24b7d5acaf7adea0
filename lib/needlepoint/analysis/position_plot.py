"""The plot the field publishes: accuracy against the target's position (B, M, E).

One line per background length × similarity, each point with its case-cluster interval. In a
comparison every model has its own colour (similarity by line style, length by marker); in one
run's analysis the colour is the similarity. Drawn inside ``stable_figure``, so the PNG bytes
depend only on the numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from needlepoint.analysis.decision import SIMULATION_BANNER
from needlepoint.analysis.figure import stable_figure
from needlepoint.analysis.inference import Effect

POSITIONS = ("B", "M", "E")
LABELS = ("B (beginning)", "M (middle)", "E (end)")
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
    ax.set_xticks(range(len(POSITIONS)), LABELS)
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


def compare_position_lines(
    runs: Sequence[tuple[str, Sequence[Effect]]],
    path: str | Path,
    simulation: bool = False,
    banner: str = SIMULATION_BANNER,
) -> Path:
    """Several runs: one colour per run (model), line style per similarity, marker per length."""
    from matplotlib import colormaps

    palette = colormaps["tab10"]
    series = []
    for i, (name, rows) in enumerate(runs):
        lines = _lines(rows)
        lengths = sorted({n for n, _, _ in lines})
        for n, sim, points in lines:
            marker = MARKERS[lengths.index(n) % len(MARKERS)]
            label = f"{name}: {n} records, {sim}"
            series.append((label, palette(i % 10), SIM_STYLES.get(sim, "-"), marker, points))
    height = 4.4 + 0.12 * max(len(series) - 8, 0)
    title = f"{TITLE}, each run alone"
    with stable_figure((9.5, height), (0.9, 3.6, 0.5, 0.6), title, simulation, path, banner) as f:
        _draw(f.subplots(), series)
    return Path(path)
