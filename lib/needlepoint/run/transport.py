"""One HTTP client for the whole run: no retries anywhere, explicit timeouts, a hard deadline.

httpx's timeouts apply to each socket operation, so a server that trickles one byte at a time
could hold a request open forever. A watchdog thread therefore shuts the socket down when the
per-request deadline passes; that outcome is recorded as indeterminate, because the server may
have executed the request. Keep-alive is off: every request gets a fresh connection, so a stale
pooled connection can never turn into a silent resend or a spurious "dropped".
"""

from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING

from needlepoint.jsonio import sha256_hex
from needlepoint.run.body import ACCEPT_ENCODING, BodyError, BodyReader
from needlepoint.run.watchdog import MonotonicClock, Watchdog

if TYPE_CHECKING:
    import httpx

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
        return Exchange(
            http_status=status,
            body=_kept_body(reader, error),
            error=error,
            error_detail=detail,
            latency_s=latency,
            truncated=bool(reader and reader.too_large),
            headers=headers,
        )

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
