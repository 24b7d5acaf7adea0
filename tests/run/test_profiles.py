"""Body profiles at run time: where the answer is, reasoning never scored, the frozen endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.runner import KEY_ENV, SENTINEL, kinds, live, of_type, server_for

from needlepoint.design.prepared import prepare
from needlepoint.run.audit import audit_run
from needlepoint.run.interpret import reasoning_tokens, split_think
from needlepoint.run.records import decode_body
from needlepoint.run.results import derive, write_results
from needlepoint.run.scoring import classify

KEY = {
    "seq": 3,
    "expected": "OM-3642",
    "codes_present": ["AB-1111", "OM-3642"],
    "near_codes": ["AB-1111"],
}


def _body(choice: dict, **extra: object) -> bytes:
    return json.dumps({"model": "m", "choices": [choice], **extra}).encode()


def _classify(choice: dict, profile: str = "chat") -> tuple[str, str, str]:
    c = classify(
        http_status=200,
        transport_error=None,
        body=_body(choice),
        answer=KEY,
        model="m",
        profile=profile,
    )
    return c.status, c.kind, c.response_text


def _chat(content: object, finish: str = "stop", **message: object) -> dict:
    return {
        "finish_reason": finish,
        "message": {"role": "assistant", "content": content, **message},
    }


# --- classification --------------------------------------------------------------------------


def test_completion_answers_are_in_text():
    assert _classify({"finish_reason": "stop", "text": " OM-3642"}, "completion") == (
        "correct",
        "",
        " OM-3642",
    )
    assert _classify({"finish_reason": "stop", "text": "AB-1111"}, "completion")[1] == (
        "near_distractor_code"
    )
    # A chat-shaped answer to a completion request has no text: never read from elsewhere.
    assert _classify(_chat("OM-3642"), "completion")[:2] == ("protocol_failure", "content_missing")
    # And a completion-shaped answer to a chat request has no message.
    assert _classify({"finish_reason": "stop", "text": "OM-3642"})[1] == "role"
    assert _classify({"finish_reason": "stop", "text": 7}, "completion")[1] == "content_not_string"
    assert _classify({"finish_reason": "stop", "text": "  "}, "completion")[1] == "content_empty"


@pytest.mark.parametrize("profile", ["chat", "reasoning"])
def test_a_leading_think_block_is_never_scored(profile):
    assert _classify(_chat("<think>AB-1111?</think>\nOM-3642"), profile) == (
        "correct",
        "",
        "\nOM-3642",
    )
    # Only a *leading* block is reasoning: a later one is part of the answer (extra text).
    assert _classify(_chat("OM-3642 <think>x</think>"), profile)[1] == "extra_text"
    # The code inside the reasoning does not count when the final content is empty.
    assert _classify(_chat("<think>OM-3642</think>  "), profile)[:2] == (
        "protocol_failure",
        "content_empty",
    )


def test_reasoning_content_is_never_scored():
    assert _classify(_chat("OM-3642", reasoning_content="maybe AB-1111"))[:2] == ("correct", "")
    assert _classify(_chat("", reasoning_content="OM-3642"))[1] == "content_empty"


@pytest.mark.parametrize(
    "choice",
    [
        _chat(""),
        _chat(None),
        _chat(" \n"),
        _chat("<think>still thinking when the budget ran out"),
        _chat("<think>done</think>"),
        {"finish_reason": "length", "text": ""},
    ],
    ids=["empty", "null", "blank", "unclosed-think", "closed-think", "completion"],
)
def test_length_with_no_answer_is_its_own_failure(choice):
    choice = {**choice, "finish_reason": "length"}
    profile = "completion" if "text" in choice else "reasoning"
    assert _classify(choice, profile)[:2] == ("protocol_failure", "length_empty")


def test_length_with_an_answer_is_still_finish_reason():
    assert _classify(_chat("OM-36", "length"))[:2] == ("protocol_failure", "finish_reason")
    assert _classify(_chat([1], "length"))[:2] == ("protocol_failure", "finish_reason")
    assert _classify(_chat("<think>x</think>OM", "length"))[1:] == ("finish_reason", "OM")


def test_split_think_and_reasoning_tokens():
    assert split_think("  <think>a</think>b") == ("<think>a</think>", "b")
    assert split_think("<think>a") == ("<think>a", "")
    assert split_think("a<think>b</think>") == ("", "a<think>b</think>")
    assert reasoning_tokens({"completion_tokens_details": {"reasoning_tokens": 12}}) == 12
    for usage in (None, {}, {"completion_tokens_details": None}, {"completion_tokens_details": {}}):
        assert reasoning_tokens(usage) is None
    assert reasoning_tokens({"completion_tokens_details": {"reasoning_tokens": True}}) is None


# --- runs against the loopback server --------------------------------------------------------


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SENTINEL)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("profiles")
    path = root / "small.json"
    override = {"version": 902, "description": "small", "cases": 4, "lengths": [12]}
    path.write_text(json.dumps(override))
    return path


def test_completion_run_posts_prompts_to_completions(small, tmp_path):
    prepared = prepare(tmp_path / "p", small, model="base-x", body_profile="completion")
    with server_for(prepared) as server:
        summary = live(prepared, tmp_path / "run", server, allow=32, model="base-x")
        paths = {r.path for r in server.requests}
    assert summary.stop_reason == "complete" and summary.counts == {"correct": 32}
    assert paths == {"/v1/completions"}
    first = of_type(tmp_path / "run", "outcome")[0]
    assert json.loads(decode_body(first))["object"] == "text_completion"
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["body_profile"] == "completion"
    assert (
        run["design_fingerprint"]
        == json.loads((prepared / "manifest.json").read_text())["design_fingerprint"]
    )
    assert audit_run(tmp_path / "run").ok


def test_reasoning_run_keeps_reasoning_out_of_the_score(small, tmp_path):
    prepared = prepare(tmp_path / "p", small, model="o-x", body_profile="reasoning")
    run_dir = tmp_path / "run"
    with server_for(prepared) as server:
        server.script(["think:AB-0000 looks close", "reasoning:let me see", "length_empty"])
        summary = live(prepared, run_dir, server, allow=3, model="o-x")
        paths = {r.path for r in server.requests}
    assert summary.stop_reason == "allowance_spent" and paths == {"/v1/chat/completions"}
    got = [k for _, _, k in kinds(run_dir)]
    assert got == ["", "", "length_empty"]
    bodies = [decode_body(r).decode() for r in of_type(run_dir, "outcome")]
    assert "AB-0000 looks close" in bodies[0] and "let me see" in bodies[1]  # kept in the journal
    write_results(run_dir)
    rows = derive(run_dir).rows
    assert [r["reasoning_tokens"] for r in rows[:4]] == ["2", "2", "3", ""]
    assert rows[0]["response_text"].strip() == rows[0]["response_text"][1:]  # after </think>
    report = audit_run(run_dir)
    assert report.ok, report.problems
    assert report.checked["run.json body_profile"] == 1


def test_audit_run_reclassifies_by_the_frozen_profile(small, tmp_path):
    prepared = prepare(tmp_path / "p", small, model="base-x", body_profile="completion")
    run_dir = tmp_path / "run"
    with server_for(prepared) as server:
        live(prepared, run_dir, server, allow=2, model="base-x")
    run_json = run_dir / "run.json"
    record = json.loads(run_json.read_text())
    record["body_profile"] = "chat"  # claims another profile
    run_json.write_text(json.dumps(record))
    problems = audit_run(run_dir).problems
    assert any("body_profile differs from the prepared protocol's" in p for p in problems)
