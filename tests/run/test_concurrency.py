"""`run --concurrency N` against the loopback server: attempts journalled before they are sent,
in plan order; outcomes in completion order; stop rules mid-flight; SIGKILL and Ctrl-C with 8
requests in flight, then a resume that never sends one of them again; and results equal to a
sequential run's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.fuzz import SMALL, run_cli
from support.mutations import rechain
from support.runner import KEY_ENV, MODEL, SENTINEL, live, of_type, records, server_for

from needlepoint.design.prepared import prepare
from needlepoint.errors import NeedlepointError
from needlepoint.run.audit import audit_run
from needlepoint.run.options import RunOptions, check_settings
from needlepoint.run.results import RUN_SPECIFIC_COLUMNS, answer_bytes, write_results


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """32 requests (4 cases, one length, 2 similarities, 4 conditions)."""
    root = tmp_path_factory.mktemp("concurrency")
    (root / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    return prepare(root / "prepared", root / "small.json")


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SENTINEL)


def results_without_run_specific_columns(run: Path) -> bytes:
    """results.csv with the cells of RUN_SPECIFIC_COLUMNS emptied, checked against the file."""
    write_results(run)
    written = (run / "results.csv").read_bytes().splitlines()
    kept = answer_bytes(run).splitlines()
    at = [written[0].split(b",").index(name.encode()) for name in RUN_SPECIFIC_COLUMNS]
    for full, blanked in zip(written[1:], kept[1:], strict=True):  # no cell holds a comma here
        cells = full.split(b",")
        assert [c for i, c in enumerate(cells) if i not in at] == [
            c for i, c in enumerate(blanked.split(b",")) if i not in at
        ]
    return b"\n".join(kept)


def analysis_without_run_specific_fields(run: Path) -> dict:
    """analysis.json less the journal's hash and the measured latencies (and summary.md less
    the two lines that state them)."""
    code, _, err = run_cli(["analyze", str(run), "--no-figures"])
    assert code == 0, err
    analysis = json.loads((run / "analysis" / "analysis.json").read_text(encoding="utf-8"))
    del analysis["run"]["journal_sha256"]
    del analysis["secondary"]["latency_usage_cost"]["latency_s"]
    summary = (run / "analysis" / "summary.md").read_text(encoding="utf-8").splitlines()
    kept = [x for x in summary if not x.startswith(("- run fingerprint", "- latency (s)"))]
    assert len(summary) - len(kept) == 2
    return {"analysis": analysis, "summary": kept}


def most_open(run: Path) -> int:
    """The most attempts open at once, replaying the journal."""
    open_now, most = set(), 0
    for r in records(run):
        if r["type"] == "attempt":
            open_now.add(r["seq"])
            most = max(most, len(open_now))
        elif r["type"] == "outcome":
            open_now.discard(r["seq"])
    return most


def test_concurrency_needs_the_spacing_override_and_a_live_run(small: Path, key: None) -> None:
    live_options = {"base_url": "http://127.0.0.1:9/v1", "model": MODEL, "api_key_env": KEY_ENV}
    with pytest.raises(NeedlepointError, match="needs the spacing override"):
        check_settings(small, RunOptions(allow=4, concurrency=8, **live_options))
    with pytest.raises(NeedlepointError, match="needs the spacing override"):
        check_settings(
            small, RunOptions(allow=4, concurrency=8, override_reason="x", **live_options)
        )
    with pytest.raises(NeedlepointError, match="a simulated run"):
        check_settings(
            small,
            RunOptions(
                allow=4, concurrency=8, simulate="perfect", min_gap_s=0, override_reason="x"
            ),
        )
    with pytest.raises(NeedlepointError, match="more than 64"):
        check_settings(small, RunOptions(allow=4, concurrency=65, **live_options))
    ok = RunOptions(allow=4, concurrency=8, min_gap_s=0, override_reason="mine", **live_options)
    assert check_settings(small, ok).concurrency == 8


def test_a_concurrent_run_equals_a_sequential_one(small: Path, tmp_path: Path, key: None) -> None:
    one, eight = tmp_path / "one", tmp_path / "eight"
    with server_for(small) as server:
        server.delay_s = 0.05
        first = live(small, one, server, allow=32)
        sequential_sent = server.count
        second = live(small, eight, server, allow=32, concurrency=8)
    assert first.stop_reason == second.stop_reason == "complete"
    assert server.count == 2 * sequential_sent == 64
    assert first.counts == second.counts
    # Attempts in plan order, up to 8 open at once; sequential: one.
    assert [a["seq"] for a in of_type(eight, "attempt")] == list(range(1, 33))
    assert most_open(one) == 1 and 1 < most_open(eight) <= 8
    assert of_type(eight, "session")[0]["concurrency"] == 8
    assert "concurrency" not in of_type(one, "session")[0]
    assert json.loads((eight / "run.json").read_text())["concurrency"] == 8
    assert results_without_run_specific_columns(one) == results_without_run_specific_columns(eight)
    assert analysis_without_run_specific_fields(one) == analysis_without_run_specific_fields(eight)
    report = audit_run(eight)
    assert report.ok and not report.warnings, report.lines()


def test_the_audit_holds_a_session_to_its_concurrency(
    small: Path, tmp_path: Path, key: None
) -> None:
    run = tmp_path / "run"
    with server_for(small) as server:
        server.delay_s = 0.05
        live(small, run, server, allow=16, concurrency=8)
    assert most_open(run) > 2
    path = run / "journal.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[0]["concurrency"] = 2  # a re-chained edit: the session claims fewer in flight
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    rechain(path)
    problems = audit_run(run).problems
    assert any("had its outcome" in p for p in problems), problems


def cli_run(prepared: Path, run: Path, url: str, allow: int) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "needlepoint", "run", str(prepared), "--allow", str(allow)]
    args += ["--run-dir", str(run), "--base-url", url, "--model", MODEL, "--concurrency", "8"]
    args += ["--api-key-env", KEY_ENV, "--min-gap-s", "0", "--override-reason", "loopback test"]
    args += ["--timeout-s", "30", "--no-progress"]
    env = {**os.environ, KEY_ENV: SENTINEL}
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _resume_sends_none_again(small: Path, run: Path, server, first_eight: list[str]) -> None:
    proc = cli_run(small, run, server.base_url, 32)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert b"complete" in out
    sent = [r.sha256 for r in server.requests]
    assert len(sent) == 32 and len(set(sent)) == 32, "no request was sent twice"
    assert sent[:8] == first_eight
    assert [a["seq"] for a in of_type(run, "attempt")] == list(range(1, 33))
    report = audit_run(run)
    assert report.ok and not report.warnings, report.lines()
    assert SENTINEL.encode() not in out + err


def test_sigkill_with_8_requests_in_flight_then_resume(small: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    with server_for(small) as server:
        server.script(["hang:60"] * 8)
        proc = cli_run(small, run, server.base_url, 32)
        assert server.wait_for(8, timeout=60), proc.communicate()
        proc.kill()  # SIGKILL: no handler runs, 8 requests are out
        proc.communicate()
        assert proc.returncode == -9
        # Each attempt was journalled before its request left; no outcome was.
        assert [r["type"] for r in records(run)] == ["session"] + ["attempt"] * 8
        first_eight = [r.sha256 for r in server.requests]
        seen = audit_run(run)
        open_ = [w for w in seen.warnings if "has no outcome yet" in w]
        assert seen.ok and len(open_) == 8, seen.lines()
        _resume_sends_none_again(small, run, server, first_eight)
    recovered = [r for r in of_type(run, "outcome") if r["recovered"]]
    assert sorted(r["seq"] for r in recovered) == list(range(1, 9))
    assert {r["classification"]["kind"] for r in recovered} == {"indeterminate_interrupted"}


def test_ctrl_c_with_8_requests_in_flight_then_resume(small: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    with server_for(small) as server:
        server.script(["hang:60"] * 8)
        proc = cli_run(small, run, server.base_url, 32)
        assert server.wait_for(8, timeout=60), proc.communicate()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err.decode()
        types = [r["type"] for r in records(run)]
        assert types == ["session"] + ["attempt"] * 8 + ["outcome"] * 8 + ["stop"]
        outcomes = of_type(run, "outcome")
        assert sorted(r["seq"] for r in outcomes) == list(range(1, 9))
        assert all(not r["recovered"] for r in outcomes)
        assert {r["classification"]["kind"] for r in outcomes} == {"indeterminate_interrupted"}
        assert of_type(run, "stop")[0]["reason"] == "interrupted"
        first_eight = [r.sha256 for r in server.requests]
        _resume_sends_none_again(small, run, server, first_eight)


def _after_the_stop(run: Path, stop_at: int) -> list[str]:
    """Record types after the outcome that fired the stop rule (journal line ``stop_at``)."""
    return [r["type"] for r in records(run)[stop_at + 1 :]]


def test_a_429_mid_flight_stops_new_sends_and_records_what_is_in_flight(
    small: Path, tmp_path: Path, key: None
) -> None:
    run = tmp_path / "run"
    with server_for(small) as server:
        server.delay_s = 0.5  # the 429 comes back after 0.5 s, the others after 1.5 s
        server.script(["status:429"] + ["slow:1.5"] * 31)
        summary = live(small, run, server, allow=32, concurrency=8, timeout_s=10)
        received = server.count
    assert summary.stop_reason == "stop_status"
    attempts, outcomes = of_type(run, "attempt"), of_type(run, "outcome")
    assert received == len(attempts) == len(outcomes) and 2 <= len(attempts) <= 8
    fired = next(r for r in outcomes if r["http_status"] == 429)
    after = _after_the_stop(run, fired["n"])
    assert "attempt" not in after and after[-1] == "stop"
    assert after.count("outcome") == len(attempts) - 1, "what was in flight was recorded"
    assert all(r["classification"]["status"] == "correct" for r in outcomes if r is not fired)
    report = audit_run(run)
    assert report.ok, report.lines()


def test_consecutive_failures_mid_flight(small: Path, tmp_path: Path, key: None) -> None:
    run = tmp_path / "run"
    with server_for(small) as server:
        server.delay_s = 0.3
        server.script(["status:500"] * 32)
        summary = live(small, run, server, allow=32, concurrency=8)
    assert summary.stop_reason == "consecutive_failures"
    attempts, outcomes = of_type(run, "attempt"), of_type(run, "outcome")
    assert len(attempts) == len(outcomes) <= 9
    second = outcomes[1]  # the second failure in completion order fires the rule
    assert "attempt" not in _after_the_stop(run, second["n"])
    assert audit_run(run).ok


def test_a_crash_with_requests_in_flight_marks_each_indeterminate(
    small: Path, tmp_path: Path, key: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hashlib
    import time

    from needlepoint.design.prepared import load_prepared
    from needlepoint.run.transport import Transport

    third = hashlib.sha256(load_prepared(small).bodies[3]).hexdigest()
    send = Transport.send

    def crashing(self: Transport, outgoing):  # a sender meets a bug: the session must crash
        if outgoing.sha256 == third:
            time.sleep(0.3)
            raise RuntimeError("a bug in a sender")
        return send(self, outgoing)

    monkeypatch.setattr(Transport, "send", crashing)
    run = tmp_path / "run"
    with server_for(small) as server:
        server.delay_s = 2.0
        with pytest.raises(RuntimeError, match="a bug in a sender"):
            live(small, run, server, allow=32, concurrency=8, timeout_s=10)
        monkeypatch.setattr(Transport, "send", send)
        server.delay_s = 0
        first = [r.sha256 for r in server.requests]
        outcomes = of_type(run, "outcome")
        assert outcomes[0]["seq"] == 3
        assert sorted(o["seq"] for o in outcomes) == list(range(1, 9))
        assert {o["classification"]["kind"] for o in outcomes} == {"indeterminate_interrupted"}
        assert outcomes[0]["error_detail"] == "RuntimeError while the request was in flight"
        assert of_type(run, "stop")[0]["reason"] == "crashed"
        summary = live(small, run, server, allow=32, concurrency=8)
        sent = [r.sha256 for r in server.requests]
    assert summary.stop_reason == "complete"
    assert len(sent) == 31 and len(set(sent)) == 31 and sent[:7] == first, "none sent twice"
    assert audit_run(run).ok


def test_two_in_flight_is_a_concurrent_run(small: Path, tmp_path: Path, key: None) -> None:
    """The smallest concurrency above one: sent two at a time, and recorded as such."""
    run = tmp_path / "two"
    with server_for(small) as server:
        server.delay_s = 0.05
        summary = live(small, run, server, allow=8, concurrency=2)
    assert summary.stop_reason == "allowance_spent" and server.count == 8
    assert most_open(run) == 2
    assert of_type(run, "session")[0]["concurrency"] == 2
    assert json.loads((run / "run.json").read_text())["concurrency"] == 2
