"""`needlepoint check-endpoint` against the loopback test server: what a run would meet, found
out with one GET /models, sending nothing from the plan and writing nothing."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from support.loopback import LoopbackServer
from support.runner import KEY_ENV, MODEL, SENTINEL

from needlepoint.cli import main


def _check(
    capsys: pytest.CaptureFixture[str], url: str, *extra: str, model: str = MODEL
) -> tuple[int, list[str], str]:
    argv = ["check-endpoint", "--base-url", url, "--api-key-env", KEY_ENV, *extra]
    if model:
        argv += ["--model", model]
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, SENTINEL)
    return SENTINEL


@pytest.fixture
def quiet_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_reachable_endpoint_that_lists_the_model(
    key: str, quiet_cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with LoopbackServer(key=key, models=["other", MODEL]) as server:
        code, lines, err = _check(capsys, server.base_url)
        sent = list(server.requests)
    assert code == 0 and err == ""
    assert lines[0] == (
        f"check-endpoint {server.base_url} (nothing from a plan is sent; nothing is written)"
    )
    assert lines[1] == "ok    transport: plain http to 127.0.0.1, a loopback host: this machine"
    assert lines[2] == f"ok    key: {KEY_ENV} is set ({len(key)} characters)"
    assert lines[3].startswith("ok    GET /models: HTTP 200 in ")
    assert lines[4] == "ok    auth: the key was accepted (or is not required)"
    assert lines[5] == f"ok    model: {MODEL} is listed (2 models listed)"
    assert lines[6] == "check-endpoint OK: reachable, key accepted, model listed"
    # one GET, no POST: nothing of the plan; the key only in the header; nothing written
    assert [(r.mode, r.path) for r in sent] == [("get", "/v1/models")]
    assert sent[0].authorization == f"Bearer {key}"
    assert list(quiet_cwd.iterdir()) == [] and key not in "\n".join(lines)


def test_the_frozen_model_of_a_prepared_folder(
    key: str, reference_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = sorted(p.name for p in reference_dir.iterdir())
    with LoopbackServer(models=[MODEL]) as server:
        code, lines, _ = _check(capsys, server.base_url, str(reference_dir), model="")
    assert code == 0 and lines[5] == f"ok    model: {MODEL} is listed (1 models listed)"
    assert sorted(p.name for p in reference_dir.iterdir()) == before
    with LoopbackServer(models=[MODEL]) as server:
        code, _, err = _check(capsys, server.base_url, str(reference_dir), model="x")
    assert code == 2 and "differs from the model frozen in" in err


def test_a_model_the_server_does_not_serve_names_the_prepare_command(
    key: str, reference_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A self-hosted server serves one model: the report says how to freeze the design for it,
    and the mismatch error of --model says how to freeze it for the model given."""
    ref = str(reference_dir)
    with LoopbackServer(models=["my-model"]) as server:
        code, lines, _ = _check(capsys, server.base_url, ref, model="")
    assert code == 1
    assert lines[5] == (
        f"FAIL  model: {MODEL} is not listed; listed: my-model; to run the listed model: "
        f"needlepoint prepare --protocol {ref}/protocol.json --model my-model "
        f"--out {ref}-my-model"
    )
    with LoopbackServer(models=["my-model"]) as server:
        code, _, err = _check(capsys, server.base_url, ref, model="my model")
    assert code == 2 and err.count("\n") == 1
    assert err.rstrip().endswith(
        f"to freeze the design for it: needlepoint prepare --protocol {ref}/protocol.json "
        f"--model 'my model' --out {ref}-my-model"
    )


def test_a_wrong_port(key: str, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, lines, _ = _check(capsys, f"http://127.0.0.1:{port}/v1")
    assert code == 1
    assert lines[3].startswith("FAIL  GET /models: connect_error (is the host and port right?): ")
    assert lines[-1] == "check-endpoint FAILED at GET /models"


def test_a_refused_key(key: str, capsys: pytest.CaptureFixture[str]) -> None:
    with LoopbackServer(key="the-right-key-0000") as server:
        code, lines, _ = _check(capsys, server.base_url)
    assert code == 1
    assert lines[4] == f"FAIL  auth: HTTP 401: the key in {KEY_ENV} is refused"
    assert lines[-1] == "check-endpoint FAILED at auth"


def test_a_model_that_is_not_listed(key: str, capsys: pytest.CaptureFixture[str]) -> None:
    names = [f"model-{i}" for i in range(7)]
    with LoopbackServer(models=names) as server:
        code, lines, _ = _check(capsys, server.base_url)
    assert code == 1
    assert lines[5] == (
        f"FAIL  model: {MODEL} is not listed; listed: model-0, model-1, model-2, model-3, "
        "model-4 and 2 more"
    )


def test_plain_http_to_a_host_that_is_not_loopback_sends_nothing(
    key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # 192.0.2.1 is TEST-NET-1: nothing may be sent there, and nothing is
    code, lines, _ = _check(capsys, "http://192.0.2.1:8080/v1")
    assert code == 1 and len(lines) == 3
    assert lines[1].startswith("FAIL  transport: plain http to 192.0.2.1, which is not loopback")
    assert "(nothing was sent)" in lines[1]


def test_no_model_list_at_that_url(key: str, capsys: pytest.CaptureFixture[str]) -> None:
    with LoopbackServer() as server:
        code, lines, _ = _check(capsys, server.base_url.removesuffix("/v1"))
    assert code == 1 and lines[4].startswith("FAIL  model list: HTTP 404: no model list at ")


def test_bad_input_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    code, _, err = _check(capsys, "http://127.0.0.1:9/v1")
    assert code == 2 and err == (
        f"needlepoint check-endpoint: error: environment variable {KEY_ENV} is not set or empty\n"
    )
    code, _, err = _check(capsys, "ftp://x/v1")
    assert code == 2 and "is not an http(s) URL" in err
    code, _, err = _check(capsys, "http://127.0.0.1:9/v1", model="")
    assert code == 2 and "give --model M" in err
