"""The runner against a real loopback HTTP server: classification, stop rules, no retries,
spacing, the journal, allowance across resumes, cost caps, and the key kept out of every file."""

from __future__ import annotations

import itertools
import json
import shutil

import pytest
from support.runner import KEY_ENV, SENTINEL, TIMEOUT_S, kinds, live, of_type, records, server_for

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import sha256_hex
from needlepoint.run.audit import audit_run
from needlepoint.run.loop import run_protocol
from needlepoint.run.options import RunOptions


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


def test_unknown_cost_with_a_cap_stops_before_the_next_request(reference_dir, tmp_path, server):
    run = tmp_path / "run"
    rates = {"input_rate": 1.0, "output_rate": 1.0, "cost_cap": 100.0}
    server.script(["normal", "no_usage", "normal"])
    summary = live(reference_dir, run, server, allow=10, **rates)
    assert summary.stop_reason == "cost_unknown" and "seq 2" in summary.stop_detail
    assert server.count == 2 and summary.cost_spent is None
    with pytest.raises(NeedlepointError, match="cost of seq 2 is unknown"):
        live(reference_dir, run, server, allow=10, **rates)
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
