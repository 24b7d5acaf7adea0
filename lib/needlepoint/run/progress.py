"""The run's progress bar: seq, last outcome and the wait before the next request.

``auto`` is a live tqdm bar on stderr with a countdown during waits. ``terminal`` is the same
bar written to the terminal the process was started from, past a notebook kernel's capture of
stderr, and cleared when done (nothing when that is a log, not a terminal): a notebook's run
shows its progress where it runs and never saves it into the executed notebook (the evidence).
``deterministic`` prints exactly one refresh per request and no elapsed times or rates, a pure
function of the run. ``off`` prints nothing.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from typing import IO, Any

from needlepoint.run.options import LIVE_MODES, PROGRESS_MODES


def terminal_stream() -> IO[str]:
    """A text stream on the process's own stderr, even where a Jupyter kernel captures it.

    ipykernel replaces ``sys.stderr`` with a stream that goes into the notebook, and its
    ``fileno()`` answers with a copy of the original descriptor: the terminal (or log) that
    started the kernel. Elsewhere ``sys.stderr.fileno()`` is simply 2.
    """
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return sys.__stderr__ or sys.stderr
    return open(os.dup(fd), "w", encoding="utf-8", errors="replace", buffering=1)


class Progress:
    def __init__(self, mode: str, total: int, initial: int, label: str) -> None:
        if mode not in PROGRESS_MODES:
            raise ValueError(f"progress must be one of {PROGRESS_MODES}")
        self.mode = mode
        self.bar: Any = None
        self.stream: IO[str] | None = None
        if mode == "off":
            return
        from tqdm import tqdm

        options: dict[str, Any] = {"file": sys.stderr, "unit": "req", "leave": True}
        if mode == "terminal":
            self.stream = terminal_stream()
            # A bar redrawn in place reads well on a terminal; in a log it is one endless line.
            if not self.stream.isatty():
                self.mode = "off"
                self.close("")
                return
            options.update(file=self.stream, leave=False)
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
        if self.bar is not None and self.mode in LIVE_MODES:
            self.bar.set_postfix_str(f"seq={seq} last={last} wait={wait_s:.0f}s")

    def sending(self, seq: int, last: str) -> None:
        if self.bar is not None and self.mode in LIVE_MODES:
            self.bar.set_postfix_str(f"seq={seq} last={last} sending")

    def done(self, seq: int, outcome: str, next_wait_s: float) -> None:
        if self.bar is None:
            return
        self.bar.set_postfix_str(f"seq={seq} last={outcome} wait={next_wait_s:g}s", refresh=False)
        self.bar.update(1)

    def close(self, message: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(message, refresh=False)
            self.bar.close()
            self.bar = None
        if self.stream is not None and self.stream is not sys.__stderr__:
            with contextlib.suppress(OSError):
                self.stream.close()
            self.stream = None
