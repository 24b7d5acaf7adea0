"""One stable PNG figure: default style, fixed margins, the simulation banner, no version bytes.

Figures are drawn on a bare ``matplotlib.figure.Figure`` (Agg), never through pyplot, so they
touch no global figure registry and need no closing; the default style is applied for each one
so a notebook's rcParams cannot change the bytes, and the PNG metadata carries no version.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from needlepoint.analysis.primary import SIMULATION_BANNER
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


def add_note(fig: Any, text: str) -> None:
    """A small explanatory note along the bottom edge of the figure."""
    fig.text(0.01, 0.06 / fig.get_figheight(), text, fontsize=7.5, color="#444444", va="bottom")
