"""Hostile servers, third round: what a server sends reaches a terminal or a file safely.

Every value from a server goes through the helper for its sink (``needlepoint.safetext``):
``check-endpoint`` prints model ids and client errors as inert single lines with the key
redacted in every spelling, and the journal never keeps a key a server echoed in UTF-16 or
UTF-32. Each test names the issue-39 class it guards.
"""

from __future__ import annotations

import base64
import json
import socket
import urllib.parse
from pathlib import Path

import pytest
from support.fuzz import SMALL
from support.loopback import LoopbackServer
from support.rawserver import raw_server
from support.runner import KEY_ENV, MODEL, SENTINEL, live, of_type, server_for

from needlepoint.cli import main
from needlepoint.design.prepared import prepare
from needlepoint.run.audit import audit_run
from needlepoint.run.records import decode_body
from needlepoint.safetext import Scrubber


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, SENTINEL)
    return SENTINEL


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("small")
    (root / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    return prepare(root / "prepared", root / "small.json")


def _check(capsys: pytest.CaptureFixture[str], url: str) -> tuple[int, str, str]:
    code = main(["check-endpoint", "--base-url", url, "--api-key-env", KEY_ENV, "--model", MODEL])
    out, err = capsys.readouterr()
    return code, out, err


def _spellings(key: str) -> list[str]:
    return [
        key,
        urllib.parse.quote(key, safe=""),
        "".join(f"%{b:02X}" for b in key.encode()),
        base64.b64encode(f"Bearer {key}".encode()).decode(),
        base64.urlsafe_b64encode(f"x:{key}".encode()).decode(),
    ]


def _leaks(text: str, key: str) -> list[str]:
    return [s for s in _spellings(key) if s in text or s.rstrip("=") in text]


# Class 1: the key, percent-encoded or as base64 of "Bearer KEY" in a model id.
def test_check_endpoint_redacts_every_spelling_of_the_key_in_model_ids(
    key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [f"leak-{s}" for s in _spellings(key)[1:]]
    with LoopbackServer(models=ids) as server:
        code, out, err = _check(capsys, server.base_url)
    assert code == 1 and "is not listed" in out
    assert out.count("[REDACTED]") == len(ids), out
    assert _leaks(out + err, key) == []


# Class 1: the HTTP client's error names a malformed header line that holds the key.
def test_check_endpoint_redacts_the_key_in_a_malformed_header_line(
    key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def answer(conn: socket.socket) -> None:
        line = b"X-Echo " + base64.b64encode(f"Bearer {key}".encode())
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + line + b"\r\n\r\n{}")

    with raw_server(answer) as url:
        code, out, err = _check(capsys, url)
    assert code == 1 and "header line" in out and "[REDACTED]" in out, out
    assert _leaks(out + err, key) == []

    def literal(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Echo " + key.encode() + b"\r\n\r\n")

    with raw_server(literal) as url:
        code, out, err = _check(capsys, url)
    assert code == 1 and key not in out + err


# Class 2: ESC sequences, a CR and a newline in model ids.
@pytest.mark.parametrize(
    "hostile",
    [
        "\x1b]0;pwned\x07title",
        "\x1b[2Jclear",
        "abc\rok    model: forged",
        f"x\nok    model: {MODEL} is listed",
        "evil\u202egpj.exe",
        "c1\x9b31mred",
    ],
)
def test_check_endpoint_prints_each_model_id_as_one_inert_line(
    hostile: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with LoopbackServer(models=[hostile]) as server:
        code, out, _err = _check(capsys, server.base_url)
    assert code == 1
    lines = out.splitlines()
    assert len(lines) == 7, lines  # header, transport, key, GET, auth, model, verdict
    assert not any(c in out for c in "\x1b\r\x07\u202e\x9b"), repr(out)
    assert [line for line in lines if line.startswith("ok    model")] == []
    assert lines[-2].startswith("FAIL  model:")


# Class 5: a 401 whose body is UTF-16 (or UTF-32) and echoes the key: the journal stores it as
# base64 of the bytes, which must not hold the key in any byte order.
@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-be"])
def test_a_wide_body_echoing_the_key_is_journalled_redacted(
    small: Path, tmp_path: Path, key: str, encoding: str
) -> None:
    body = json.dumps({"error": f"invalid key Bearer {key}"}).encode(encoding)
    run = tmp_path / "run"
    with server_for(small) as server:
        server.script([server.serve("wide", body, {"Content-Type": "text/plain"}, 401)])
        live(small, run, server, allow=2)
    outcome = of_type(run, "outcome")[0]
    assert outcome["http_status"] == 401
    stored = decode_body(outcome)
    assert stored is not None and stored != body, "the body was kept, with the key replaced"
    for enc in ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be", "utf-8"):
        assert key.encode(enc) not in stored
    journal = (run / "journal.jsonl").read_bytes()
    assert key.encode() not in journal
    assert audit_run(run).ok, audit_run(run).problems


def test_the_scrubber_finds_the_key_in_every_stored_decoding(key: str) -> None:
    scrub = Scrubber(key)
    for enc in ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"):
        for shift in (b"", b"x", b"xy", b"xyz"):
            data = shift + f"a {key} b".encode(enc)
            assert key.encode(enc) not in scrub(data), (enc, shift)
    assert scrub(b"plain text without it") == b"plain text without it"
