"""One HTTP client for the whole run: no retries, explicit timeouts, a hard deadline, a bounded
body, and the key kept out of everything it brings back.

httpx's timeouts apply to each socket operation, so a server that trickles one byte at a time
could hold a request open forever: a watchdog thread shuts the socket down at the deadline, and
the outcome is indeterminate (the server may have executed the request). Keep-alive is off, so a
stale pooled connection never becomes a silent resend. httpx would inflate ``gzip, gzip`` whole
in memory; the body is decoded here stage by stage, at most ``PIECE`` bytes per call, and
reading stops at the limit, so memory is bounded by the limit, not by the compression ratio.
``needlepoint.safetext.Scrubber`` finds the key in any spelling a server may echo (JSON,
percent, HTML escapes, base64 at every alignment, UTF-16 and UTF-32 bytes) in bodies, before
they are classified, headers and error details.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import ssl
import threading
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from needlepoint.jsonio import sha256_hex

# The key's redaction lives in the shared base (one rule for every sink); named here as before.
from needlepoint.safetext import REDACTED, Scrubber  # noqa: F401

if TYPE_CHECKING:
    import httpx


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


class MonotonicClock(Protocol):
    def monotonic(self) -> float: ...


class Watchdog:
    """One daemon thread that shuts the current socket down when the current deadline passes."""

    def __init__(self, clock: MonotonicClock) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._sock: socket.socket | None = None
        self.fired = False
        self.sending = False  # the current request's bytes may have left
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="needlepoint-deadline", daemon=True)
        self._thread.start()

    def arm(self, deadline: float) -> None:
        with self._cond:
            self._deadline, self._sock, self.fired = deadline, None, False
            self.sending = False
            self._cond.notify()

    def disarm(self) -> None:
        with self._cond:
            self._deadline, self._sock = None, None

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore trace hook: learn the socket of the connection this request uses, and when
        the request starts to leave (before that, a deadline means it never left)."""
        if event.endswith("send_request_headers.started"):
            with self._cond:
                self.sending = True
            return
        if event not in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        with self._cond:
            self._sock = sock
            if self.fired:
                _shutdown(sock)

    def _loop(self) -> None:
        with self._cond:
            while not self._closed:
                if self._deadline is None:
                    self._cond.wait()
                    continue
                remaining = self._deadline - self._clock.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                self.fired = True
                self._deadline = None
                _shutdown(self._sock)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()


def _shutdown(sock: socket.socket | None) -> None:
    if sock is None:
        return
    # The base-class method, so an SSL socket's state is not torn from under its reader.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


# Response headers worth keeping: they let a provider's bill be matched to a journal record,
# and say how the stored body was encoded on the wire.
KEPT_HEADERS = (
    "x-request-id",
    "request-id",
    "openai-processing-ms",
    "content-type",
    "content-encoding",
)
# The most body bytes read, decoded or raw; beyond it the outcome is ``body_too_large``.
MAX_BODY_BYTES = 16 * 1024 * 1024
# Errors of a response that did arrive: its body is kept, and the outcome is a protocol failure.
RESPONSE_ERRORS = ("body_too_large", "content_encoding")


class InterruptedExchange(KeyboardInterrupt):
    """Ctrl-C once an answer had started to arrive: ``exchange`` holds its status, headers and
    every body byte read before the interrupt, so that the outcome keeps them (as a deadline
    in the same state does). It is a KeyboardInterrupt: whoever does not look still stops."""

    def __init__(self, exchange: Exchange) -> None:
        super().__init__("interrupted while the answer arrived")
        self.exchange = exchange


class DeadlineExceeded(Exception):
    """Raised (by the watchdog's effect, or by a simulated transport) when the deadline passed."""


@dataclass(frozen=True)
class Outgoing:
    """A built request. ``sha256`` is taken over the exact body bytes handed to the socket."""

    request: httpx.Request
    sha256: str


@dataclass(frozen=True)
class Exchange:
    """What came back. ``error`` is None or a scoring.TRANSPORT_KINDS key."""

    http_status: int | None
    body: bytes | None
    error: str | None
    error_detail: str
    latency_s: float
    truncated: bool
    headers: dict[str, str]


def timeouts(timeout_s: float) -> httpx.Timeout:
    """The explicit per-operation timeouts for a ``--timeout-s`` value."""
    import httpx

    return httpx.Timeout(
        connect=min(timeout_s, 15.0), read=timeout_s, write=timeout_s, pool=timeout_s
    )


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """Loading the CA bundle costs a few hundred ms, so a process does it once."""
    import httpx

    return httpx.create_ssl_context()


class Transport:
    """Sends frozen body bytes to ``{base_url}{path}`` and reports what happened.

    ``path`` is the frozen body profile's endpoint (``/chat/completions`` or ``/completions``).
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None,
        timeout_s: float,
        deadline_s: float,
        clock: MonotonicClock,
        mock: httpx.BaseTransport | None = None,
        user_agent: str = "needlepoint",
        max_body_bytes: int = MAX_BODY_BYTES,
        path: str = "/chat/completions",
    ) -> None:
        import httpx

        self.url = base_url.rstrip("/") + path
        self.deadline_s = deadline_s
        self.max_body_bytes = max_body_bytes
        self._clock = clock
        headers = {
            "Content-Type": "application/json",
            "User-Agent": user_agent,
            "Accept-Encoding": ACCEPT_ENCODING,
        }
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # retries=0 is also httpx's default; stated so that no later default can change it.
        base = mock or httpx.HTTPTransport(
            verify=_ssl_context(),
            retries=0,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=0),
        )
        self._client = httpx.Client(
            transport=base,
            timeout=timeouts(timeout_s),
            headers=headers,
            follow_redirects=False,
            trust_env=False,  # the request goes exactly where --base-url says; no .netrc, no proxy
        )
        self._watchdog = None if mock is not None else Watchdog(clock)

    def build(self, body: bytes) -> Outgoing:
        """Build the request for ``body``; hash what will really be sent."""
        ext = {"trace": self._watchdog.trace} if self._watchdog else {}
        request = self._client.build_request("POST", self.url, content=body, extensions=ext)
        return Outgoing(request, sha256_hex(request.content))

    def build_get(self) -> Outgoing:
        """A GET of the URL with no body (check-endpoint's ``/models``): nothing from a plan."""
        ext = {"trace": self._watchdog.trace} if self._watchdog else {}
        request = self._client.build_request("GET", self.url, extensions=ext)
        return Outgoing(request, sha256_hex(b""))

    def send(self, outgoing: Outgoing) -> Exchange:
        """Send once. Never raises for network trouble: it is reported in the Exchange."""
        import httpx

        start = self._clock.monotonic()
        deadline = start + self.deadline_s
        if self._watchdog:
            self._watchdog.arm(deadline)
        status: int | None = None
        headers: dict[str, str] = {}
        reader: BodyReader | None = None
        error: str | None = None
        detail = ""
        interrupted = False

        def tick() -> None:
            if self._clock.monotonic() > deadline:
                raise DeadlineExceeded("deadline passed while the body trickled in")

        try:
            response = self._client.send(outgoing.request, stream=True)
            try:
                status = response.status_code
                headers = {k: response.headers[k] for k in KEPT_HEADERS if k in response.headers}
                if response.is_stream_consumed:
                    # A mock transport's response is already in memory, decoded by httpx.
                    reader = BodyReader(self.max_body_bytes)
                    reader.read([response.content], tick)
                else:
                    # Raw bytes, decoded here with a bound: httpx would inflate a bomb at once.
                    reader = BodyReader(self.max_body_bytes, headers.get("content-encoding", ""))
                    reader.read(response.iter_raw(), tick)
                if reader.unsupported is not None:
                    error = "content_encoding"
                    detail = (
                        f"content-encoding {reader.unsupported!r} is not supported (asked for "
                        f"{ACCEPT_ENCODING!r}); the body is kept as received"
                    )
                elif reader.too_large:
                    error, detail = "body_too_large", reader.detail()
            finally:
                response.close()
        except KeyboardInterrupt:
            if status is None:
                raise  # nothing arrived: the runner records the attempt as interrupted
            interrupted = True
            error = "interrupted"
            detail = "KeyboardInterrupt after the status arrived; what arrived is kept"
        except DeadlineExceeded as exc:
            error, detail = "deadline", str(exc)
        except BodyError as exc:
            error, detail = exc.kind, f"{exc}; the body is kept as received"
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            error, detail = "connect_error", f"{type(exc).__name__}: {exc}"
        except httpx.ReadTimeout as exc:
            error, detail = "timeout", f"{type(exc).__name__}: {exc}"
        except httpx.TransportError as exc:
            # Write errors, resets, early closes: the server may have the whole request.
            error, detail = "dropped", f"{type(exc).__name__}: {exc}"
        except Exception as exc:
            # Shutting a socket down under a reader can surface as any exception type.
            if self._watchdog and self._watchdog.fired:
                error, detail = "deadline", f"{type(exc).__name__}: {exc}"
            elif status is not None:
                # An answer arrived: whatever its body did to the reader, it is kept and
                # classified, never turned into an interrupted attempt without status or body.
                error = "content_encoding"
                detail = f"the body could not be read ({type(exc).__name__}: {str(exc)[:200]})"
                detail += "; the bytes received are kept"
            else:
                raise
        finally:
            fired = bool(self._watchdog and self._watchdog.fired)
            sending = bool(self._watchdog and self._watchdog.sending)
            if self._watchdog:
                self._watchdog.disarm()
        latency = self._clock.monotonic() - start
        if fired and error is not None and error not in RESPONSE_ERRORS:
            if error == "connect_error" or not sending:
                # The request had not started to leave: nothing is uncertain about it.
                error, detail = (
                    "connect_error",
                    f"overall deadline of {self.deadline_s:g} s passed before the request was "
                    f"sent; it never left ({detail})",
                )
            else:
                error, detail = (
                    "deadline",
                    f"overall deadline of {self.deadline_s:g} s passed ({detail})",
                )
        exchange = Exchange(
            http_status=status,
            body=_kept_body(reader, error),
            error=error,
            error_detail=detail,
            latency_s=latency,
            truncated=bool(reader and reader.too_large),
            headers=headers,
        )
        if interrupted:
            raise InterruptedExchange(exchange)
        return exchange

    def close(self) -> None:
        self._client.close()
        if self._watchdog:
            self._watchdog.close()


def _kept_body(reader: BodyReader | None, error: str | None) -> bytes | None:
    """What the journal stores: the decoded body, or the bytes as received when decoding
    failed; None when nothing arrived before a transport error."""
    if reader is None:
        return None
    body = reader.raw_body if error == "content_encoding" else reader.body
    if not body and error is not None and error not in RESPONSE_ERRORS:
        return None
    return body
