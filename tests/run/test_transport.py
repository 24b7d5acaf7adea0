"""The transport against a real socket: every failure mode, one request each, never retried; and
the bounded body reader: every content coding, stacked ones included, stops at the limit."""

from __future__ import annotations

import gzip
import socket
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.loopback import LoopbackServer

from needlepoint.run.clock import RealClock
from needlepoint.run.transport import PIECE, BodyError, BodyReader, Transport

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


DOC = b'{"choices":[{"message":{"content":"OM-3642"}}]}'


def gz(data: bytes, level: int = 9) -> bytes:
    return gzip.compress(data, level, mtime=0)  # no timestamp: test ids stay equal across workers


def chunks(data: bytes, size: int = 7) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def deflate_raw(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


@pytest.mark.parametrize(
    ("coding", "wire"),
    [
        ("", DOC),
        ("identity", DOC),
        ("gzip", gz(DOC)),
        ("x-gzip", gz(DOC)),
        ("GZIP", gz(DOC)),
        ("deflate", zlib.compress(DOC)),
        ("deflate", deflate_raw(DOC)),  # without the zlib wrapper, as some servers send it
        ("gzip, gzip", gz(gz(DOC))),
        ("deflate, gzip", gz(zlib.compress(DOC))),
        ("gzip", gz(DOC[:10]) + gz(DOC[10:])),  # two members
    ],
)
def test_every_coding_decodes_in_small_pieces(coding, wire):
    r = BodyReader(1000, coding)
    r.read(chunks(wire))
    assert (r.body, r.too_large, r.unsupported) == (DOC, False, None)


def test_stacked_bomb_stops_at_the_limit_without_inflating_it():
    inner = gz(b"\0" * (32 << 20), 6)
    wire = gz(inner, 9)
    assert len(wire) < 2000
    r = BodyReader(1 << 20, "gzip, gzip")
    r.read(chunks(wire, 16384))
    assert r.too_large and len(r.body) == 1 << 20
    # The reader stopped within one piece of the limit, not at 32 MiB.
    assert r.decoded_seen <= (1 << 20) + PIECE
    assert "limit of 1048576 bytes" in r.detail() and "'gzip, gzip'" in r.detail()


def test_raw_bytes_past_the_limit_also_stop():
    r = BodyReader(100, "")
    r.read(chunks(b"x" * 1000, 30))
    assert r.too_large and len(r.body) == 100 and r.raw_seen <= 130


@pytest.mark.parametrize(
    ("coding", "wire", "problem"),
    [
        ("gzip", b"\x1f\x8b not gzip at all", "gzip: "),
        ("gzip", gz(DOC)[:-6], "ends before its end marker"),
        ("deflate", b"\xff\xff\xff\xff", "deflate: "),
        ("gzip", gz(DOC) + b"trailing junk", "gzip: "),
    ],
)
def test_broken_coding_is_an_error_and_keeps_the_raw_bytes(coding, wire, problem):
    r = BodyReader(1000, coding)
    with pytest.raises(BodyError, match=problem) as info:
        r.read(chunks(wire))
    assert info.value.kind == "content_encoding"
    assert r.raw_body == wire[: r.raw_seen]


def test_unsupported_coding_keeps_the_body_as_received():
    r = BodyReader(1000, "br")
    r.read([b"\x8b\x02\x80"])
    assert r.unsupported == "br" and r.body == b"\x8b\x02\x80"


def test_tick_runs_while_decoding():
    calls = []
    r = BodyReader(1 << 20, "gzip")
    r.read([gz(b"a" * (4 * PIECE))], lambda: calls.append(1))
    assert len(calls) >= 4


@settings(max_examples=150, derandomize=True, deadline=None)
@given(
    st.binary(max_size=3000),
    st.sampled_from(["", "gzip", "deflate", "gzip, gzip", "gzip, deflate", "br, gzip"]),
    st.integers(1, 200),
    st.integers(1, 4000),
)
def test_arbitrary_bytes_never_escape_the_bound(data, coding, size, limit):
    r = BodyReader(limit, coding)
    try:
        r.read(chunks(data, size))
    except BodyError as exc:
        assert exc.kind == "content_encoding"
    assert len(r.body) <= limit and len(r.raw_body) <= limit
