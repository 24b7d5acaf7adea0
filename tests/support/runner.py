"""Helpers for the runner tests: a live run against the loopback server, journal readers."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from needlepoint.design.prepared import load_prepared
from needlepoint.run import clock as clock_module
from needlepoint.run.options import RunOptions
from needlepoint.run.runner import RunSummary, run_protocol
from support.loopback import LoopbackServer, answers_from

SENTINEL = "sk-SENTINEL-7d1f0c9e5b2a4c68"
KEY_ENV = "NEEDLEPOINT_TEST_KEY"
MODEL = "agnes-3.0-flash"
# Small enough to keep the suite fast, large enough for a loaded 2-core CI machine.
TIMEOUT_S = 0.5


def server_for(prepared_dir: Path) -> LoopbackServer:
    """A loopback server that answers every frozen request correctly unless scripted."""
    p = load_prepared(prepared_dir)
    return LoopbackServer(answers_from(p.answer_key, p.bodies))


def live(
    prepared_dir: Path, run_dir: Path, server: LoopbackServer, *, allow: int, **kw: Any
) -> RunSummary:
    """A live run with no gap (recorded as an override), the sentinel key, no progress bar;
    ``notify`` (among ``kw``) receives what the run tells the user."""
    notify = kw.pop("notify", None)
    options: dict[str, Any] = {
        "base_url": server.base_url,
        "model": MODEL,
        "api_key_env": KEY_ENV,
        "min_gap_s": 0,
        "override_reason": "loopback test server",
        "timeout_s": TIMEOUT_S,
        "progress": "off",
    }
    options.update(kw)
    return run_protocol(prepared_dir, run_dir, RunOptions(allow=allow, **options), notify)


def records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]


def of_type(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    return [r for r in records(run_dir) if r["type"] == kind]


def kinds(run_dir: Path) -> list[tuple[int, str, str]]:
    """(seq, status, kind) for each outcome, in journal order."""
    return [
        (r["seq"], r["classification"]["status"], r["classification"]["kind"])
        for r in of_type(run_dir, "outcome")
    ]


class SteppedClock:
    """The real clock with the wall clock stepped by ``step`` seconds and virtual sleeps (they
    advance both clocks at once and are recorded, so a test never waits)."""

    def __init__(self, step: float) -> None:
        self.step, self.slept, self.sleeps = step, 0.0, []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        me = self
        monkeypatch.setattr(
            clock_module.RealClock, "now", lambda _: time.time() + me.step + me.slept
        )
        monkeypatch.setattr(
            clock_module.RealClock, "monotonic", lambda _: time.monotonic() + me.slept
        )
        monkeypatch.setattr(clock_module.RealClock, "sleep", lambda _, s: me.sleep(s))

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.sleeps.append(seconds)
            self.slept += seconds
