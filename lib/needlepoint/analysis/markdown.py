"""Markdown tables for summary.md and comparison.md: None as a dash, floats to four digits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A Markdown table's lines (``(none)`` when empty): None as a dash, floats to 4 digits."""
    if not rows:
        return ["(none)", ""]
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return [*out, ""]


def cell(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v).replace("|", "\\|")
