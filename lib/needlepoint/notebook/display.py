"""Notebook display helpers that keep saved outputs reproducible.

A figure is shown together with one printed line naming it by its relative path and the
SHA-256 of its PNG bytes, so nbval (which compares text, not images) still proves that every
figure re-renders identically.
"""

from __future__ import annotations

from typing import Any

from needlepoint.jsonio import file_sha256
from needlepoint.notebook import paths


def show_figure(rel: str) -> Any:
    """Print the figure's name and fingerprint, and return it for display."""
    from IPython.display import Image

    path = paths.read_path(rel)
    print(f"figure {rel}  sha256 {file_sha256(path)[:16]}")
    return Image(filename=str(path))


def show_lines(lines: list[str]) -> None:
    """Print library report lines as one block."""
    print("\n".join(lines))
