"""Readers of a run folder while a runner works, and an analysis interrupted half-way.

A reader takes the folder lock shared, or, while a runner holds it, reads a consistent snapshot
(the head first, then the journal up to its last complete line): records appended meanwhile are
never called tampering. An interrupted analysis leaves the earlier one whole.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.fuzz import SMALL, run_cli
from support.runner import KEY_ENV, MODEL, SENTINEL, server_for

from needlepoint.analysis.document import FIGURES
from needlepoint.design.prepared import prepare

FALSE_ALARMS = ("deleted or edited", "chain broken", "changed while", "edited, deleted")


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("readers")
    (root / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    return prepare(root / "prepared", root / "small.json")


def test_polling_a_live_run_never_reports_tampering(small: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    env = {**os.environ, KEY_ENV: SENTINEL}
    with server_for(small) as server:
        # Long answers make each read of the journal take a while: the window in which the
        # runner appends while a reader reads is wide, as it is for a real run's journal.
        server.answer = lambda body, payload: "UNKNOWN " + "x" * 200_000
        server.delay_s = 0.02
        argv = [sys.executable, "-m", "needlepoint", "run", str(small), "--allow", "32"]
        argv += ["--run-dir", str(run), "--base-url", server.base_url, "--model", MODEL]
        argv += ["--api-key-env", KEY_ENV, "--min-gap-s", "0", "--override-reason", "test"]
        runner = subprocess.Popen(
            [*argv, "--no-progress"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        polls, alarms = 0, []
        try:
            while runner.poll() is None:
                if (run / "journal.jsonl").exists():
                    for command in (["results", str(run)], ["audit-run", str(run)]):
                        _, out, err = run_cli(command)
                        polls += 1
                        alarms += [line for line in (out + err).splitlines() if
                                   any(a in line for a in FALSE_ALARMS)]  # fmt: skip
        finally:
            _, runner_err = runner.communicate(timeout=120)
    assert runner.returncode == 0, runner_err
    assert polls >= 4, "the run ended before the readers could poll it"
    assert not alarms, alarms[:3]
    assert run_cli(["audit-run", str(run)])[0] == 0


def test_a_snapshot_while_the_runner_appends_is_consistent(
    small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner appends a record (and its head) just as the reader reaches the end of the
    journal: the reader, whose head was read first, sees a consistent prefix."""
    from needlepoint.run import journal as journal_read
    from needlepoint.run.folder import FolderLock
    from needlepoint.run.journal import Journal, read_chain

    run = tmp_path / "run"
    argv = ["run", str(small), "--allow", "4", "--run-dir", str(run), "--simulate", "perfect"]
    assert run_cli([*argv, "--no-progress"])[0] == 0
    lines = journal_read._lines

    with FolderLock(run), Journal(run, fsync=False) as journal:

        def racing(fh):
            yield from lines(fh)
            journal.append("stop", time="2026-01-01T00:01:00Z", reason="complete", detail="x")

        monkeypatch.setattr(journal_read, "_lines", racing)
        report = read_chain(run)
        assert report.live and report.ok, report.problems
        monkeypatch.undo()
        # A torn line being written is no tampering either.
        with open(run / "journal.jsonl", "ab") as fh:
            fh.write(b'{"format":1,"n":')
        report = read_chain(run)
        assert report.ok and "a runner is writing it" in " ".join(report.warnings)


def _analysis_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_an_interrupted_analysis_leaves_the_earlier_one_whole(
    small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from needlepoint.analysis import figures

    run = tmp_path / "run"
    argv = ["run", str(small), "--allow", "32", "--run-dir", str(run), "--simulate", "position"]
    assert run_cli([*argv, "--no-progress"])[0] == 0
    assert run_cli(["analyze", str(run), "--no-figures"])[0] == 0
    before = _analysis_files(run / "analysis")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(figures, "completeness_grid", interrupted)  # the last of four figures
    code, _, err = run_cli(["analyze", str(run)])
    assert code == 130 and "interrupted" in err
    assert _analysis_files(run / "analysis") == before, "old and new files mixed"
    assert not [p for p in run.iterdir() if p.name.startswith(".analysis")]
    monkeypatch.undo()
    assert run_cli(["analyze", str(run)])[0] == 0
    # analysis.json, summary.md and every figure
    assert len(_analysis_files(run / "analysis")) == 2 + len(FIGURES)


def test_ctrl_c_at_any_moment_of_analyze_leaves_old_or_new(small: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    argv = ["run", str(small), "--allow", "32", "--run-dir", str(run), "--simulate", "position"]
    assert run_cli([*argv, "--no-progress"])[0] == 0
    assert run_cli(["analyze", str(run), "--no-figures"])[0] == 0
    old = _analysis_files(run / "analysis")
    assert run_cli(["analyze", str(run), "--out", str(tmp_path / "new")])[0] == 0
    new = _analysis_files(tmp_path / "new")
    for delay in (0.4, 0.8, 1.2, 1.6, 2.0, 2.6):
        shutil.rmtree(run / "analysis")
        assert run_cli(["analyze", str(run), "--no-figures"])[0] == 0
        child = subprocess.Popen(
            [sys.executable, "-m", "needlepoint", "analyze", str(run)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(delay)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=120)
        assert "Traceback" not in err, err
        assert _analysis_files(run / "analysis") in (old, new), f"mixed after {delay} s"


def test_a_stale_results_table_is_told_apart_from_an_edited_one(
    small: Path, tmp_path: Path
) -> None:
    """results.csv written while the run went on is stale, not edited: a warning; the same
    table edited afterwards is a problem."""
    run = tmp_path / "run"
    argv = ["run", str(small), "--run-dir", str(run), "--simulate", "position", "--no-progress"]
    assert run_cli([*argv, "--allow", "4"])[0] == 0
    assert run_cli(["results", str(run)])[0] == 0
    assert run_cli([*argv, "--allow", "8"])[0] == 0
    code, out, _ = run_cli(["audit-run", str(run)])
    assert code == 0 and "stale, not edited" in out
    table = run / "results.csv"
    table.write_text(table.read_text("utf-8").replace("unexecuted", "correct", 1), "utf-8")
    code, _, err = run_cli(["audit-run", str(run)])
    assert code == 1 and "results.csv: differs from the journal's re-derivation" in err
