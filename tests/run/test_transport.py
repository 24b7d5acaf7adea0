"""The transport against a real socket: every failure mode, one request each, never retried."""

from __future__ import annotations

import socket

import pytest
from support.loopback import LoopbackServer

from needlepoint.run.clock import RealClock
from needlepoint.run.transport import Transport

TIMEOUT = 0.3
DEADLINE = 0.6


@pytest.fixture(scope="module")
def server():
    with LoopbackServer() as s:
        yield s


def send(base_url, body=b'{"model":"m"}', deadline=DEADLINE):
    t = Transport(
        base_url, api_key="k" * 12, timeout_s=TIMEOUT, deadline_s=deadline, clock=RealClock()
    )
    try:
        return t.send(t.build(body))
    finally:
        t.close()


@pytest.mark.parametrize(
    ("mode", "status", "error"),
    [
        ("normal", 200, None),
        ("length", 200, None),
        ("broken_json", 200, None),
        ("status:500", 500, None),
        ("status:429", 429, None),
        ("hang:5", None, "timeout"),
        ("trickle:0.05", 200, "deadline"),
        ("trickle_headers:0.05", None, "deadline"),
        ("drop", None, "dropped"),
        ("drop_mid", 200, "dropped"),
    ],
)
def test_each_mode_is_one_request(server, mode, status, error):
    before = server.count
    server.script([mode])
    ex = send(server.base_url)
    assert (ex.http_status, ex.error) == (status, error)
    assert server.count == before + 1, "the transport must never retry"
    assert server.requests[-1].mode == mode
    if error == "deadline":
        # The trickling server kept every read under the read timeout: only the deadline ends it.
        assert DEADLINE <= ex.latency_s < DEADLINE + TIMEOUT + 1.0
    if error is None:
        assert ex.body and ex.headers["x-request-id"].startswith("loop-")


def test_connect_error_when_nothing_listens():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ex = send(f"http://127.0.0.1:{port}/v1")
    assert ex.error == "connect_error" and ex.body is None


def test_exact_bytes_and_key_header(server):
    body = '{"messages":[{"content":"松塔北站\u00a0","role":"user"}],"model":"m"}'.encode()
    t = Transport(
        server.base_url, api_key="k" * 12, timeout_s=TIMEOUT, deadline_s=DEADLINE, clock=RealClock()
    )
    out = t.build(body)
    t.send(out)
    t.close()
    import hashlib

    assert out.sha256 == hashlib.sha256(body).hexdigest() == server.requests[-1].sha256
    assert server.requests[-1].authorization == "Bearer " + "k" * 12


def test_oversized_body_is_cut(server):
    t = Transport(
        server.base_url,
        api_key=None,
        timeout_s=TIMEOUT,
        deadline_s=DEADLINE,
        clock=RealClock(),
        max_body_bytes=50,
    )
    server.script(["normal"])
    ex = t.send(t.build(b"{}"))
    t.close()
    assert ex.truncated and ex.error == "body_too_large" and len(ex.body) == 50
    assert "limit of 50 bytes" in ex.error_detail
