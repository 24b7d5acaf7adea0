"""The run folder's files: provenance.jsonl (every session says which code ran and how busy the
machine was, when it started and when it ended: a busy machine stretches every request's
latency), and run.json, which only run/folder.py names."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import needlepoint
from needlepoint.design.prepared import prepare
from needlepoint.run import folder as provenance
from needlepoint.run.folder import RUN_NAME
from needlepoint.run.options import RunOptions
from needlepoint.run.runner import run_protocol


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


def _names_run_json(value: object) -> bool:
    """Whether a string constant uses run.json as a path or a file name (prose does not count)."""
    return isinstance(value, str) and RUN_NAME in value.replace("\\", "/").split("/")


def test_only_the_run_folder_module_names_run_json() -> None:
    # run.json has one reader and one writer; every other module goes through them, so that its
    # format is checked wherever it is read (it was once read as a raw dict in seven places).
    lib = Path(needlepoint.__file__).parent
    named = []
    for path in sorted(lib.rglob("*.py")):
        if path == lib / "run" / "folder.py":
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Constant) and _names_run_json(node.value):
                named.append(f"{path.relative_to(lib)}:{node.lineno}")
    assert not named, f"run.json named outside run/folder.py: {named}"
    assert _names_run_json("main/run/run.json") and not _names_run_json("run.json records it")
