"""Hostile runs, third round: clocks, order, and what arrived before an interrupt.

- A resume after the wall clock stepped back waits at most the gap, and says so (class 6).
- ``audit-run`` refuses a journal re-chained with its attempts in another order, naming the
  first seq out of plan order (class 7).
- Ctrl-C after a whole close-delimited answer arrived, before the connection closed, keeps its
  status, headers and body, as a deadline in the same state does (class 8).
"""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.fuzz import SMALL
from support.mutations import rechain
from support.rawserver import raw_server
from support.runner import KEY_ENV, SENTINEL, SteppedClock, live, of_type, records, server_for

from needlepoint.design.prepared import prepare
from needlepoint.run.audit import audit_run
from needlepoint.run.records import decode_body


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, SENTINEL)
    return SENTINEL


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("small")
    (root / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    return prepare(root / "prepared", root / "small.json")


# Class 6: the gap across sessions against a wall clock stepped back or forward.
@pytest.mark.parametrize("step", [-600.0, -1.5, 600.0])
def test_a_resume_after_a_clock_step_waits_at_most_the_gap_and_says_so(
    small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: float
) -> None:
    run = tmp_path / "run"
    gap = 2.0
    with server_for(small) as server:
        live(small, run, server, allow=1, min_gap_s=gap)
        stepped = SteppedClock(step)
        stepped.install(monkeypatch)
        summary = live(small, run, server, allow=2, min_gap_s=gap)
    monkeypatch.undo()
    waited = sum(stepped.sleeps)
    assert waited <= gap + 1e-6, f"waited {waited} s for a gap of {gap} s"
    if step < 0:
        assert waited >= gap - 0.5, "the whole gap still counts from the resume"
        assert any("stepped back" in n and f"{gap:g} s" in n for n in summary.notes), summary
    else:
        assert waited == 0 and not any("stepped back" in n for n in summary.notes)
    second = of_type(run, "attempt")[1]
    assert second["gap_s"] >= gap - 1e-6
    assert audit_run(run).ok, audit_run(run).problems


def _reorder(run: Path, order: list[int]) -> None:
    """A forger's journal: the attempt/outcome pairs of the first session in ``order``, with n,
    prev, head and the context manifest recomputed."""
    lines = (run / "journal.jsonl").read_bytes().splitlines()
    parsed = [json.loads(x) for x in lines]
    pairs: dict[int, list[bytes]] = {}
    head, tail = [], []
    for raw, rec in zip(lines, parsed, strict=True):
        if rec["type"] in ("attempt", "outcome"):
            pairs.setdefault(rec["seq"], []).append(raw)
        elif pairs:
            tail.append(raw)
        else:
            head.append(raw)
    body = [x for seq in order for x in pairs[seq]]
    (run / "journal.jsonl").write_bytes(b"".join(x + b"\n" for x in [*head, *body, *tail]))
    rechain(run / "journal.jsonl")
    headrec = json.loads((run / "journal.head.json").read_text())
    context = json.loads((run / "context_manifest.json").read_text())
    by_seq = {e["seq"]: e for e in context["sent"]}
    context["sent"] = [by_seq[s] for s in order]
    context["journal_records"], context["journal_sha256"] = headrec["records"], headrec["sha256"]
    (run / "context_manifest.json").write_text(json.dumps(context), encoding="utf-8")


# Class 7: a journal re-chained with its records in another order.
@pytest.mark.parametrize(
    ("order", "first"),
    [([1, 2, 4, 3, 5, 6], 4), ([6, 5, 4, 3, 2, 1], 6), ([1, 3, 2, 4, 5, 6], 3)],
)
def test_audit_run_names_the_first_seq_sent_out_of_plan_order(
    tmp_path: Path, order: list[int], first: int
) -> None:
    from support.fuzz import run_cli

    root = tmp_path
    (root / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    prepared = prepare(root / "prepared", root / "small.json")
    run = root / "run"
    argv = ["run", str(prepared), "--allow", "6", "--run-dir", str(run), "--simulate", "perfect"]
    assert run_cli([*argv, "--no-progress"])[0] == 0
    plan = [
        json.loads(x)["seq"]
        for x in (run / "journal.jsonl").read_text().splitlines()
        if '"attempt"' in x
    ]
    assert audit_run(run).ok
    _reorder(run, [plan[i - 1] for i in order])
    report = audit_run(run)
    problems = [p for p in report.problems if "out of plan order" in p]
    assert len(problems) == 1, report.problems
    assert f"seq {plan[first - 1]} was sent out of plan order" in problems[0]
    assert "hash" not in " ".join(report.problems), report.problems  # the forgery is consistent


# Class 8: Ctrl-C lands after the whole answer arrived, before the connection closed.
@pytest.mark.usefixtures("hears_sigint")
def test_an_interrupt_after_the_answer_arrived_keeps_status_headers_and_body(
    small: Path, tmp_path: Path
) -> None:
    body = json.dumps(
        {
            "model": "agnes-3.0-flash",
            "choices": [
                {"finish_reason": "stop", "message": {"role": "assistant", "content": "UNKNOWN"}}
            ],
        }
    ).encode()
    main = threading.main_thread().ident
    assert main is not None

    def answer(conn: socket.socket) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Request-Id: r-1\r\n"
        conn.sendall(head + b"Connection: close\r\n\r\n" + body)
        time.sleep(0.5)  # the answer is whole; the connection is not closed yet
        signal.pthread_kill(main, signal.SIGINT)
        time.sleep(2)

    run = tmp_path / "run"
    with raw_server(answer) as url, pytest.raises(KeyboardInterrupt):
        live(small, run, SimpleNamespace(base_url=url), allow=2, timeout_s=30)
    outcome = of_type(run, "outcome")[0]
    assert outcome["classification"]["kind"] == "indeterminate_interrupted"
    assert outcome["http_status"] == 200
    assert decode_body(outcome) == body
    assert outcome["headers"].get("content-type") == "application/json"
    assert [r["type"] for r in records(run)][-1] == "stop"
    assert audit_run(run).ok, audit_run(run).problems
