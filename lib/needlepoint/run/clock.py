"""Clocks for the runner: the real one, and a simulated one that never sleeps.

The runner only reads time through a clock, so a simulated run exercises and records the
spacing rule exactly as a live run does, in milliseconds of real time, with reproducible
timestamps.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

# Simulated runs start their clock here (2026-01-01T00:00:00Z) unless a resumed journal is later.
SIM_EPOCH = 1767225600.0


def iso_utc(epoch_s: float) -> str:
    """ISO-8601 UTC with microseconds, the journal's time format."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso_utc(text: str) -> float:
    """Inverse of iso_utc."""
    return datetime.fromisoformat(text).timestamp()


def anchor_gap(clock: Any, last_done: float, min_gap_s: float) -> tuple[float, float, str]:
    """The gap since an earlier session's last completion, read once from the wall clock and
    then carried on the monotonic clock: ``(seconds at the anchor, monotonic then, note)``.

    Only the wall clock spans two processes. A clock stepped back (NTP, a VM restore) would
    make that reading negative and the wait as long as the step (601 s for a 1 s gap); it
    counts as 0 instead, so a resume waits at most the whole gap, and ``note`` says so (empty
    otherwise). A clock stepped forward can shorten the wait only to nothing: never by more
    than the gap itself. A step during the session changes nothing: from the anchor on, the
    wait is measured on the monotonic clock.
    """
    wall = clock.now() - last_done
    note = ""
    if wall < 0:
        note = (
            f"clock: the wall clock reads {-wall:.3f} s before the last completion recorded "
            f"({iso_utc(last_done)}): it was stepped back; the gap since then counts as 0 s, "
            f"so this session waits the whole gap of {min_gap_s:g} s and no longer"
        )
    return max(wall, 0.0), clock.monotonic(), note


class RealClock:
    """Wall time for records, a monotonic clock for gaps and latencies."""

    simulated = False

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class SimClock:
    """A clock that advances only when told: by sleeps and by simulated latencies.

    It counts whole microseconds, so simulated gaps and timestamps are exact and reproducible.
    """

    simulated = True

    def __init__(self, start: float = SIM_EPOCH) -> None:
        self._us = round(start * 1_000_000)

    def now(self) -> float:
        return self._us / 1_000_000

    def monotonic(self) -> float:
        return self._us / 1_000_000

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._us += max(1, round(seconds * 1_000_000))

    def advance(self, seconds: float) -> None:
        """Let simulated time pass, as a server taking ``seconds`` to answer would."""
        self.sleep(seconds)
