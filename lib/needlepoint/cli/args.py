"""Argument types with their ranges: every numeric flag is checked before any work starts.

A value out of range is a usage error (one line naming the flag and the range, exit 2), so
``--timeout-s 1e308`` or ``--max-cases 1000000000`` never reaches a sleep, a clock or a search.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from needlepoint.run import options as limits

# Ranges shared by several commands.
SECONDS = (limits.MIN_TIMEOUT_S, limits.MAX_SECONDS)
MAX_N_CTX = 1 << 20  # tokens of context: far beyond any packaged model's window
MAX_SEED = 2**63 - 1  # numpy's generators take non-negative seeds; a JSON integer stays exact


def whole(low: int, high: int) -> Callable[[str], int]:
    """An integer from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not an integer") from None
        if not low <= value <= high:
            if low == 1 and value < 1:
                raise argparse.ArgumentTypeError("must be a positive integer")
            raise argparse.ArgumentTypeError(f"{value} is outside {low} to {high:,}")
        return value

    return parse


def number(low: float, high: float, *, open_low: bool = False) -> Callable[[str], float]:
    """A finite number from ``low`` to ``high`` (above ``low`` when ``open_low``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a finite number")
        if value < low or value > high or (open_low and value == low):
            side = "(" if open_low else "["
            raise argparse.ArgumentTypeError(f"{value:g} is outside {side}{low:g}, {high:g}]")
        return value

    return parse


positive_int = whole(1, limits.MAX_ALLOW)
seconds = number(*SECONDS)
n_ctx = whole(1, MAX_N_CTX)
seed = whole(0, MAX_SEED)
