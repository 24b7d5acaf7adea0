"""The figures of a depth design, drawn as the field draws them, as stable PNGs.

- ``depth_lines``: accuracy against depth as Lost-in-the-Middle plots it: one panel per
  background length, depth on the x-axis, one line per similarity, each point with its Wilson
  interval (scipy's binomtest) and its count.
- ``depth_heatmap``: the depth × length grid that needle-in-a-haystack users expect, one panel
  per similarity, each cell coloured by accuracy and labelled with its count.
"""

from __future__ import annotations

from pathlib import Path

from needlepoint.analysis.depth import SIMILARITIES, DepthAnalysis
from needlepoint.analysis.figures import add_note, stable_figure

COLOURS = {"low": "#4575b4", "high": "#d73027"}
NOTE = (
    "accuracy = exact-correct answers / valid answers (failed requests are missing, never wrong); "
    "bars: 95% Wilson intervals"
)


def _wilson(correct: int, valid: int) -> tuple[float, float]:
    from scipy import stats

    ci = stats.binomtest(correct, valid).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def depth_lines(d: DepthAnalysis, path: str | Path) -> Path:
    """Accuracy against depth, one panel per length, a line per similarity."""
    present = [c for c in d.conditions if c != "A"]
    panels = len(d.lengths)
    with stable_figure(
        # one panel is widened so the note under it fits on one line
        (max(3.6 * panels + 0.8, 6.6), 3.9),
        (0.7, 0.2, 0.55, 0.95),
        "Accuracy against the target's depth",
        d.simulation,
        path,
    ) as fig:
        axes = fig.subplots(1, panels, sharey=True, squeeze=False)[0]
        for ax, n in zip(axes, d.lengths, strict=True):
            for offset, sim in ((-0.006, "low"), (0.006, "high")):
                xs, ys, lo, hi = [], [], [], []
                for depth, cond in zip(d.depths, present, strict=True):
                    correct, valid, _ = d.accuracy[(sim, n, cond)]
                    if valid == 0:
                        continue
                    a, b = _wilson(correct, valid)
                    xs.append(depth + offset)
                    ys.append(correct / valid)
                    lo.append(correct / valid - a)
                    hi.append(b - correct / valid)
                ax.errorbar(
                    xs,
                    ys,
                    yerr=[lo, hi],
                    marker="o",
                    color=COLOURS[sim],
                    capsize=3,
                    label=f"{sim} similarity",
                )
            ax.set_title(f"{n} records", fontsize=10)
            ax.set_xlabel("depth of the target (0 = first record, 1 = last)")
            ax.set_xticks(list(d.depths))
            ax.set_xticklabels([f"{x:g}" for x in d.depths])
            ax.set_ylim(-0.05, 1.05)
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("accuracy")
        axes[-1].legend(loc="lower left", fontsize=8)
        add_note(fig, NOTE)
    return Path(path)


def depth_heatmap(d: DepthAnalysis, path: str | Path) -> Path:
    """Accuracy per depth × length, one panel per similarity."""
    import numpy as np

    present = [c for c in d.conditions if c != "A"]
    with stable_figure(
        (0.8 * len(present) * 2 + 2.8, 0.7 * len(d.lengths) + 1.9),
        (0.9, 1.1, 0.55, 0.85),
        "Accuracy by depth and length",
        d.simulation,
        path,
    ) as fig:
        axes = fig.subplots(1, 2, sharey=True)
        image = None
        for ax, sim in zip(axes, SIMILARITIES, strict=True):
            grid = np.full((len(d.lengths), len(present)), np.nan)
            for i, n in enumerate(d.lengths):
                for j, cond in enumerate(present):
                    correct, valid, _ = d.accuracy[(sim, n, cond)]
                    if valid:
                        grid[i, j] = correct / valid
                    ax.text(
                        j,
                        i,
                        f"{correct}/{valid}",
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="black",
                    )
            image = ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
            ax.set_title(f"{sim} similarity", fontsize=10)
            ax.set_xticks(range(len(present)))
            ax.set_xticklabels([f"{x:g}" for x in d.depths])
            ax.set_xlabel("depth")
            ax.set_yticks(range(len(d.lengths)))
            ax.set_yticklabels([str(n) for n in d.lengths])
        axes[0].set_ylabel("records")
        if image is not None:
            fig.colorbar(image, ax=list(axes), fraction=0.04, pad=0.02, label="accuracy")
        add_note(fig, "cells: exact-correct / valid answers")
    return Path(path)
