"""The runner: the run loop end to end (allowance, resume, spacing, the folders it refuses), one
session's stop rules, gap and clock pieces at their interface on stand-in settings, one request
sent and journalled, and the progress bar."""

from __future__ import annotations

import dataclasses
import datetime
import io
import itertools
import json
import os
import pty
import re
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any

import pytest
from support.runner import (
    KEY_ENV,
    MODEL,
    SENTINEL,
    TIMEOUT_S,
    SteppedClock,
    kinds,
    live,
    of_type,
    records,
    server_for,
)

import needlepoint
from needlepoint.design.prepared import load_prepared
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import sha256_hex
from needlepoint.run.audit import audit_run
from needlepoint.run.clock import SIM_EPOCH, RealClock, SimClock
from needlepoint.run.journal import HEAD_NAME, Journal, JournalState
from needlepoint.run.options import RunOptions
from needlepoint.run.runner import Progress, Session, Stop, run_protocol, terminal_stream
from needlepoint.run.scoring import PROTOCOL_FAILURE, classify_safely
from needlepoint.run.transport import Exchange
from needlepoint.schema import to_plain


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SENTINEL)


@pytest.fixture
def server(reference_dir):
    with server_for(reference_dir) as s:
        yield s


def test_every_response_kind_is_classified_and_nothing_is_retried(reference_dir, tmp_path, server):
    modes = [
        "normal", "length", "normal", "wrong_model", "normal", "empty", "normal", "broken_json",
        "normal", "status:500", "normal", "hang:5", "normal", "trickle:0.05", "normal", "drop",
        "normal", "drop_mid", "content:ZZ-0000",
    ]  # fmt: skip
    server.script(modes)
    run = tmp_path / "run"
    summary = live(reference_dir, run, server, allow=len(modes))
    assert summary.stop_reason == "allowance_spent"
    assert server.count == len(modes), "one request per attempt: nothing retried"
    got = [k for _, _, k in kinds(run)]
    assert got == [
        "", "finish_reason", "", "model_mismatch", "", "content_empty", "", "unparsable_json",
        "", "http_status", "", "indeterminate_timeout", "", "indeterminate_deadline", "",
        "indeterminate_dropped", "", "indeterminate_dropped", "absent_code",
    ]  # fmt: skip
    assert [s for _, s, _ in kinds(run)][:2] == ["correct", "protocol_failure"]
    # The bytes that left are the frozen bytes, in the frozen order.
    attempts = of_type(run, "attempt")
    assert [a["seq"] for a in attempts] == list(range(1, len(modes) + 1))
    assert [a["request_sha256"] for a in attempts] == [r.sha256 for r in server.requests]
    assert audit_run(run).ok


def test_write_ahead_order_and_record_fields(reference_dir, tmp_path, server):
    run = tmp_path / "run"
    live(reference_dir, run, server, allow=2)
    types = [r["type"] for r in records(run)]
    assert types == ["session", "attempt", "outcome", "attempt", "outcome", "stop"]
    outcome = of_type(run, "outcome")[0]
    assert outcome["http_status"] == 200 and outcome["usage"]["prompt_tokens"] > 0
    assert json.loads(outcome["body"])["choices"][0]["message"]["role"] == "assistant"
    assert outcome["latency_s"] > 0 and outcome["cost"] is None  # no rates: unknown, not 0
    session = of_type(run, "session")[0]
    assert session["min_gap_s"] == 0 and session["override_reason"] == "loopback test server"
    assert of_type(run, "stop")[0]["reason"] == "allowance_spent"
    # run.json names the endpoint and the model asked (a reader must know whom the answers
    # came from), the frozen protocol, and dates a live run when it starts (a simulation at the
    # fixed epoch instead).
    recorded = json.loads((run / "run.json").read_text())
    assert (recorded["base_url"], recorded["model"]) == (server.base_url, MODEL)
    protocol = load_prepared(reference_dir).protocol
    assert recorded["protocol_id"] == protocol["protocol_id"] and recorded["protocol_id"]
    assert recorded["protocol_version"] == protocol["version"] and recorded["protocol_version"]
    created = recorded["created"]
    started = datetime.datetime.fromisoformat(created).timestamp()
    assert abs(time.time() - started) < 600


@pytest.mark.parametrize("fsync", [True, False])
def test_the_journal_is_opened_with_the_fsync_asked_for(
    reference_dir: Path, tmp_path: Path, server: Any, monkeypatch: pytest.MonkeyPatch, fsync: bool
) -> None:
    from needlepoint.run import runner as runner_module

    opened: list[bool] = []
    real = runner_module.Journal

    def journal(root: Path, *, fsync: bool) -> Journal:
        opened.append(fsync)
        return real(root, fsync=fsync)

    monkeypatch.setattr(runner_module, "Journal", journal)
    live(reference_dir, tmp_path / "run", server, allow=1, fsync=fsync)
    assert opened == [fsync]


@pytest.mark.parametrize("code", [429, 401, 403])
def test_stop_status_stops_at_once(reference_dir, tmp_path, server, code):
    server.script(["normal", f"status:{code}"])
    summary = live(reference_dir, tmp_path / "run", server, allow=10)
    assert summary.stop_reason == "stop_status" and str(code) in summary.stop_detail
    assert server.count == 2


def test_two_consecutive_failures_stop(reference_dir, tmp_path, server):
    server.script(["status:500", "normal", "length", "drop"])
    summary = live(reference_dir, tmp_path / "run", server, allow=10)
    assert summary.stop_reason == "consecutive_failures"
    assert server.count == 4


def test_connect_error_is_a_failure_not_a_send(reference_dir, tmp_path, server):
    url = server.base_url
    server.stop()
    summary = live(reference_dir, tmp_path / "run", server, allow=10, base_url=url)
    assert summary.stop_reason == "consecutive_failures"
    assert [k for _, _, k in kinds(tmp_path / "run")] == ["connect_error", "connect_error"]


def test_spacing_is_kept_and_recorded(reference_dir, tmp_path, server):
    gap = 0.15
    run = tmp_path / "run"
    live(reference_dir, run, server, allow=3, min_gap_s=gap, override_reason="fast test")
    arrivals = [r.received for r in server.requests]
    assert all(b - a >= gap for a, b in itertools.pairwise(arrivals))
    gaps = [a["gap_s"] for a in of_type(run, "attempt")]
    assert gaps[0] is None and all(g >= gap for g in gaps[1:])
    meta = json.loads((run / "run.json").read_text())
    assert meta["min_gap_s"] == gap and meta["override_reason"] == "fast test"
    assert meta["protocol_min_gap_s"] == 20


def test_allowance_counts_across_resumes(reference_dir, tmp_path, server):
    run = tmp_path / "run"
    assert live(reference_dir, run, server, allow=3).attempts_this_session == 3
    with pytest.raises(NeedlepointError, match="allowance spent"):
        live(reference_dir, run, server, allow=3)
    summary = live(reference_dir, run, server, allow=5)
    assert (summary.attempts_total, summary.attempts_this_session) == (5, 2)
    assert server.count == 5
    assert [a["seq"] for a in of_type(run, "attempt")] == [1, 2, 3, 4, 5]
    assert len(of_type(run, "session")) == 2
    assert audit_run(run).ok


def test_refused_resume_leaves_a_torn_journal_untouched(reference_dir, tmp_path, server):
    run = tmp_path / "run"
    live(reference_dir, run, server, allow=2)
    with open(run / "journal.jsonl", "ab") as fh:
        fh.write(b'{"format":1,"n":')  # a crash in the middle of a write
    before = (run / "journal.jsonl").read_bytes(), (run / "journal.head.json").read_bytes()
    with pytest.raises(NeedlepointError, match="allowance spent"):
        live(reference_dir, run, server, allow=2)
    after = (run / "journal.jsonl").read_bytes(), (run / "journal.head.json").read_bytes()
    assert after == before
    live(reference_dir, run, server, allow=3)  # a session that starts repairs it, on the chain
    session = of_type(run, "session")[-1]
    assert session["dropped_tail_sha256"] == sha256_hex(b'{"format":1,"n":')
    assert audit_run(run).ok


def test_cost_is_computed_and_the_cap_stops(reference_dir, tmp_path, server):
    run = tmp_path / "run"
    rates = {"input_rate": 1000.0, "output_rate": 2000.0}
    summary = live(reference_dir, run, server, allow=10, cost_cap=2.0, **rates)
    outcome = of_type(run, "outcome")[0]
    usage = outcome["usage"]
    expected = (usage["prompt_tokens"] * 1000 + usage["completion_tokens"] * 2000) / 1e6
    assert outcome["cost"] == pytest.approx(expected)
    assert summary.stop_reason == "cost_cap" and summary.cost_spent >= 2.0
    assert server.count == summary.attempts_total < 10
    # The summary names its folder and the journal's head (its cost's rounding: below).
    head = json.loads((run / HEAD_NAME).read_text())["sha256"]
    assert summary.run_dir == run and summary.journal_sha256 == head
    assert 0.0 < summary.loop_wall_s < 60.0


def test_unknown_cost_with_a_cap_stops_before_the_next_request(reference_dir, tmp_path, server):
    run = tmp_path / "run"
    rates = {"input_rate": 1.0, "output_rate": 1.0, "cost_cap": 100.0}
    server.script(["normal", "no_usage", "normal"])
    summary = live(reference_dir, run, server, allow=10, **rates)
    assert summary.stop_reason == "cost_unknown" and "seq 2" in summary.stop_detail
    assert server.count == 2 and summary.cost_spent is None
    with pytest.raises(NeedlepointError) as refused:
        live(reference_dir, run, server, allow=10, **rates)
    assert str(refused.value) == (
        f"{run}: the cost of seq 2 is unknown, so --cost-cap cannot be enforced; resume "
        "without --cost-cap to accept that"
    )
    # Without a cap the user accepts the unknown cost explicitly.
    assert (
        live(reference_dir, run, server, allow=3, input_rate=1.0, output_rate=1.0).attempts_total
        == 3
    )


def test_key_never_written_even_when_echoed(reference_dir, tmp_path, server, capsys):
    from needlepoint.run.results import write_results

    run = tmp_path / "run"
    server.script([f"content:{SENTINEL}", f"content:the key is {SENTINEL}"])
    summary = live(reference_dir, run, server, allow=2, progress="auto")
    write_results(run)
    assert server.requests[0].authorization == f"Bearer {SENTINEL}"
    files = sorted(p for p in run.rglob("*") if p.is_file())
    assert {p.name for p in files} >= {"journal.jsonl", "run.json", "results.csv"}
    for path in files:
        assert SENTINEL.encode() not in path.read_bytes(), path
    out = capsys.readouterr()
    assert SENTINEL not in out.out + out.err + repr(summary)
    assert "[REDACTED]" in (run / "journal.jsonl").read_text()
    assert json.loads((run / "run.json").read_text())["api_key_env"] == KEY_ENV


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"allow": 0}, "--allow must be a positive integer"),
        ({"allow": True}, "--allow must be a positive integer"),
        ({"base_url": None}, "needs --base-url"),
        ({"base_url": "ftp://x"}, "not an http"),
        ({"model": None}, "needs --model"),
        ({"model": "other-model"}, "differs from the frozen model"),
        ({"model": "other-model"}, r"needlepoint prepare --protocol \S+/protocol.json "),
        ({"model": "other-model"}, r"--model other-model --out \S+-other-model \(in a pip"),
        ({"api_key_env": None}, "needs --api-key-env"),
        ({"api_key_env": "NEEDLEPOINT_UNSET_VARIABLE"}, "is not set"),
        ({"min_gap_s": 1, "override_reason": " "}, "give --override-reason"),
        ({"cost_cap": 1.0}, "--cost-cap needs --input-rate"),
        ({"input_rate": 1.0}, "give both"),
        ({"simulate": "position"}, "drop --base-url"),
        ({"simulate": "bogus", "base_url": None, "api_key_env": None}, "must be one of"),
        ({"timeout_s": 0}, "--timeout-s must be positive"),
        ({"base_url": "http://api.example.com/v1"}, "travel unencrypted to api.example.com"),
        ({"base_url": "http://10.0.0.7:8080/v1"}, "or --allow-insecure-http"),
        ({"base_url": "http://127.0.0.1.example.com/v1"}, "travel unencrypted"),
    ],
)
def test_refuses_to_start(reference_dir, tmp_path, server, change, message):
    change = dict(change)  # the parameter is shared: popping from it would leak into a rerun
    allow = change.pop("allow", 1)
    with pytest.raises(NeedlepointError, match=message):
        live(reference_dir, tmp_path / "run", server, allow=allow, **change)
    assert server.count == 0
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.9.8.7", "[::1]", "localhost", "LOCALHOST"], ids=str
)
def test_plain_http_to_loopback_needs_no_flag(host):
    from urllib.parse import urlsplit

    from needlepoint.run.options import is_loopback

    assert is_loopback(urlsplit(f"http://{host}:8000/v1").hostname)


def test_insecure_http_is_allowed_only_by_the_flag_and_recorded(
    reference_dir, tmp_path, server, monkeypatch
):
    # The loopback server stands in for a remote host: every address counts as remote here.
    monkeypatch.setattr("needlepoint.run.options.is_loopback", lambda host: False)
    with pytest.raises(NeedlepointError, match="--allow-insecure-http"):
        live(reference_dir, tmp_path / "refused", server, allow=1)
    live(reference_dir, tmp_path / "run", server, allow=1, allow_insecure_http=True)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["allow_insecure_http"] is True
    assert server.count == 1
    monkeypatch.undo()  # loopback again: no flag needed, and none recorded
    monkeypatch.setenv(KEY_ENV, SENTINEL)
    live(reference_dir, tmp_path / "safe", server, allow=1)
    assert "allow_insecure_http" not in json.loads((tmp_path / "safe" / "run.json").read_text())


def test_short_key_is_refused(reference_dir, tmp_path, server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "abc")
    with pytest.raises(NeedlepointError, match="shorter than"):
        live(reference_dir, tmp_path / "run", server, allow=1)


def test_refuses_a_prepared_folder_that_fails_verify(prepared_copy, tmp_path, server):
    plan = prepared_copy / "plan.csv"
    plan.write_bytes(plan.read_bytes().replace(b",low,", b",high,", 1))
    with pytest.raises(NeedlepointError, match="fails verify"):
        live(prepared_copy, tmp_path / "run", server, allow=1)
    assert server.count == 0


def test_refuses_a_foreign_or_mismatched_run_folder(reference_dir, tmp_path, server):
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    with pytest.raises(NeedlepointError, match=r"not empty and has no run\.json"):
        live(reference_dir, other, server, allow=1)
    run = tmp_path / "run"
    live(reference_dir, run, server, allow=1)
    with pytest.raises(NeedlepointError, match="field simulation"):
        run_protocol(reference_dir, run, RunOptions(allow=2, simulate="perfect", progress="off"))


def test_two_runners_cannot_share_a_folder(reference_dir, tmp_path, server):
    from needlepoint.run.folder import FolderLock

    run = tmp_path / "run"
    run.mkdir()
    with FolderLock(run), pytest.raises(NeedlepointError, match="another runner"):
        live(reference_dir, run, server, allow=1)


def test_keyboard_interrupt_mid_request_is_recorded(reference_dir, tmp_path, server, monkeypatch):
    from needlepoint.run import transport

    def interrupted(self, outgoing):
        raise KeyboardInterrupt

    monkeypatch.setattr(transport.Transport, "send", interrupted)
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        live(reference_dir, run, server, allow=3)
    assert kinds(run) == [(1, "protocol_failure", "indeterminate_interrupted")]
    assert of_type(run, "stop")[0]["reason"] == "interrupted"
    monkeypatch.undo()
    monkeypatch.setenv(KEY_ENV, SENTINEL)
    live(reference_dir, run, server, allow=3)
    assert [a["seq"] for a in of_type(run, "attempt")] == [1, 2, 3]
    assert audit_run(run).ok


def test_prepared_folder_can_move_after_the_run(reference_dir, tmp_path, server):
    from needlepoint.run.results import load_run_results

    prepared = shutil.copytree(reference_dir, tmp_path / "prepared")
    run = tmp_path / "run"
    live(prepared, run, server, allow=1, timeout_s=TIMEOUT_S)
    moved = shutil.move(prepared, tmp_path / "moved")
    with pytest.raises(NeedlepointError):
        load_run_results(run)
    assert load_run_results(run, moved).rows[0]["status"] == "correct"


def test_bad_progress_mode_is_refused_before_anything(reference_dir, tmp_path, server):
    with pytest.raises(NeedlepointError, match="progress must be one of"):
        live(reference_dir, tmp_path / "run", server, allow=1, progress="fancy")
    assert not (tmp_path / "run").exists()


def test_deleting_the_journal_does_not_grant_fresh_budget(reference_dir, tmp_path, server):
    from needlepoint.run.journal import HEAD_NAME, JOURNAL_NAME

    run = tmp_path / "run"
    live(reference_dir, run, server, allow=2)
    (run / JOURNAL_NAME).unlink()
    (run / HEAD_NAME).unlink()
    with pytest.raises(NeedlepointError, match=r"missing although run\.json exists"):
        live(reference_dir, run, server, allow=2)
    # An emptied journal with a matching empty head: the context manifest still remembers.
    (run / JOURNAL_NAME).write_bytes(b"")
    (run / HEAD_NAME).write_text('{"format":1,"records":0,"sha256":"' + "0" * 64 + '"}\n')
    with pytest.raises(NeedlepointError, match="journal records were removed"):
        live(reference_dir, run, server, allow=2)
    assert server.count == 2


def test_a_stop_reads_as_its_reason_and_keeps_its_detail() -> None:
    stop = Stop("max_consecutive_failures", "3 in a row")
    assert (str(stop), stop.args) == ("max_consecutive_failures", ("max_consecutive_failures",))
    assert (stop.reason, stop.detail) == ("max_consecutive_failures", "3 in a row")


class FakeClock:
    """A clock that reads set values and records every sleep."""

    def __init__(self, now: float = 0.0, mono: float = 0.0, simulated: bool = False) -> None:
        self.t, self.mono, self.simulated, self.sleeps = now, mono, simulated, []

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.mono

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds
        self.mono += seconds


def settings(**kw: Any) -> SimpleNamespace:
    """Stand-in settings: no cap, stop on 429, two failures in a row, no progress bar."""
    base: dict[str, Any] = {
        "api_key": None,
        "simulation": False,
        "prepared": SimpleNamespace(plan=[]),
        "progress": "off",
        "allow": 10,
        "cost_cap": None,
        "min_gap_s": 0.0,
        "stop_statuses": frozenset({429}),
        "max_consecutive_failures": 2,
    }
    base.update(kw)
    return SimpleNamespace(**base)


def session(state: JournalState | None = None, **kw: Any) -> Session:
    journal = SimpleNamespace(state=state or JournalState())
    return Session(settings(**kw), journal)  # type: ignore[arg-type]


def state_of(*records: dict[str, Any]) -> JournalState:
    return JournalState.of(list(records))


def attempt(seq: int) -> dict[str, Any]:
    return {
        "type": "attempt",
        "seq": seq,
        "request_sha256": "0" * 64,
        "time": "2026-01-01T00:00:00Z",
    }


def outcome(seq: int, cost: Any, usage: Any = None, time: str = "2024-01-01T00:00:00Z") -> dict:
    return {"type": "outcome", "seq": seq, "time": time, "cost": cost, "usage": usage}


def stop_of(call: Any) -> tuple[str, str]:
    with pytest.raises(Stop) as info:
        call()
    return info.value.reason, info.value.detail


def test_the_allowance_stops_exactly_when_it_is_reached() -> None:
    session(state_of(*[attempt(i) for i in range(1, 3)]), allow=3).check_budget()
    spent = session(state_of(*[attempt(i) for i in range(1, 4)]), allow=3)
    assert stop_of(spent.check_budget) == ("allowance_spent", "3 attempts recorded, --allow 3")


def test_without_a_cap_neither_unknown_nor_large_costs_stop() -> None:
    session(state_of(outcome(1, None), outcome(2, 50.0)), cost_cap=None).check_budget()


def test_an_unknown_cost_under_a_cap_names_the_latest_seq_and_why() -> None:
    usage = {"prompt_tokens": "many"}
    s = session(state_of(outcome(4, None), outcome(7, None, usage=usage)), cost_cap=2.5)
    assert stop_of(s.check_budget) == (
        "cost_unknown",
        "the cost of seq 7 is unknown (its usage has no integer prompt_tokens and "
        "completion_tokens), so the cap of 2.5 cannot be enforced",
    )
    s = session(state_of(outcome(3, None)), cost_cap=100.0)
    assert stop_of(s.check_budget) == (
        "cost_unknown",
        "the cost of seq 3 is unknown (no usage in the response), so the cap of 100 cannot "
        "be enforced",
    )


def test_the_cost_cap_stops_when_spending_reaches_it() -> None:
    session(state_of(outcome(1, 1.25), outcome(2, 0.75)), cost_cap=2.000001).check_budget()
    s = session(state_of(outcome(1, 1.25), outcome(2, 0.75)), cost_cap=2.0)
    assert stop_of(s.check_budget) == ("cost_cap", "spent 2.000000 of 2")


def test_the_allowance_is_checked_before_the_cost() -> None:
    s = session(state_of(attempt(1), outcome(1, None)), allow=1, cost_cap=1.0)
    assert stop_of(s.check_budget)[0] == "allowance_spent"


def test_a_stop_status_stops_at_once_whatever_the_outcome() -> None:
    s = session(stop_statuses=frozenset({429, 401}))
    assert stop_of(lambda: s.check_outcome(4, "correct", 401)) == (
        "stop_status",
        "HTTP 401 at seq 4",
    )
    s.check_outcome(5, "correct", 500)
    s.check_outcome(6, "correct", None)


def test_protocol_failures_stop_only_in_an_unbroken_row() -> None:
    s = session(max_consecutive_failures=3)
    s.check_outcome(1, PROTOCOL_FAILURE, 500)
    s.check_outcome(2, PROTOCOL_FAILURE, 500)
    s.check_outcome(3, "wrong", 200)  # anything else breaks the row
    s.check_outcome(4, PROTOCOL_FAILURE, 500)
    s.check_outcome(5, PROTOCOL_FAILURE, None)
    assert stop_of(lambda: s.check_outcome(6, PROTOCOL_FAILURE, 200)) == (
        "consecutive_failures",
        "3 protocol failures in a row, the last at seq 6",
    )


def test_one_allowed_failure_stops_on_the_first() -> None:
    s = session(max_consecutive_failures=1)
    s.check_outcome(1, "correct", 200)
    assert stop_of(lambda: s.check_outcome(2, PROTOCOL_FAILURE, 500)) == (
        "consecutive_failures",
        "1 protocol failures in a row, the last at seq 2",
    )


def test_since_done_is_none_before_any_completion() -> None:
    s = session()
    s.clock = FakeClock(now=100.0, mono=50.0)
    assert s.since_done() is None


def test_since_done_counts_from_this_session_on_the_monotonic_clock() -> None:
    s = session(state_of(outcome(1, 0.0, time="1970-01-01T00:00:10Z")))
    s.clock = FakeClock(now=1000.0, mono=12.12345678)
    s.last_done_mono = 2.0
    assert s.since_done() == 10.123457


def test_since_done_counts_from_the_journal_on_wall_time() -> None:
    s = session(state_of(outcome(1, 0.0, time="1970-01-01T00:00:10Z")))
    s.clock = FakeClock(now=15.12345678, mono=0.0)
    assert s.since_done() == 5.123457


def test_a_simulated_session_starts_its_clock_at_the_latest_record_or_the_epoch() -> None:
    assert session(simulation=True).now() == "2026-01-01T00:00:00.000000Z"
    assert session(simulation=True).clock.now() == SIM_EPOCH
    later = state_of(outcome(1, 0.0, time="2026-01-02T03:04:05.000006Z"))
    assert session(later, simulation=True).now() == "2026-01-02T03:04:05.000006Z"
    earlier = state_of(outcome(1, 0.0, time="2000-01-01T00:00:00Z"))
    assert session(earlier, simulation=True).clock.now() == SIM_EPOCH
    assert isinstance(session(simulation=True).clock, SimClock)
    assert isinstance(session(simulation=False).clock, RealClock)


def test_a_new_session_has_no_completion_and_no_failures() -> None:
    s = session()
    assert (s.last_done_mono, s.failures_in_a_row, s.last) == (None, 0, "-")


def test_wait_gap_sends_at_once_before_any_completion() -> None:
    s = session(min_gap_s=20.0)
    s.clock = FakeClock()
    assert s.wait_gap(1) is None and s.clock.sleeps == []


def test_wait_gap_does_not_wait_once_the_gap_is_exactly_reached() -> None:
    s = session(min_gap_s=2.5)
    s.clock, s.last_done_mono = FakeClock(mono=12.5), 10.0
    assert s.wait_gap(2) == 2.5 and s.clock.sleeps == []


def test_wait_gap_sleeps_out_the_remainder_in_one_step() -> None:
    s = session(min_gap_s=2.5)
    s.clock, s.last_done_mono = FakeClock(mono=10.25), 10.0
    assert s.wait_gap(2) == 2.5
    assert s.clock.sleeps == [2.25]


def test_wait_gap_in_a_live_bar_ticks_each_second(monkeypatch) -> None:
    s = session(min_gap_s=2.5)
    s.progress.mode = "auto"
    s.clock, s.last_done_mono = FakeClock(mono=10.0), 10.0
    assert s.wait_gap(2) == 2.5
    assert s.clock.sleeps == [1.0, 1.0, 0.5]
    simulated = session(min_gap_s=2.5)
    simulated.progress.mode = "auto"
    simulated.clock, simulated.last_done_mono = FakeClock(mono=10.0, simulated=True), 10.0
    assert simulated.wait_gap(2) == 2.5 and simulated.clock.sleeps == [2.5]


def test_wait_gap_ends_for_a_gap_finer_than_a_microsecond() -> None:
    # The remainder 0.0000004 rounds to 0; a simulated clock never moves on a sleep of 0.
    s = session(min_gap_s=1.0000004)
    s.clock, s.last_done_mono = FakeClock(mono=10.0, simulated=True), 10.0
    sleep = s.clock.sleep

    def bounded(seconds: float) -> None:
        assert len(s.clock.sleeps) < 5, "wait_gap does not end"
        sleep(seconds)

    s.clock.sleep = bounded
    assert s.wait_gap(2) == 1.000001
    assert s.clock.sleeps == [1.0, 0.000001]


class Shown:
    """A progress display that records what it is asked to show."""

    mode = "auto"

    def __init__(self) -> None:
        self.waits: list[tuple[int, str, float]] = []

    def waiting(self, seq: int, last: str, wait_s: float) -> None:
        self.waits.append((seq, last, wait_s))


def test_wait_gap_shows_the_seq_the_last_outcome_and_the_remaining_wait() -> None:
    s = session(min_gap_s=1.0)
    s.progress, s.last = Shown(), "correct"
    s.clock, s.last_done_mono = FakeClock(mono=10.5, simulated=True), 10.0
    s.wait_gap(7)
    assert s.progress.waits == [(7, "correct", 0.5)]


def test_wait_gap_rounds_the_remaining_wait_to_the_microsecond() -> None:
    s = session(min_gap_s=1.0)
    s.clock, s.last_done_mono = FakeClock(mono=10.12345678), 10.0
    assert s.wait_gap(2) == 1.0
    assert s.clock.sleeps == [0.876543]


@pytest.mark.parametrize(("simulation", "label"), [(True, "SIMULATION"), (False, "run")])
def test_the_progress_bar_counts_the_plan_from_the_attempts_so_far(simulation, label) -> None:
    plan = SimpleNamespace(plan=[1, 2, 3, 4, 5])
    s = session(state_of(attempt(1), attempt(2)), simulation=simulation, prepared=plan,
                progress="deterministic")  # fmt: skip
    try:
        assert (s.progress.bar.total, s.progress.bar.n, s.progress.bar.desc) == (5, 2, label)
    finally:
        s.progress.close("")


def test_append_scrubs_the_key_from_every_field() -> None:
    key = "sk-test-0123456789abcdef"
    written: list[tuple[str, dict[str, Any]]] = []
    journal = SimpleNamespace(
        state=JournalState(), append=lambda type_, **fields: written.append((type_, fields))
    )
    s = Session(settings(api_key=key), journal)  # type: ignore[arg-type]
    s.append("outcome", error_detail=f"echo {key}", headers={"x": key}, seq=3)
    assert written == [
        ("outcome", {"error_detail": "echo [REDACTED]", "headers": {"x": "[REDACTED]"}, "seq": 3})
    ]


# --- whole sessions, simulated: what run() and one() write to the journal ---


def simulate(prepared: Path, run: Path, allow: int, **kw: Any) -> Any:
    options = RunOptions(allow=allow, simulate="perfect", fsync=False, **kw)
    return run_protocol(prepared, run, options)


def journal(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]


def test_a_session_opens_with_its_settings_and_closes_with_its_stop(reference_dir, tmp_path):
    run = tmp_path / "run"
    simulate(reference_dir, run, 2, input_rate=1.0, output_rate=2.0, cost_cap=50.0)
    records = journal(run)
    assert [r["type"] for r in records] == ["session", "attempt", "outcome"] * 1 + [
        "attempt",
        "outcome",
        "stop",
    ]
    session = {k: v for k, v in records[0].items() if k not in ("format", "n", "prev", "type")}
    assert session == {
        "session": 1,
        "time": "2026-01-01T00:00:00.000000Z",
        "run_json_sha256": sha256_hex((run / "run.json").read_bytes()),
        "package_version": needlepoint.__version__,
        "allow": 2,
        "min_gap_s": 20.0,
        "override_reason": None,
        "timeout_s": 120.0,
        "deadline_s": 240.0,
        "input_rate": 1.0,
        "output_rate": 2.0,
        "cost_cap": 50.0,
    }
    stop = records[-1]
    assert (stop["reason"], stop["detail"]) == ("allowance_spent", "2 attempts recorded, --allow 2")
    assert stop["time"] == records[-2]["time"]


def test_each_attempt_names_its_frozen_body_and_the_gap_kept(reference_dir, tmp_path):
    run = tmp_path / "run"
    simulate(reference_dir, run, 3)
    plan = load_prepared(reference_dir).plan
    attempts = [r for r in journal(run) if r["type"] == "attempt"]
    outcomes = [r for r in journal(run) if r["type"] == "outcome"]
    assert [(a["seq"], a["request_sha256"]) for a in attempts] == [
        (row.seq, row.request_sha256) for row in plan[:3]
    ]
    assert [a["gap_s"] for a in attempts] == [None, 20.0, 20.0]
    assert attempts[0]["time"] == "2026-01-01T00:00:00.000000Z"
    assert [o["seq"] for o in outcomes] == [1, 2, 3]
    assert all(o["classification"]["status"] == "correct" for o in outcomes)
    assert all(o["recovered"] is False for o in outcomes)
    assert all(o["time"] > a["time"] for a, o in zip(attempts, outcomes, strict=True))


def test_a_finished_plan_stops_as_complete(reference_dir, tmp_path):
    run = tmp_path / "run"
    summary = simulate(reference_dir, run, 500)
    assert (summary.stop_reason, summary.stop_detail) == (
        "complete",
        "every planned seq has been attempted",
    )
    stop = journal(run)[-1]
    assert (stop["type"], stop["reason"]) == ("stop", "complete")


def test_resuming_a_finished_plan_sends_nothing_and_says_why(reference_dir, tmp_path):
    run = tmp_path / "run"
    simulate(reference_dir, run, 500)
    again = simulate(reference_dir, run, 500)
    assert (again.stop_reason, again.stop_detail) == (
        "complete",
        "every planned seq has been attempted; nothing to send",
    )
    assert again.attempts_this_session == 0


def test_the_progress_display_closes_on_the_stop_reason(reference_dir, tmp_path, monkeypatch):
    from needlepoint.run.runner import Progress

    shown: list[str] = []
    monkeypatch.setattr(Progress, "close", lambda self, message: shown.append(message))
    simulate(reference_dir, tmp_path / "run", 2)
    assert shown == ["allowance_spent"]


def test_a_resumed_session_counts_on_and_skips_what_was_attempted(reference_dir, tmp_path):
    run = tmp_path / "run"
    simulate(reference_dir, run, 2)
    simulate(reference_dir, run, 4)
    records = journal(run)
    sessions = [r for r in records if r["type"] == "session"]
    assert [s["session"] for s in sessions] == [1, 2]
    assert [r["seq"] for r in records if r["type"] == "attempt"] == [1, 2, 3, 4]


def test_a_dangling_attempt_gets_a_recovered_outcome_and_is_not_resent(reference_dir, tmp_path):
    run = tmp_path / "run"
    simulate(reference_dir, run, 1)
    j = Journal(run, fsync=False)
    sha = load_prepared(reference_dir).plan[1].request_sha256
    j.append("attempt", seq=2, request_sha256=sha, time="2026-01-01T00:00:01.000000Z", gap_s=None)
    j.close()
    simulate(reference_dir, run, 3)
    records = journal(run)
    second = records.index([r for r in records if r["type"] == "session"][1])
    recovered = records[second + 1]
    assert (recovered["type"], recovered["seq"], recovered["recovered"]) == ("outcome", 2, True)
    assert recovered["error_detail"] == (
        "attempt journalled, but the process ended before its outcome"
    )
    assert recovered["classification"]["kind"] == "indeterminate_interrupted"
    assert recovered["time"] == records[second]["time"]  # recovered when the session opened
    assert [r["seq"] for r in records if r["type"] == "attempt"] == [1, 2, 3]


def test_a_crash_is_journalled_as_the_stop_and_raised(reference_dir, tmp_path, monkeypatch):
    def boom(self, transport, seq, expected_sha):
        raise ValueError("boom at " + str(seq))

    monkeypatch.setattr(Session, "one", boom)
    run = tmp_path / "run"
    with pytest.raises(ValueError, match="boom at 1"):
        simulate(reference_dir, run, 3)
    stop = journal(run)[-1]
    assert (stop["type"], stop["reason"], stop["detail"]) == (
        "stop",
        "crashed",
        "ValueError: boom at 1",
    )
    assert stop["time"] == "2026-01-01T00:00:00.000000Z"


def test_an_interrupt_between_requests_is_journalled_and_raised(
    reference_dir, tmp_path, monkeypatch
):
    def interrupted(self, transport, seq, expected_sha):
        raise KeyboardInterrupt

    monkeypatch.setattr(Session, "one", interrupted)
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        simulate(reference_dir, run, 3)
    stop = journal(run)[-1]
    assert (stop["type"], stop["reason"], stop["detail"]) == (
        "stop",
        "interrupted",
        "KeyboardInterrupt",
    )
    assert len([r for r in journal(run) if r["type"] == "stop"]) == 1


def test_an_interrupt_in_flight_is_an_unrecovered_outcome(reference_dir, tmp_path, monkeypatch):
    from needlepoint.run import transport

    def cut(self, outgoing):
        raise KeyboardInterrupt

    monkeypatch.setattr(transport.Transport, "send", cut)
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        simulate(reference_dir, run, 3)
    records = journal(run)
    assert [r["type"] for r in records] == ["session", "attempt", "outcome", "stop"]
    outcome = records[2]
    assert (outcome["seq"], outcome["recovered"], outcome["error_detail"]) == (
        1,
        False,
        "KeyboardInterrupt while the request was in flight",
    )
    assert outcome["time"] == "2026-01-01T00:00:00.000000Z"


def test_a_body_that_does_not_hash_to_the_plan_is_never_sent(reference_dir, tmp_path, monkeypatch):
    from needlepoint.run import transport

    build = transport.Transport.build

    def tampered(self, body):
        return dataclasses.replace(build(self, body), sha256="0" * 64)

    monkeypatch.setattr(transport.Transport, "build", tampered)
    run = tmp_path / "run"
    message = "seq 1: body to send does not hash to plan.csv's value"
    with pytest.raises(NeedlepointError, match=re.escape(message)):
        simulate(reference_dir, run, 3)
    assert [r["type"] for r in journal(run)] == ["session", "stop"]


KEY = "sk-proj-QX-4821-0123456789"
ANSWER = {"expected": "QX-4821", "near_codes": [], "codes_present": ["QX-4821"]}


class Clock:
    """Fixed readings; a sleep moves both clocks."""

    simulated = True

    def __init__(self) -> None:
        self.t, self.mono = 1_800_000_000.0, 50.0

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.mono

    def sleep(self, seconds: float) -> None:
        self.t += seconds
        self.mono += seconds


class ShownCalls:
    """A progress display that records each call."""

    mode = "deterministic"

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def waiting(self, seq: int, last: str, wait_s: float) -> None:
        self.calls.append(("waiting", seq, last, wait_s))

    def sending(self, seq: int, last: str) -> None:
        self.calls.append(("sending", seq, last))

    def done(self, seq: int, outcome: str, next_wait_s: float) -> None:
        self.calls.append(("done", seq, outcome, next_wait_s))


class Server:
    """A stand-in transport: hashes bodies as given and answers with fixed exchanges."""

    def __init__(self, *replies: Exchange) -> None:
        self.replies = list(replies)

    def build(self, body: bytes) -> SimpleNamespace:
        return SimpleNamespace(sha256="s" + body.decode(), body=body)

    def send(self, outgoing: Any) -> Exchange:
        return self.replies.pop(0)


def chat(content: str, status: int = 200, **extra: Any) -> Exchange:
    message = {"role": "assistant", "content": content}
    body = {"model": "m", "choices": [{"message": message, "finish_reason": "stop"}], **extra}
    return Exchange(status, json.dumps(body).encode(), None, "", 0.5, False, {})


def make(protocol: dict[str, Any] | None = None, **kw: Any) -> tuple[Session, list[dict]]:
    written: list[dict[str, Any]] = []

    def append(type_: str, **fields: Any) -> dict[str, Any]:
        written.append({"type": type_, **fields})
        return written[-1]

    settings = {
        "api_key": KEY,
        "simulation": False,
        "progress": "off",
        "allow": 10,
        "cost_cap": None,
        "min_gap_s": 0.0,
        "stop_statuses": frozenset({429}),
        "max_consecutive_failures": 3,
        "model": "m",
        "input_rate": None,
        "output_rate": None,
        "prepared": SimpleNamespace(
            plan=[],
            bodies={seq: f"b{seq}".encode() for seq in range(1, 6)},
            answer_key={seq: ANSWER for seq in range(1, 6)},
            protocol=protocol if protocol is not None else {},
        ),
    }
    settings.update(kw)
    journal = SimpleNamespace(state=JournalState(), append=append)
    s = Session(SimpleNamespace(**settings), journal)  # type: ignore[arg-type]
    s.clock, s.progress = Clock(), ShownCalls()
    return s, written


def test_one_journals_the_attempt_then_the_classified_outcome() -> None:
    s, written = make()
    s.one(Server(chat("QX-4821")), 2, "sb2")
    assert [(r["type"], r["seq"]) for r in written] == [("attempt", 2), ("outcome", 2)]
    assert written[0]["request_sha256"] == "sb2"
    assert written[1]["classification"]["status"] == "correct"


def test_an_echoed_key_is_redacted_before_the_answer_is_classified() -> None:
    # The key holds the expected code as a whole token, so the raw reply would read as the
    # right answer with extra text; the stored reply reads "[REDACTED]". The recorded
    # classification must be the one audit-run re-derives from the stored bytes.
    s, written = make()
    s.one(Server(chat(KEY)), 1, "sb1")
    outcome = written[1]
    assert KEY not in json.dumps(outcome)
    assert outcome["classification"]["kind"] == "bad_format"
    stored = classify_safely(http_status=200, transport_error=None,
                             body=outcome["body"].encode(), answer=ANSWER, model="m")  # fmt: skip
    assert outcome["classification"] == to_plain(stored)


@pytest.mark.parametrize(
    ("protocol", "reply", "kind"),
    [
        ({}, "UNKNOWN", "false_unknown"),
        ({"unknown": "NESCIO"}, "NESCIO", "false_unknown"),
        ({"unknown": "NESCIO"}, "UNKNOWN", "bad_format"),
        ({"unknown": "NESCIO"}, "unknown", "bad_format"),
    ],
)
def test_the_protocol_names_the_unknown_token(protocol, reply, kind) -> None:
    s, written = make(protocol)
    s.one(Server(chat(reply)), 1, "sb1")
    assert written[1]["classification"]["kind"] == kind


def test_progress_sees_the_seq_and_the_previous_then_this_outcome() -> None:
    s, _ = make(min_gap_s=2.0)
    s.last, s.last_done_mono = "correct", s.clock.mono - 0.5
    s.one(Server(chat("nonsense")), 3, "sb3")
    assert s.progress.calls == [
        ("waiting", 3, "correct", 1.5),
        ("sending", 3, "correct"),
        ("done", 3, "bad_format", 2.0),
    ]


def test_the_last_outcome_is_its_kind_or_else_its_status() -> None:
    s, _ = make()
    s.one(Server(chat("QX-4821")), 1, "sb1")
    assert s.last == "correct"  # a correct answer has no kind
    s.one(Server(chat("QX-0000")), 2, "sb2")
    assert s.last == "absent_code"


def test_the_next_gap_counts_from_this_completion_on_the_monotonic_clock() -> None:
    s, written = make(min_gap_s=1.0)
    s.one(Server(chat("QX-4821")), 1, "sb1")
    assert s.last_done_mono == 50.0
    s.clock.t += 100.0  # wall time jumps; the monotonic clock does not
    s.one(Server(chat("QX-4821")), 2, "sb2")
    assert written[2]["gap_s"] == 1.0
    assert s.clock.mono == 51.0


def test_a_stop_status_names_the_seq_it_came_at() -> None:
    s, written = make()
    with pytest.raises(Stop) as stop:
        s.one(Server(chat("QX-4821", status=429)), 4, "sb4")
    assert (stop.value.reason, stop.value.detail) == ("stop_status", "HTTP 429 at seq 4")
    assert written[1]["http_status"] == 429  # journalled before the stop


def test_consecutive_failures_name_the_seq_of_the_last() -> None:
    s, _ = make(max_consecutive_failures=2)
    failure = Exchange(None, None, "connect_error", "refused", 0.1, False, {})
    s.one(Server(failure), 1, "sb1")
    with pytest.raises(Stop, match="consecutive_failures") as stop:
        s.one(Server(failure), 2, "sb2")
    assert stop.value.detail == "2 protocol failures in a row, the last at seq 2"


def test_a_live_transport_sends_the_package_user_agent_and_no_mock() -> None:
    s, _ = make(base_url="http://127.0.0.1:9/v1", timeout_s=5.0, deadline_s=10.0)
    transport = s.transport()
    try:
        request = transport.build(b"{}").request
        assert request.headers["user-agent"] == f"needlepoint/{needlepoint.__version__}"
        assert request.headers["authorization"] == f"Bearer {KEY}"
        assert str(request.url) == "http://127.0.0.1:9/v1/chat/completions"
        assert transport._watchdog is not None  # only a real connection has a watchdog
    finally:
        transport.close()


def test_a_simulated_transport_points_at_the_reserved_invalid_host() -> None:
    # Should the simulator's mock ever be bypassed, a .invalid host (RFC 2606) cannot resolve:
    # a simulation can never reach a real server.
    s, _ = make(simulation=True, simulate="perfect", timeout_s=5.0, deadline_s=10.0,
                base_url=None, sim_params=None)  # fmt: skip
    s.clock = Clock()
    transport = s.transport()
    try:
        assert transport.url == "http://simulation.invalid/v1/chat/completions"
    finally:
        transport.close()


def _read_all(fd: int) -> str:
    """Everything written to the terminal so far (a pty hands it over write by write)."""
    import select

    chunks = []
    while select.select([fd], [], [], 0.5)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def test_terminal_mode_draws_on_the_process_stderr_and_clears_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A kernel's sys.stderr goes into the notebook, but its fileno() is the terminal's."""
    master, slave = pty.openpty()

    class KernelStream(io.StringIO):  # what ipykernel's OutStream looks like from here
        def fileno(self) -> int:
            return slave

    captured = KernelStream()
    monkeypatch.setattr(sys, "stderr", captured)
    bar = Progress("terminal", total=3, initial=0, label="SIMULATION")
    bar.sending(1, "-")
    bar.done(1, "correct", 20)
    bar.close("complete")
    drawn = _read_all(master)
    os.close(master)
    os.close(slave)
    assert "SIMULATION" in drawn and "seq=1 last=- sending" in drawn  # on the terminal
    assert drawn.rstrip("\r").endswith(" ") and drawn.endswith("\r")  # then cleared
    assert captured.getvalue() == ""  # nothing went into the notebook


def test_terminal_mode_draws_nothing_into_a_log(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open(tmp_path / "log", "w")  # noqa: SIM115
    monkeypatch.setattr(sys, "stderr", log)
    bar = Progress("terminal", total=3, initial=0, label="SIMULATION")
    bar.done(1, "correct", 20)
    bar.close("complete")
    log.close()
    assert (tmp_path / "log").read_text() == "" and bar.mode == "off"


def test_a_stream_without_a_descriptor_falls_back_to_the_real_stderr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert terminal_stream() is sys.__stderr__


def test_redirected_progress_is_plain_lines_with_a_time_to_go_that_counts_the_gaps(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open(tmp_path / "log", "w")  # noqa: SIM115
    monkeypatch.setattr(sys, "stderr", log)
    bar = Progress("auto", total=20, initial=0, label="run")
    assert bar.mode == "lines" and bar.bar is None
    for seq in range(1, 21):
        bar.sending(seq, "-")
        bar.done(seq, "correct", 20)
    bar.close("complete")
    log.close()
    text = (tmp_path / "log").read_text()
    lines = text.splitlines()
    assert "\r" not in text and len(lines) == 11  # every tenth of the run, then the end
    # 18 requests left after the second, each at least its 20 s gap: 6 min or more
    assert lines[0].startswith("run 2/20: seq 2 correct eta ≥6:0")
    assert lines[-2] == "run 20/20: seq 20 correct" and lines[-1] == "run 20/20: complete"


def test_the_time_to_go_is_a_lower_bound_from_latency_and_gap() -> None:
    from needlepoint.run.runner import clock_text

    bar = Progress("off", total=128, initial=0, label="run")
    bar.mode, bar.latencies, bar.n = "auto", [1.0, 3.0], 2
    assert bar.eta(20) == f" eta ≥{clock_text(126 * 22)}" == " eta ≥46:12"
    assert clock_text(3725) == "1:02:05" and clock_text(59.6) == "1:00"
    bar.n = 127  # the last request still counts
    assert bar.eta(20) == " eta ≥0:22"
    bar.n = 128
    assert bar.eta(20) == ""
    bar.n = 2
    bar.mode = "deterministic"  # no times in a deterministic display
    assert bar.eta(20) == ""


def test_an_unknown_progress_mode_is_named_with_the_modes_there_are() -> None:
    from needlepoint.run.runner import PROGRESS_MODES

    with pytest.raises(ValueError) as caught:
        Progress("fancy", total=3, initial=0, label="run")
    assert str(caught.value) == f"progress must be one of {PROGRESS_MODES}"


@pytest.fixture
def tty() -> Iterator[IO[str]]:
    """A pseudo-terminal to write to, closed afterwards even if the test fails. (The test sets
    sys.stderr to it itself: pytest's capture replaces sys.stderr after fixtures are set up.)"""
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w") as stream:
            yield stream
    finally:
        os.close(master)


def test_off_draws_no_bar_even_on_a_terminal(tty: IO[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", tty)
    bar = Progress("off", total=3, initial=0, label="run")
    assert (bar.mode, bar.bar, bar.stream) == ("off", None, None)


def test_auto_on_a_terminal_draws_a_bar_that_stays(
    tty: IO[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stderr", tty)
    bar = Progress("auto", total=3, initial=1, label="run")
    assert bar.mode == "auto" and bar.bar is not None
    # counted in requests, and left on the screen when the run ends
    assert (bar.bar.unit, bar.bar.leave, bar.bar.n, bar.bar.total) == ("req", True, 1, 3)
    # tqdm's own time to go is left out of a live bar: eta() gives one that counts the gaps
    assert bar.bar.bar_format == "{desc} {n_fmt}/{total_fmt} |{bar:24}| {elapsed}{postfix}"
    bar.close("complete")


def test_a_deterministic_bar_draws_every_request_at_a_fixed_width(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A notebook's saved output must be the same bytes on every run: each request redraws the
    # bar (no time-based skipping), at 100 columns whatever the terminal, with no times in it.
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    bar = Progress("deterministic", total=3, initial=0, label="run").bar
    assert (bar.mininterval, bar.miniters, bar.dynamic_miniters) == (0, 1, False)
    assert (bar.ncols, bar.dynamic_ncols) == (100, False)
    assert bar.bar_format == "{desc} {n_fmt}/{total_fmt} |{bar:24}|{postfix}"
    assert (bar.unit, bar.leave) == ("req", True)
    bar.close()


@pytest.mark.parametrize(("total", "every"), [(15, 1), (20, 2), (5, 1), (128, 12)])
def test_plain_lines_come_every_whole_tenth_of_the_run(
    tmp_path, monkeypatch: pytest.MonkeyPatch, total: int, every: int
) -> None:
    with open(tmp_path / "log", "w") as log:
        monkeypatch.setattr(sys, "stderr", log)
        bar = Progress("auto", total=total, initial=0, label="run")
    assert bar.mode == "lines" and bar.every == every and isinstance(bar.every, int)


@pytest.mark.parametrize("mode", ["faulty", "perfect"])
def test_run_json_names_the_fault_cycle_only_of_a_faulty_simulation_and_the_prices_given(
    reference_dir: Path, tmp_path: Path, mode: str
) -> None:
    """A faulty simulation's failures follow a fixed cycle, recorded in run.json so a reader
    can tell its failures were injected; no other run names one."""
    from needlepoint.run.folder import read_run_record
    from needlepoint.run.options import RunOptions
    from needlepoint.run.runner import run_protocol
    from needlepoint.run.simulate import FAULT_CYCLE

    run = tmp_path / "run"
    rates = {"input_rate": 0.5, "output_rate": 1.5, "cost_cap": 2.0}
    run_protocol(reference_dir, run, RunOptions(allow=2, simulate=mode, progress="off", **rates))
    record = read_run_record(run)
    assert record.simulate is not None and record.simulate.mode == mode
    assert record.simulate.fault_cycle == (FAULT_CYCLE if mode == "faulty" else None)
    # and the prices the run was given, each in its own field
    assert (record.cost.input_rate, record.cost.output_rate, record.cost.cap) == (0.5, 1.5, 2.0)


def test_the_terminal_stream_is_utf8_line_buffered_and_never_raises_on_a_bad_character(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A progress line names labels and outcomes a user chose: an unencodable character must
    not crash a run, and each line must reach the terminal when it is written."""
    read_fd, write_fd = os.pipe()

    class KernelStream(io.StringIO):
        def fileno(self) -> int:
            return write_fd

    monkeypatch.setattr(sys, "stderr", KernelStream())
    stream = terminal_stream()
    try:
        assert (stream.encoding, stream.errors, stream.line_buffering) == ("utf-8", "replace", True)
        stream.write("é \udcff\n")  # a lone surrogate: replaced, not raised
        assert os.read(read_fd, 100) == "é ?\n".encode()  # flushed at the newline
    finally:
        stream.close()
        os.close(read_fd)
        os.close(write_fd)


def test_a_terminal_is_one_and_a_file_or_a_closed_stream_is_not(tmp_path: Path) -> None:
    from needlepoint.run.runner import is_terminal

    master, slave = pty.openpty()
    try:
        with open(slave, "w", closefd=False) as tty:
            assert is_terminal(tty) is True
    finally:
        os.close(master)
        os.close(slave)
    closed = open(tmp_path / "log", "w")  # noqa: SIM115
    closed.close()
    assert is_terminal(io.StringIO()) is False
    assert is_terminal(closed) is False  # isatty() raises ValueError on a closed file
    assert is_terminal(object()) is False


def test_a_duration_under_half_a_second_or_negative_reads_zero() -> None:
    from needlepoint.run.runner import clock_text

    assert clock_text(0.4) == "0:00" and clock_text(-5) == "0:00" and clock_text(0.6) == "0:01"


def test_a_resume_names_a_changed_switch_yes_or_no_and_a_changed_text_quoted(
    reference_dir: Path, tmp_path: Path
) -> None:
    from needlepoint.run.folder import read_run_record
    from needlepoint.run.runner import resume_changes

    run = tmp_path / "run"
    run_protocol(reference_dir, run, RunOptions(allow=1, simulate="perfect", progress="off"))
    saved = dataclasses.replace(read_run_record(run), no_key=False)
    wanted = dataclasses.replace(saved, no_key=True, self_hosted="gpu-box", timeout_s=7.5)
    assert resume_changes(saved, wanted) == [
        f"--timeout-s 7.5 (run.json: {saved.timeout_s:g})",
        "--no-key yes (run.json: no)",
        "--self-hosted 'gpu-box' (run.json: none)",
    ]
    assert resume_changes(wanted, saved)[1] == "--no-key no (run.json: yes)"
    # run metadata: a key on either side, or a value changed, is named (sorted)
    tagged = dataclasses.replace(saved, extra={"note": "a", "gpu": "h100", "same": 1})
    retagged = dataclasses.replace(saved, extra={"note": "b", "host": "x", "same": 1})
    assert resume_changes(tagged, retagged) == [
        "run metadata gpu, host, note (differs from run.json's extra)"
    ]


class Interrupting(Server):
    """A transport the user interrupts mid-request, after the answer began to arrive or not."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__()
        self.exc = exc

    def send(self, outgoing: Any) -> Exchange:
        raise self.exc


def test_ctrl_c_after_the_answer_began_journals_what_arrived_as_the_outcome() -> None:
    from needlepoint.run.transport import InterruptedExchange

    s, written = make()
    with pytest.raises(KeyboardInterrupt):
        s.one(Interrupting(InterruptedExchange(chat("QX-4821"))), 3, "sb3")
    assert [(r["type"], r["seq"]) for r in written] == [("attempt", 3), ("outcome", 3)]
    assert written[1]["http_status"] == 200 and json.loads(written[1]["body"])["model"] == "m"
    assert written[1]["classification"]["status"] == "correct"  # the answer is kept whole


def test_ctrl_c_before_any_answer_journals_an_indeterminate_interruption() -> None:
    s, written = make()
    with pytest.raises(KeyboardInterrupt):
        s.one(Interrupting(KeyboardInterrupt()), 2, "sb2")
    assert [(r["type"], r["seq"]) for r in written] == [("attempt", 2), ("outcome", 2)]
    assert written[1]["classification"]["kind"] == "indeterminate_interrupted"
    assert written[1]["error_detail"] == "KeyboardInterrupt while the request was in flight"


def test_a_resume_shows_a_value_that_is_not_text_as_it_prints() -> None:
    from needlepoint.run.runner import _show

    assert _show(Path("runs") / "a") == str(Path("runs") / "a")  # not PosixPath('runs/a')
    assert (_show("runs/a"), _show(3), _show(2.50), _show(None)) == ("'runs/a'", "3", "2.5", "none")


def _summary(**kw: Any) -> Any:
    from needlepoint.run.runner import RunSummary

    fields: dict[str, Any] = {
        "run_dir": Path("run"), "simulation": False, "stop_reason": "complete",
        "stop_detail": "every planned request has an outcome", "allow": 8,
        "attempts_total": 8, "attempts_this_session": 3, "counts": {}, "cost_spent": None,
        "journal_sha256": "f" * 64,
    }  # fmt: skip
    return RunSummary(**{**fields, **kw})


def test_a_session_summary_says_what_ended_it_what_came_back_and_what_it_cost() -> None:
    live = _summary(counts={"error": 1, "correct": 7}, cost_spent=0.0123456)
    assert live.lines() == [
        "stopped: complete: every planned request has an outcome",
        "attempts: 8 of 8 allowed (3 this session); outcomes: correct 7, error 1",
        f"cost: 0.012346; journal sha256 {'f' * 64}",
    ]
    nothing = _summary(simulation=True, attempts_total=0, attempts_this_session=0).lines()
    assert nothing[0].startswith("SIMULATION - not a model result. stopped: complete")
    assert nothing[1].endswith("outcomes: none") and nothing[2].startswith("cost: unknown;")


def test_only_a_spent_allowance_with_requests_left_says_how_to_continue() -> None:
    from needlepoint.run.runner import continue_hint

    spent = _summary(stop_reason="allowance_spent", stop_detail="8 of 8", unattempted=4)
    assert spent.lines()[-1] == continue_hint(8, 4)
    assert len(_summary(stop_reason="allowance_spent", stop_detail="8 of 8").lines()) == 3
    assert len(_summary(unattempted=4).lines()) == 3  # stopped otherwise: no hint


def test_the_wait_shows_on_a_live_bar_only() -> None:
    shown: list[str] = []
    bar = Progress("off", total=4, initial=0, label="run")
    bar.bar = SimpleNamespace(set_postfix_str=shown.append)
    bar.mode = "terminal"
    bar.waiting(2, "correct", 12.4)
    assert shown == ["seq=2 last=correct wait=12s"]
    bar.mode = "deterministic"
    bar.waiting(3, "correct", 12.4)
    assert shown == ["seq=2 last=correct wait=12s"]  # a countdown is not deterministic
    # Sending, too, shows only on a live bar, and with no bar (a log's lines) not at all.
    bar.sending(3, "correct")
    bar.mode = "auto"
    bar.sending(4, "correct")
    assert shown[1:] == ["seq=4 last=correct sending"]
    bar.bar = None
    bar.sending(5, "correct")  # nothing to draw on: no error
    assert bar.sent_at is not None


def test_a_resume_after_the_clock_stepped_back_says_so_once_and_counts_no_time_since() -> None:
    notes: list[str] = []
    state = state_of(outcome(1, 0.0, time="1970-01-01T00:01:40Z"))  # t = 100
    s = Session(settings(min_gap_s=20.0), SimpleNamespace(state=state), notes.append)  # type: ignore[arg-type]
    s.clock = FakeClock(now=40.0, mono=5.0)
    assert s.since_done() == 0.0
    s.clock.mono = 7.5
    assert s.since_done() == 2.5  # from the anchor on, the monotonic clock counts
    assert len(notes) == 1 and notes[0].startswith("clock: the wall clock reads 60.000 s before")
    assert notes[0].endswith("this session waits the whole gap of 20 s and no longer")


def test_what_a_resumed_session_says_reaches_the_user_and_its_summary_in_order(
    reference_dir: Path, tmp_path: Path, server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session's own lines (here the clock step) go to notify as they happen and into the
    # summary's notes after the resume line, the same lines in the same order.
    run = tmp_path / "run"
    live(reference_dir, run, server, allow=1, min_gap_s=2.0)
    SteppedClock(-600.0).install(monkeypatch)
    told: list[str] = []
    summary = live(reference_dir, run, server, allow=2, min_gap_s=2.0, notify=told.append)
    assert told == list(summary.notes) and len(told) == 2
    assert told[0].startswith("resuming ") and "stepped back" in told[1]


def test_a_settings_warning_goes_to_notify_or_else_to_stderr(
    reference_dir: Path,
    tmp_path: Path,
    server: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")  # a short test key, accepted for a loopback server
    with open(tmp_path / "log", "w") as log, monkeypatch.context() as m:  # block-buffered,
        m.setattr(sys, "stderr", log)  # as a redirect is
        live(reference_dir, tmp_path / "a", server, allow=1)
        warned = (tmp_path / "log").read_text().splitlines()  # at once, not at exit
    assert len(warned) == 1 and warned[0].startswith(f"warning: the key in {KEY_ENV} is 7 ")
    told: list[str] = []
    live(reference_dir, tmp_path / "b", server, allow=1, notify=told.append)
    assert told == warned and capsys.readouterr().err == ""


def test_the_summarys_cost_keeps_twelve_decimal_places(
    reference_dir: Path, tmp_path: Path, server: Any
) -> None:
    # Each cost is rounded to 12 places; their float sum can carry a 13th (three costs of
    # 1,035.0617... each add up to 3,105.1851883291856), which the summary drops.
    run = tmp_path / "run"
    rate = 987654.3219876543
    summary = live(reference_dir, run, server, allow=3, input_rate=rate, output_rate=0.0)
    spent = sum(o["cost"] for o in of_type(run, "outcome"))
    assert summary.cost_spent == round(spent, 12) != round(spent, 13)


def test_a_resume_on_a_clock_that_went_forward_notifies_nothing() -> None:
    notes: list[str] = []
    state = state_of(outcome(1, 0.0, time="1970-01-01T00:01:40Z"))
    s = Session(settings(min_gap_s=20.0), SimpleNamespace(state=state), notes.append)  # type: ignore[arg-type]
    s.clock = FakeClock(now=130.0, mono=5.0)
    assert s.since_done() == 30.0 and notes == []


def test_each_progress_line_reaches_a_redirected_log_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user tails the log of a long run: a line held in a buffer is a run that looks hung."""
    log = open(tmp_path / "log", "w")  # noqa: SIM115 (block-buffered, as a redirect is)
    monkeypatch.setattr(sys, "stderr", log)
    bar = Progress("auto", total=2, initial=0, label="run")
    bar.done(1, "correct", 0)
    assert (tmp_path / "log").read_text() == "run 1/2: seq 1 correct\n"
    bar.close("interrupted")
    assert (tmp_path / "log").read_text().endswith("\nrun 1/2: interrupted\n")
    log.close()


class RecordingBar:
    """A stand-in for the tqdm bar: every call, with its arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kw: self.calls.append((name, args, kw))


def test_a_live_bar_moves_one_per_outcome_with_the_time_to_go_and_ends_on_the_reason() -> None:
    bar = Progress("off", total=4, initial=0, label="run")
    drawn = RecordingBar()
    bar.bar, bar.mode = drawn, "terminal"
    bar.sending(1, "-")
    bar.latencies = [2.0]
    bar.sent_at = None
    bar.done(1, "correct", 10)
    # refresh=False: the update that follows redraws once, not twice
    assert drawn.calls[1:] == [
        ("set_postfix_str", ("seq=1 last=correct wait=10s eta ≥0:36",), {"refresh": False}),
        ("update", (1,), {}),
    ]
    bar.close("complete")
    assert drawn.calls[3:] == [
        ("set_postfix_str", ("complete",), {"refresh": False}),
        ("close", (), {}),
    ]
    assert bar.bar is None
    bar.done(2, "correct", 10)  # after the close: nothing to draw on, and no error
    assert len(drawn.calls) == 5


def test_closing_plain_lines_ends_them_and_closes_the_terminal_stream_it_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open(tmp_path / "log", "w")  # noqa: SIM115
    monkeypatch.setattr(sys, "stderr", log)
    bar = Progress("auto", total=2, initial=0, label="run")
    bar.close("stopped")
    bar.close("again")  # a second close prints nothing more
    assert bar.mode == "off"
    log.close()
    assert (tmp_path / "log").read_text() == "run 0/2: stopped\n"

    class Failing(io.StringIO):
        def close(self) -> None:
            raise OSError("the terminal went away")

    opened = io.StringIO()
    bar.stream = opened
    bar.close("")
    assert opened.closed and bar.stream is None  # the descriptor it duplicated is released
    bar.stream = Failing()
    bar.close("")  # a terminal that went away does not fail the run's end
    assert bar.stream is None
