"""`needlepoint sweep`: each run exactly as `run` makes it, all at once, stopped and resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.loopback import LoopbackServer, answers_from
from support.runner import KEY_ENV, MODEL, SENTINEL, of_type

from needlepoint.cli.app import main
from needlepoint.design.prepared import load_prepared
from needlepoint.run.audit import audit_run
from needlepoint.run.runner import run_protocol
from needlepoint.run.sweep import read_sweep, run_sweep


def write_sweep(folder: Path, runs: list[dict[str, Any]], **top: Any) -> Path:
    path = folder / "SWEEP.json"
    doc = {"format": "needlepoint-sweep", "version": 1, "runs": runs} | top
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def sim(name: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "prepared": "prepared", "run_dir": f"runs/{name}", "allow": 128} | kw


def live(name: str, url: str, **kw: Any) -> dict[str, Any]:
    entry = {
        "base_url": url,
        "model": MODEL,
        "api_key_env": KEY_ENV,
        "min_gap_s": 0.01,
        "override_reason": "loopback test server",
        "timeout_s": 30,
    }
    return sim(name, **entry) | kw


@pytest.fixture
def folder(reference_dir: Path, tmp_path: Path) -> Path:
    """A sweep folder whose ``prepared`` is a link to the reference folder."""
    (tmp_path / "prepared").symlink_to(reference_dir)
    return tmp_path


def servers(reference_dir: Path, n: int, delay_s: float) -> list[LoopbackServer]:
    p = load_prepared(reference_dir)
    return [LoopbackServer(answers_from(p.answer_key, p.bodies), delay_s) for _ in range(n)]


# A test session started in the background (`make test &`, a CI step) ignores SIGINT, and every
# child inherits that; the sweep under test must hear the Ctrl-C the tests send it.
_HEARS_SIGINT = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv = ['needlepoint', *sys.argv[1:]]; "
    "runpy.run_module('needlepoint', run_name='__main__')"
)


def cli(path: Path) -> subprocess.Popen[str]:
    args = [sys.executable, "-c", _HEARS_SIGINT, "sweep", str(path), "--no-progress"]
    env = {**os.environ, KEY_ENV: SENTINEL}
    pipe = subprocess.PIPE
    return subprocess.Popen(args, env=env, stdout=pipe, stderr=pipe, text=True)


def test_each_run_is_byte_for_byte_the_single_run(folder: Path) -> None:
    params = {"p_middle": 0.4, "seed": 7}
    runs = [sim("a", simulate="perfect"), sim("b", simulate="position", sim_params=params)]
    path = write_sweep(folder, runs)
    summary = run_sweep(read_sweep(path), progress="auto")
    assert summary.exit_status == 0 and not summary.interrupted
    assert [r.stop_reason for r in summary.runs] == ["complete", "complete"]
    # The same options through `run_protocol` alone give the same journal, byte for byte.
    for name, entry in zip("ab", read_sweep(path), strict=True):
        single = folder / "single" / name
        run_protocol(folder / "prepared", single, entry.entry.options)
        mine = folder / "runs" / name
        assert (mine / "journal.jsonl").read_bytes() == (single / "journal.jsonl").read_bytes()
        assert (mine / "run.json").read_bytes() == (single / "run.json").read_bytes()
        assert audit_run(mine).ok


def test_a_refused_run_keeps_every_run_from_starting(folder: Path, capsys) -> None:
    bad = sim("b", simulate="position", sim_params={"p_nowhere": 1})
    path = write_sweep(folder, [sim("a", simulate="perfect"), bad, sim("c", model="x")])
    assert main(["sweep", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "run 'b'" in err and "p_nowhere" in err and "1 more refused" in err
    assert not (folder / "runs").exists()  # nothing was written for a, nor for c


def test_runs_go_side_by_side_and_resume_after_ctrl_c(reference_dir: Path, folder: Path) -> None:
    started = servers(reference_dir, 2, delay_s=0.05)
    with started[0] as one, started[1] as two:
        path = write_sweep(folder, [live("one", one.base_url), live("two", two.base_url)])
        # The fifth request of each run hangs until Ctrl-C: on a loaded machine a run can no
        # longer finish all 128 before the signal is sent (which then found no sweep to stop).
        for server in (one, two):
            server.script(["normal"] * 4 + ["hang:60"])
        proc = cli(path)
        assert one.wait_for(5, timeout=60) and two.wait_for(5, timeout=60), proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "[one] interrupted" in err and "[two] interrupted" in err
        assert "Traceback" not in err
        for name in ("one", "two"):
            run = folder / "runs" / name
            assert audit_run(run).ok
            assert of_type(run, "stop")[-1]["reason"] == "interrupted"
        # Both were under way at once: each server heard from its run before the other ended.
        assert one.requests[0].received < two.requests[-1].received
        assert two.requests[0].received < one.requests[-1].received

        proc = cli(path)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        for name, server in (("one", one), ("two", two)):
            run = folder / "runs" / name
            assert audit_run(run).ok
            attempts = [a["seq"] for a in of_type(run, "attempt")]
            assert sorted(attempts) == list(range(1, 129))  # every seq once, none sent twice
            assert len({r.sha256 for r in server.requests}) == server.count <= 128
            assert f"[{name}] stopped: complete" in out


def test_a_killed_sweep_does_not_leave_runs_spending(reference_dir: Path, folder: Path) -> None:
    (server,) = servers(reference_dir, 1, delay_s=0.05)
    with server:
        path = write_sweep(folder, [live("one", server.base_url)])
        proc = cli(path)
        assert server.wait_for(3, timeout=60), proc.communicate()
        proc.kill()  # SIGKILL: the sweep cannot forward anything
        proc.communicate()
        run = folder / "runs" / "one"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not of_type(run, "stop"):
            time.sleep(0.1)
        assert of_type(run, "stop")[-1]["reason"] == "interrupted"
        attempts = len(of_type(run, "attempt"))
        assert attempts < 128
        # The interrupted attempt was journalled first; it may not have reached the server.
        assert attempts - 1 <= server.count <= attempts
        assert audit_run(run).ok


def test_a_run_refused_after_the_start_is_reported_and_the_others_run(folder: Path) -> None:
    path = write_sweep(folder, [sim("a", simulate="perfect"), sim("b", simulate="perfect")])
    (folder / "runs" / "b").mkdir(parents=True)
    (folder / "runs" / "b" / "stray.txt").write_text("not a run")
    summary = run_sweep(read_sweep(path), progress="off")
    assert [r.state for r in summary.runs] == ["done", "refused"]
    assert "not empty and has no run.json" in summary.runs[1].lines[0]
    assert summary.exit_status == 2
    assert audit_run(folder / "runs" / "a").ok


BAD_FILES = {
    "not JSON": ("{", "broken JSON"),
    "a list": ("[]", "expected a JSON object"),
    "another format": ('{"format": "x", "version": 1, "runs": []}', "field format"),
    "another version": (
        '{"format": "needlepoint-sweep", "version": 2, "runs": []}',
        "version 2 is not supported",
    ),
    "no run": ('{"format": "needlepoint-sweep", "version": 1, "runs": []}', "lists no run"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_a_broken_sweep_file_is_one_line(tmp_path: Path, capsys, name: str) -> None:
    text, expected = BAD_FILES[name]
    path = tmp_path / "SWEEP.json"
    path.write_text(text)
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err and "Traceback" not in err


BAD_ENTRIES = {
    "unknown key": ({"colour": "red"}, "runs[0].colour: unknown field"),
    "allow as text": ({"allow": "10"}, "runs[0].allow: expected int"),
    "allow as bool": ({"allow": True}, "runs[0].allow: expected int"),
    "bad name": ({"name": "a b"}, "runs[0].name"),
    "empty folder": ({"run_dir": " "}, "runs[0].run_dir: must name a folder"),
    "params as list": ({"sim_params": [1]}, "runs[0].sim_params: expected an object"),
}


@pytest.mark.parametrize("name", sorted(BAD_ENTRIES))
def test_a_broken_entry_names_its_field(folder: Path, capsys, name: str) -> None:
    change, expected = BAD_ENTRIES[name]
    path = write_sweep(folder, [sim("a", simulate="perfect") | change])
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err


def test_two_runs_may_not_share_a_name_or_a_folder(folder: Path, capsys) -> None:
    path = write_sweep(folder, [sim("a"), sim("a")])
    assert main(["sweep", str(path)]) == 2
    assert "'a' names two runs" in capsys.readouterr().err
    path = write_sweep(folder, [sim("a"), sim("b", run_dir="runs/./a")])
    assert main(["sweep", str(path)]) == 2
    assert "every run needs its own journal" in capsys.readouterr().err
    assert main(["sweep", str(folder / "missing.json")]) == 2
    assert "file not found" in capsys.readouterr().err
    assert main(["sweep", str(folder)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_progress_reads_only_complete_journal_lines(tmp_path: Path) -> None:
    from needlepoint.run.sweep import JournalTail

    path = tmp_path / "journal.jsonl"
    tail = JournalTail(path)
    tail.poll()  # no journal yet: nothing to show, nothing raised
    outcome = {"type": "outcome", "classification": {"status": "correct", "kind": ""}}
    path.write_text(json.dumps(outcome) + "\n" + '{"type": "outc')
    tail.poll()
    assert (tail.outcomes, tail.last) == (1, "correct")
    with path.open("a") as fh:
        fh.write('ome", "classification": {"status": "error", "kind": "absent_code"}}\n')
    tail.poll()
    assert (tail.outcomes, tail.last) == (2, "absent_code")


def test_redirected_sweep_progress_is_plain_lines(folder: Path, capsys) -> None:
    """Not on a terminal (pytest captures stderr), each run says where it is in plain lines,
    at every tenth of its plan and when it ends: no bar redrawn with \\r."""
    runs = [sim("a", simulate="perfect"), sim("b", simulate="perfect")]
    summary = run_sweep(read_sweep(write_sweep(folder, runs)), progress="auto")
    assert summary.exit_status == 0
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    for name in "ab":
        mine = [x for x in lines if x.startswith(f"{name} ")]
        assert 2 <= len(mine) <= 12, mine
        assert mine[-1].startswith(f"{name} 128/128: last=") and mine[-1].endswith("complete")
