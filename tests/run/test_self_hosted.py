"""A server you own: no key (``--no-key``), a short test key with a warning, and
``check-endpoint --tokens`` counting the longest prompt with the server's own tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fuzz import SMALL, run_cli
from support.loopback import LoopbackServer, fake_tokens, render_template
from support.runner import KEY_ENV, MODEL, server_for

from needlepoint.design.prepared import load_prepared, prepare
from needlepoint.errors import NeedlepointError
from needlepoint.run.audit import audit_run
from needlepoint.run.endpoint import longest_request
from needlepoint.run.options import RunOptions, check_options


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("self-hosted")
    (root / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    return prepare(root / "prepared", root / "small.json")


def _run_argv(prepared: Path, run: Path, url: str, *extra: str) -> list[str]:
    argv = ["run", str(prepared), "--allow", "4", "--run-dir", str(run), "--base-url", url]
    argv += ["--model", MODEL, "--min-gap-s", "0", "--override-reason", "loopback test server"]
    return [*argv, "--timeout-s", "5", "--no-progress", *extra]


def test_a_loopback_server_runs_without_a_key(small: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    with server_for(small) as server:
        code, _, err = run_cli(_run_argv(small, run, server.base_url, "--no-key"))
        sent = list(server.requests)
    assert code == 0, err
    assert len(sent) == 4 and all(r.authorization == "" for r in sent), "no Authorization header"
    record = json.loads((run / "run.json").read_text())
    assert record["no_key"] is True and record["api_key_env"] is None
    assert "self_hosted" not in record
    assert audit_run(run).ok


def test_a_run_with_a_key_records_no_no_key_field(
    small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-a-long-enough-key")
    run = tmp_path / "run"
    with server_for(small) as server:
        code, _, err = run_cli(_run_argv(small, run, server.base_url, "--api-key-env", KEY_ENV))
    assert code == 0, err
    record = json.loads((run / "run.json").read_text())
    assert "no_key" not in record and "concurrency" not in record


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"base_url": "https://api.example/v1", "no_key": True}, "not a loopback host"),
        ({"base_url": "http://10.0.0.5:8000/v1", "no_key": True}, "--self-hosted 10.0.0.5"),
        (
            {"base_url": "http://127.0.0.1:8000/v1", "no_key": True, "api_key_env": KEY_ENV},
            "not both",
        ),
        (
            {"base_url": "http://10.0.0.5:8000/v1", "no_key": True, "self_hosted": "10.0.0.6"},
            "does not name the host",
        ),
        ({"simulate": "perfect", "no_key": True}, "drop --base-url"),
    ],
)
def test_no_key_is_refused_where_it_does_not_belong(options: dict, said: str) -> None:
    with pytest.raises(NeedlepointError, match=said):
        check_options(RunOptions(allow=4, model=MODEL, **options))


def test_a_named_self_hosted_host_may_run_without_a_key_even_over_plain_http(
    small: Path, tmp_path: Path
) -> None:
    # No key travels, so plain http to a named LAN host needs no --allow-insecure-http.
    o = RunOptions(
        allow=4,
        base_url="http://GPU-box.lan:8000/v1",
        model=MODEL,
        no_key=True,
        self_hosted="gpu-box.lan",
    )
    assert check_options(o).no_key
    # The record names the host; tested through a loopback host named explicitly.
    run = tmp_path / "run"
    with server_for(small) as server:
        argv = _run_argv(small, run, server.base_url, "--no-key", "--self-hosted", "127.0.0.1")
        code, _, err = run_cli(argv)
    assert code == 0, err
    assert json.loads((run / "run.json").read_text())["self_hosted"] == "127.0.0.1"


def test_a_short_test_key_is_accepted_for_a_server_you_own_with_one_warning(
    small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    run = tmp_path / "run"
    with server_for(small) as server:
        code, out, err = run_cli(_run_argv(small, run, server.base_url, "--api-key-env", KEY_ENV))
        sent = list(server.requests)
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: the key in {KEY_ENV} is 7 characters, shorter than 8: accepted as a test key "
        "for the self-hosted server 127.0.0.1; it is still redacted wherever it appears in a "
        "record"
    ]
    assert "sk-test" not in out + err
    assert all(r.authorization == "Bearer sk-test" for r in sent)


@pytest.mark.parametrize(
    ("key", "url", "said"),
    [
        ("sk-test", "https://api.example/v1", "shorter than 8 characters"),
        ("abc", "http://127.0.0.1:9/v1", "shorter than 4 characters"),
        ("sk test", "http://127.0.0.1:9/v1", "whitespace"),
        ("sk-t\u00e9st", "http://127.0.0.1:9/v1", "not ASCII"),
    ],
)
def test_short_or_bad_keys_are_still_refused(
    monkeypatch: pytest.MonkeyPatch, key: str, url: str, said: str
) -> None:
    monkeypatch.setenv(KEY_ENV, key)
    with pytest.raises(NeedlepointError, match=said) as refused:
        check_options(RunOptions(allow=4, base_url=url, model=MODEL, api_key_env=KEY_ENV))
    assert key not in str(refused.value)


def _check(*argv: str) -> tuple[int, list[str], str]:
    code, out, err = run_cli(["check-endpoint", *argv])
    return code, out.splitlines(), err


def test_check_endpoint_without_a_key_and_with_a_short_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with LoopbackServer(models=[MODEL]) as server:
        code, lines, err = _check("--base-url", server.base_url, "--model", MODEL, "--no-key")
        assert code == 0, err
        assert lines[2] == "ok    key: none sent (--no-key: a server you own)"
        monkeypatch.setenv(KEY_ENV, "EMPTY")
        code, lines, err = _check(
            "--base-url", server.base_url, "--model", MODEL, "--api-key-env", KEY_ENV
        )
        assert code == 0, err
        assert lines[2].startswith(f"ok    key: {KEY_ENV} is set (5 characters); warning: ")
    code, _, err = _check("--base-url", "https://api.example/v1", "--model", MODEL, "--no-key")
    assert code == 2 and "not a loopback host" in err


def _expected_count(prepared: Path) -> tuple[int, int, int]:
    """(seq, prompt tokens by the stand-in tokenizer, max_tokens) of the longest request."""
    seq, frozen = longest_request(load_prepared(prepared))
    body = json.loads(frozen)
    return seq, fake_tokens(render_template(body["messages"])), body["max_tokens"]


@pytest.mark.parametrize("tokenizer", ["vllm", "llama.cpp"])
def test_tokens_counts_the_longest_request_and_says_it_fits(small: Path, tokenizer: str) -> None:
    seq, count, budget = _expected_count(small)
    need = count + budget
    with LoopbackServer(models=[MODEL], tokenizer=tokenizer, window=need) as server:
        code, lines, err = _check(str(small), "--base-url", server.base_url, "--no-key", "--tokens")
        sent = [(r.mode, r.path) for r in server.requests]
    assert code == 0, err
    source = "vLLM" if tokenizer == "vllm" else "llama.cpp"
    assert lines[-2] == (
        f"ok    tokens: seq {seq}, the longest request: {count} prompt tokens ({source} "
        f"/tokenize) + {budget} max_tokens = {need}, fits the {need}-token window (no "
        "completion sent)"
    )
    assert all(path != "/v1/chat/completions" for _, path in sent), "no completion was sent"
    assert lines[0] == (
        f"check-endpoint {server.base_url} (the longest request's prompt is tokenized, no "
        "completion is sent; nothing is written)"
    )
    assert ("tokenize", "/tokenize") in sent


def test_tokens_says_when_the_longest_request_does_not_fit(small: Path) -> None:
    seq, count, budget = _expected_count(small)
    with LoopbackServer(models=[MODEL], tokenizer="vllm", window=count + budget - 1) as server:
        code, lines, _ = _check(str(small), "--base-url", server.base_url, "--no-key", "--tokens")
    assert code == 1
    assert lines[-2].startswith(f"FAIL  tokens: seq {seq}, the longest request: {count} prompt")
    assert f"does NOT fit the {count + budget - 1}-token window" in lines[-2]
    assert lines[-1] == "check-endpoint FAILED at tokens"


def test_tokens_without_a_tokenize_route_fails_in_one_line(small: Path) -> None:
    with LoopbackServer(models=[MODEL]) as server:
        code, lines, _ = _check(str(small), "--base-url", server.base_url, "--no-key", "--tokens")
        sent = [r.path for r in server.requests]
    assert code == 1
    assert lines[-2].startswith("FAIL  tokens: no tokenize route answered at http://127.0.0.1:")
    assert "(/tokenize: HTTP 404)" in lines[-2]
    assert sent == ["/v1/models", "/tokenize"]


def test_tokens_needs_the_prepared_folder() -> None:
    code, _, err = _check("--base-url", "http://127.0.0.1:9/v1", "--model", MODEL, "--tokens")
    assert code == 2 and "--tokens needs the prepared folder" in err


@pytest.mark.parametrize(
    "raw",
    [
        b'{"count": -1, "tokens": []}',
        b'{"count": true, "tokens": 5}',
        b'{"count": 1e400}',
        b'{"count": ' + b"9" * 5000 + b"}",
        b"[" * 100_000,
        b'{"count": 12, "max_model_len": "4096"}',
        b"\xff\xfe not utf-8",
        b"[]",
        b'{"tokens": [1, 2, 3], "prompt": 7}',
    ],
)
def test_a_hostile_tokenize_answer_is_one_line_never_a_traceback(small: Path, raw: bytes) -> None:
    with LoopbackServer(models=[MODEL], tokenizer="raw") as server:
        server.tokenize_raw = raw
        code, lines, err = _check(str(small), "--base-url", server.base_url, "--no-key", "--tokens")
    assert code == 1 and err == "", err
    assert lines[-2].startswith("FAIL  tokens: ") and "Traceback" not in "\n".join(lines)
    assert len(lines[-2]) < 400


def test_a_sweep_entry_takes_the_self_hosted_options(small: Path, tmp_path: Path) -> None:
    from needlepoint.run.sweep import read_sweep, run_sweep

    with server_for(small) as server:
        entry = {"name": "own", "prepared": str(small), "run_dir": "run", "allow": 32}
        entry |= {"base_url": server.base_url, "model": MODEL, "no_key": True, "concurrency": 4}
        entry |= {"min_gap_s": 0, "override_reason": "our own server", "timeout_s": 10}
        path = tmp_path / "sweep.json"
        doc = {"format": "needlepoint-sweep", "version": 1, "runs": [entry]}
        path.write_text(json.dumps(doc), encoding="utf-8")
        summary = run_sweep(read_sweep(path), progress="off")
    assert summary.exit_status == 0, summary.runs[0].lines
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["no_key"] is True and record["concurrency"] == 4
    assert audit_run(tmp_path / "run").ok
