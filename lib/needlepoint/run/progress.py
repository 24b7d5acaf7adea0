"""The run's progress bar: seq, last outcome and the wait before the next request.

``auto`` is a live tqdm bar on stderr with a countdown during waits. ``deterministic`` prints
exactly one refresh per request and no elapsed times or rates, so a notebook's saved output is
a pure function of the run (nbval compares it). ``off`` prints nothing.
"""

from __future__ import annotations

import sys
from typing import Any

PROGRESS_MODES = ("auto", "deterministic", "off")


class Progress:
    def __init__(self, mode: str, total: int, initial: int, label: str) -> None:
        if mode not in PROGRESS_MODES:
            raise ValueError(f"progress must be one of {PROGRESS_MODES}")
        self.mode = mode
        self.bar: Any = None
        if mode == "off":
            return
        from tqdm import tqdm

        options: dict[str, Any] = {"file": sys.stderr, "unit": "req", "leave": True}
        if mode == "deterministic":
            options.update(
                bar_format="{desc} {n_fmt}/{total_fmt} |{bar:24}|{postfix}",
                mininterval=0,
                miniters=1,
                ncols=100,
                dynamic_ncols=False,
            )
        self.bar = tqdm(total=total, initial=initial, desc=label, **options)

    def waiting(self, seq: int, last: str, wait_s: float) -> None:
        """Shown while waiting out the gap (live only: a countdown is not deterministic)."""
        if self.bar is not None and self.mode == "auto":
            self.bar.set_postfix_str(f"seq={seq} last={last} wait={wait_s:.0f}s")

    def sending(self, seq: int, last: str) -> None:
        if self.bar is not None and self.mode == "auto":
            self.bar.set_postfix_str(f"seq={seq} last={last} sending")

    def done(self, seq: int, outcome: str, next_wait_s: float) -> None:
        if self.bar is None:
            return
        self.bar.set_postfix_str(f"seq={seq} last={outcome} wait={next_wait_s:g}s", refresh=False)
        self.bar.update(1)

    def close(self, message: str) -> None:
        if self.bar is None:
            return
        self.bar.set_postfix_str(message, refresh=False)
        self.bar.close()
