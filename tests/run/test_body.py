"""The bounded body reader: every content coding, stacked ones included, stops at the limit."""

from __future__ import annotations

import gzip
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlepoint.run.body import PIECE, BodyError, BodyReader

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
