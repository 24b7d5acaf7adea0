"""Read a response body with a hard bound on its decoded size, whatever its content encoding.

httpx decodes ``Content-Encoding`` one whole network chunk at a time, so a few hundred bytes of
``gzip, gzip`` become gigabytes in memory before any size check can run. Here the raw bytes are
decoded stage by stage with ``zlib``'s ``max_length``: no stage ever produces more than
``PIECE`` bytes per call, and reading stops as soon as the decoded (or the raw) size passes the
limit. Memory is therefore bounded by the limit, not by the compression ratio.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

# The largest piece a decoding stage hands on at once.
PIECE = 64 * 1024
# What this runner asks for, stated so that no optional package (brotli, zstandard) changes it.
ACCEPT_ENCODING = "gzip, deflate"
_GZIP = zlib.MAX_WBITS | 16
_IDENTITY = ("", "identity")
_KNOWN = ("gzip", "x-gzip", "deflate", *_IDENTITY)
# The most codings undone on one body (urllib3 allows as many). Each is one generator stage:
# 990 stacked ``gzip`` tokens once overflowed Python's stack while the answer was being read.
MAX_CODINGS = 5


class BodyError(Exception):
    """The body arrived but cannot be decoded; ``kind`` is the outcome's error kind."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


@dataclass
class BodyReader:
    """Collects at most ``limit`` decoded bytes; counts what it saw beyond that."""

    limit: int
    content_encoding: str = ""
    raw_seen: int = 0
    decoded_seen: int = 0
    too_large: bool = False

    def __post_init__(self) -> None:
        self.encodings = [e.strip().lower() for e in self.content_encoding.split(",") if e.strip()]
        unknown = [e for e in self.encodings if e not in _KNOWN]
        self.unsupported = unknown[0][:80] if unknown else None
        coded = [e for e in self.encodings if e not in _IDENTITY]
        if self.unsupported is None and len(coded) > MAX_CODINGS:
            self.unsupported = f"{len(coded)} stacked codings (at most {MAX_CODINGS} are undone)"
        self._pieces: list[bytes] = []
        self._kept = 0
        # The bytes as received, kept (bounded) only while a coding is undone: when the coding
        # turns out broken, they are what the journal stores.
        self._raw: list[bytes] = []
        self._keep_raw = any(e not in _IDENTITY for e in self.encodings)

    def _count_raw(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            if self._keep_raw and self.raw_seen < self.limit:
                self._raw.append(chunk[: self.limit - self.raw_seen])
            self.raw_seen += len(chunk)
            yield chunk
            # Raw bytes beyond the limit are refused too: stored blocks never shrink.
            if self.raw_seen > self.limit:
                self.too_large = True
                return

    def read(self, raw: Iterable[bytes], tick: object = None) -> None:
        """Consume raw chunks until the end, or until the limit is passed.

        ``tick`` (a callable, or None) runs after every decoded piece, so that a deadline can
        interrupt a long decode. An unsupported encoding keeps the raw bytes (bounded).
        """
        stream: Iterator[bytes] = self._count_raw(raw)
        if self.unsupported is None:
            # Codings are listed in the order applied, so they are undone last first.
            for coding in reversed(self.encodings):
                if coding not in _IDENTITY:
                    stream = _inflate(stream, coding)
        for piece in stream:
            self.decoded_seen += len(piece)
            room = self.limit - self._kept
            if len(piece) > room:
                self._pieces.append(piece[:room])
                self._kept += room
                self.too_large = True
                return
            self._pieces.append(piece)
            self._kept += len(piece)
            if callable(tick):
                tick()
            if self.too_large:
                return

    @property
    def body(self) -> bytes:
        """The decoded body (its first ``limit`` bytes)."""
        return b"".join(self._pieces)

    @property
    def raw_body(self) -> bytes:
        """The body as received, before any decoding (its first ``limit`` bytes)."""
        return b"".join(self._raw) if self._keep_raw else self.body

    def detail(self) -> str:
        """The ``error_detail`` of a body that passed the limit: the limit and what was seen."""
        return (
            f"body larger than the limit of {self.limit} bytes: reading stopped after "
            f"{self.raw_seen} bytes received and {self.decoded_seen} decoded "
            f"(content-encoding {self.content_encoding or 'identity'!r}); the first "
            f"{self._kept} bytes are kept"
        )


def _inflate(chunks: Iterator[bytes], coding: str) -> Iterator[bytes]:
    """Undo one gzip or deflate layer, yielding pieces of at most PIECE bytes."""
    wbits = _GZIP if coding in ("gzip", "x-gzip") else zlib.MAX_WBITS
    d = zlib.decompressobj(wbits)
    started = False
    for chunk in chunks:
        data = chunk
        while data:
            try:
                out = d.decompress(data, PIECE)
            except zlib.error as exc:
                if coding == "deflate" and not started:
                    # Some servers send raw deflate without the zlib wrapper (httpx accepts it).
                    d, wbits = zlib.decompressobj(-zlib.MAX_WBITS), -zlib.MAX_WBITS
                    started = True
                    continue
                raise BodyError("content_encoding", f"{coding}: {exc}") from None
            started = True
            if out:
                yield out
            data = d.unconsumed_tail
            if not data and d.eof and d.unused_data and wbits == _GZIP:
                # A gzip stream may hold several members (RFC 1952): decode them all.
                data, d = d.unused_data, zlib.decompressobj(wbits)
            elif not data and len(out) == PIECE:
                # Output was capped: pending output may remain without any input left.
                data = b""
                while True:
                    more = d.decompress(b"", PIECE)
                    if not more:
                        break
                    yield more
    if started and not d.eof:
        raise BodyError("content_encoding", f"{coding}: stream ends before its end marker")
