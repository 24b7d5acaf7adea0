"""Notebook display helpers that keep saved outputs reproducible and readable.

A figure is shown together with one printed line naming it by its relative path and the
SHA-256 of its PNG bytes, so nbval (which compares text, not images) still proves that every
figure re-renders identically.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
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


_IMAGE = re.compile(r"(!\[[^\]]*\]\()([^)\s]+)(\))")


def markdown_text(rel: str, drop: tuple[str, ...] = ()) -> str:
    """A Markdown file's text as a notebook shows it (see ``show_markdown``)."""
    path = paths.read_path(rel)
    kept: list[str] = []
    skipping = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            skipping = line[3:].strip() in drop
        if not skipping:
            kept.append(line)
    folder = path.parent
    base = folder if not folder.is_absolute() else Path(os.path.relpath(folder, Path.cwd()))

    def rebase(match: re.Match[str]) -> str:
        target = match.group(2)
        if ":" in target or target.startswith("/"):
            return match.group(0)
        return match.group(1) + (base / target).as_posix() + match.group(3)

    return _IMAGE.sub(rebase, "\n".join(kept).rstrip("\n") + "\n")


def show_markdown(rel: str, drop: tuple[str, ...] = ()) -> Any:
    """A Markdown document written by the library (summary.md, comparison.md), for display.

    Sections whose ``##`` title is in ``drop`` are left out because the notebook shows them
    itself (the figures, each with its fingerprint). Images the document names beside itself
    are pointed at its folder, so they resolve where the notebook (and its HTML) is.
    """
    from IPython.display import Markdown

    return Markdown(markdown_text(rel, drop))


def markdown_lines(lines: list[str]) -> Any:
    """Report lines written as Markdown (a declaration chain, say), rendered rather than
    printed: printed, their ``**`` and backticks would show as literal characters."""
    from IPython.display import Markdown

    return Markdown("\n".join(lines).rstrip("\n") + "\n")


def show_table(frame: Any) -> None:
    """Display a DataFrame whole: no cell cut to pandas' 50 characters (the audit's rules are
    sentences), no column or row left out."""
    import pandas as pd
    from IPython.display import display

    with pd.option_context(
        "display.max_colwidth", None, "display.max_columns", None, "display.width", 250
    ):
        display(frame)
