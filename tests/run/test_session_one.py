"""One request of the session loop (``Session.one``) and its transport, at their interface.

The whole-session tests (test_session_interface.py) run the simulator, which never echoes a key,
never uses a protocol's own unknown token and never shows progress; these drive ``one`` with a
stand-in transport so that each of those paths is seen.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

import needlepoint
from needlepoint.run.journal import JournalState
from needlepoint.run.scoring import classify_safely
from needlepoint.run.session import Session, Stop
from needlepoint.run.transport import Exchange

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


class Shown:
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
    s.clock, s.progress = Clock(), Shown()
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
    assert outcome["classification"] == stored.to_json()


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
