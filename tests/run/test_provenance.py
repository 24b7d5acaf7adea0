"""provenance.jsonl: every session says which code ran and how busy the machine was, when it
started and when it ended (a busy machine stretches every request's latency)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from needlepoint.design.prepared import prepare
from needlepoint.run import provenance
from needlepoint.run.loop import run_protocol
from needlepoint.run.settings import RunOptions


def _lines(run: Path) -> list[dict]:
    text = (run / "provenance.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def test_each_session_records_the_load_when_it_starts_and_ends(tmp_path: Path) -> None:
    prepared = prepare(tmp_path / "prepared")
    run = tmp_path / "run"
    for allow in (4, 8):  # two sessions: a resume appends its own pair
        options = RunOptions(allow=allow, simulate="perfect", progress="off", fsync=False)
        run_protocol(prepared, run, options)
    lines = _lines(run)
    assert [line["event"] for line in lines] == ["session_start", "session_end"] * 2
    for line in lines:
        load = line["load_average"]
        assert len(load) == 3 and all(isinstance(x, float) and x >= 0 for x in load)
        assert line["cpus"] >= 1 and line["time"].endswith("Z")
    assert "git" in lines[0] and "packages" in lines[0] and "git" not in lines[1]


def test_an_unknown_load_is_recorded_as_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(provenance.os, "getloadavg", unavailable)
    assert provenance.machine_load()["load_average"] is None
