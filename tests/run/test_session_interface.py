"""The session's stop rules, gap and clock pieces at their interface, on stand-in settings."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import needlepoint
from needlepoint.design.prepared import load_prepared
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import sha256_hex
from needlepoint.run.clock import SIM_EPOCH, RealClock, SimClock
from needlepoint.run.journal import Journal, JournalState
from needlepoint.run.loop import run_protocol
from needlepoint.run.options import RunOptions
from needlepoint.run.scoring import PROTOCOL_FAILURE
from needlepoint.run.session import Session, Stop


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


def test_the_progress_display_closes_on_the_stop_reason(reference_dir, tmp_path, monkeypatch):
    from needlepoint.run.progress import Progress

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
