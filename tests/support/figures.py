"""What a figure shows, read back from the matplotlib objects: titles, axes, lines and legends.

A PNG's bytes say nothing a test can read, so tests record each ``stable_figure`` call of the
module under test and describe the figure it drew, before it is saved and cleared.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import pytest


def describe_axes(ax: Any) -> dict[str, Any]:
    """Labels, limits, every line (data and style) and the legend of one Axes."""
    from matplotlib.colors import to_hex

    legend = ax.get_legend()
    return {
        "xlabel": ax.get_xlabel(),
        "ylabel": ax.get_ylabel(),
        "ylim": tuple(round(v, 6) for v in ax.get_ylim()),
        "lines": [
            {
                "x": [float(v) for v in line.get_xdata()],
                "y": [float(v) for v in line.get_ydata()],
                "label": line.get_label(),
                "marker": line.get_marker(),
                "markersize": line.get_markersize(),
                "color": to_hex(line.get_color()),
                "linestyle": line.get_linestyle(),
                "linewidth": line.get_linewidth(),
            }
            for line in ax.get_lines()
        ],
        "legend": None
        if legend is None
        else [(t.get_text(), t.get_fontsize()) for t in legend.get_texts()],
    }


def record_figures(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> list[dict[str, Any]]:
    """Make ``module.stable_figure`` record its arguments and the axes drawn; return the list."""
    real = module.stable_figure
    seen: list[dict[str, Any]] = []

    @contextmanager
    def recording(*args: Any, **kwargs: Any) -> Iterator[Any]:
        with real(*args, **kwargs) as fig:
            yield fig
            seen.append(
                {"args": args, "kwargs": kwargs, "axes": [describe_axes(a) for a in fig.axes]}
            )

    monkeypatch.setattr(module, "stable_figure", recording)
    return seen
