"""The sweep's progress: one line per run, read from each run's own journal.

The workers run with their progress bars off; the sweep reads what each journal has durably
recorded (outcomes, the last kind, a stop record) and draws one tqdm line per run, so what is
shown is what a resume would find. Reading never writes and never takes a run's lock.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.run.journal import JOURNAL_NAME


@dataclass
class JournalTail:
    """Follows one journal.jsonl as it grows, reading only complete lines."""

    path: Path
    offset: int = 0
    outcomes: int = 0
    last: str = "-"

    def poll(self) -> None:
        """Read lines appended since the last poll; a torn last line waits for its newline."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return
        end = data.rfind(b"\n")
        if end < 0:
            return
        self.offset += end + 1
        for line in data[: end + 1].splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            if record.get("type") == "outcome":
                self.outcomes += 1
                c = record.get("classification")
                if isinstance(c, dict):
                    self.last = str(c.get("kind") or c.get("status") or "-")


class SweepProgress:
    """One progress line per run (``auto``), or nothing (``off``)."""

    def __init__(self, mode: str, names: list[str], run_dirs: list[Path]) -> None:
        self.mode = mode
        self.names = names
        self.tails = [JournalTail(d / JOURNAL_NAME) for d in run_dirs]
        self.bars: list[Any] = []
        self.shown: list[tuple[int, str]] = []
        self.width = max(len(n) for n in names)

    def start(self, planned: list[int], simulation: list[bool]) -> None:
        """Open one bar per run, starting at what each journal already holds."""
        for tail in self.tails:
            tail.poll()
        if self.mode == "off":
            return
        from tqdm import tqdm

        for i, name in enumerate(self.names):
            label = f"{name:<{self.width}}" + (" SIMULATION" if simulation[i] else "")
            self.bars.append(
                tqdm(
                    total=planned[i],
                    initial=self.tails[i].outcomes,
                    desc=label,
                    position=i,
                    leave=True,
                    file=sys.stderr,
                    unit="req",
                    bar_format="{desc} {n_fmt}/{total_fmt} |{bar:20}|{postfix}",
                )
            )
            self.shown.append((-1, ""))

    def refresh(self, ended: dict[int, str]) -> None:
        """Poll every journal and redraw; ``ended`` maps a run's index to how it ended."""
        for i, tail in enumerate(self.tails):
            tail.poll()
            if not self.bars:
                continue
            bar = self.bars[i]
            now = (min(tail.outcomes, bar.total), f"last={tail.last} {ended.get(i) or 'running'}")
            if now != self.shown[i]:  # redraw only what changed: a log file stays readable
                self.shown[i] = now
                bar.n = now[0]
                bar.set_postfix_str(now[1], refresh=False)
                bar.refresh()

    def close(self, ended: dict[int, str]) -> None:
        """Draw the final state of every line and leave it on screen."""
        if not self.bars:
            return
        self.refresh(ended)
        for bar in self.bars:
            bar.close()
        self.bars = []
