"""The per-request deadline: one daemon thread that shuts the socket down when it passes.

httpx's timeouts apply to each socket operation, so a server that trickles one byte at a time
could hold a request open forever. The watchdog learns the socket of the current request from
httpcore's trace hook and shuts it down at the deadline; it also notes whether a connection was
ever started to send the request, because a request that never left cannot have executed.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any, Protocol


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
