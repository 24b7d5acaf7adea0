"""`run --concurrency N`: up to N requests in flight to a server you own, one journal writer.

A GPU server answers several requests at once; sent one at a time, it sits idle between them.
With ``--concurrency N`` (only under a recorded spacing override) the session keeps up to N
requests in flight, and every rule of a sequential run still holds:

- **One writer.** The session's own thread is the only one that writes the hash-chained
  journal. It journals (and fsyncs) each ``attempt`` before the request is handed to a sender,
  always the next unattempted seq in plan order, and each ``outcome`` in the order the senders
  report them done: completion order. Sender threads only send; each owns a transport (its own
  connection, timeouts and deadline watchdog) and puts what came back on one queue.
- **Stop rules.** A stop rule that fires on an outcome (429, 401, 403, consecutive failures, the
  cost cap) or before a send (the allowance) stops new sends; what is in flight is recorded as it
  ends, and the first rule that fired is the session's stop reason.
- **Interrupts.** Ctrl-C or a crash journals every request still in flight as
  ``indeterminate_interrupted`` (it may have executed) before the ``stop`` record; a SIGKILL
  leaves their attempts open, and the resume records each so. A resume never sends them again.
- **Same results.** ``results.csv`` and the analysis are derived per planned seq, so the order
  in which outcomes arrived changes nothing but the journal's order.

The gap rule is the sequential one: a request starts only once ``--min-gap-s`` has passed since
the latest completion (with a lowered gap, usually 0, that is at once).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

# The longest the writer blocks on the queue before it looks again.
POLL_S = 0.5


@dataclass(frozen=True)
class Done:
    """A request that ended: what came back, or the exception its sender met."""

    seq: int
    transport: Any
    exchange: Any = None
    error: BaseException | None = None


class Senders:
    """Sender threads, one per request in flight, each with a transport of its own; they report
    to one queue in the order they finish and never touch the journal."""

    def __init__(self, transports: list[Any]) -> None:
        self.transports = list(transports)
        self.idle = list(reversed(transports))  # the first transport is used first
        self.in_flight: dict[int, Any] = {}  # seq -> its transport, in the order sent
        self._done: queue.Queue[Done] = queue.Queue()

    @property
    def free(self) -> Any | None:
        """An idle transport, or None when N requests are in flight."""
        return self.idle[-1] if self.idle else None

    def start(self, seq: int, transport: Any, outgoing: Any) -> None:
        """Send ``outgoing`` (built by ``transport``) on a thread of its own."""
        self.idle.remove(transport)
        self.in_flight[seq] = transport

        def send() -> None:
            try:
                self._done.put(Done(seq, transport, exchange=transport.send(outgoing)))
            except BaseException as exc:  # the writer decides what it means
                self._done.put(Done(seq, transport, error=exc))

        # A daemon: after a Ctrl-C the process may end while a request is still out.
        threading.Thread(target=send, name=f"needlepoint-send-{seq}", daemon=True).start()

    def next(self, timeout: float | None) -> Done | None:
        """The next request to end (0: only one that has already ended), or None."""
        try:
            done = self._done.get(block=timeout != 0, timeout=timeout or None)
        except queue.Empty:
            return None
        del self.in_flight[done.seq]
        self.idle.append(done.transport)
        return done

    def close(self, keep: Any) -> None:
        """Close every transport but ``keep`` (the session closes its own)."""
        for transport in self.transports:
            if transport is not keep:
                with contextlib.suppress(Exception):
                    transport.close()


def send_concurrently(session: Any, first: Any, stop_type: type[Exception]) -> None:
    """Send every unattempted planned seq of ``session`` (a ``runner.Session``) with up to
    ``session.s.concurrency`` in flight; ``first`` is the session's transport, and
    ``stop_type`` the exception its stop rules raise (re-raised here once nothing is in
    flight)."""
    s = session.s
    todo = deque(row for row in s.prepared.plan if row.seq not in session.state.attempts)
    more = [session.transport() for _ in range(s.concurrency - 1)]
    senders = Senders([first, *more])
    stopped: Exception | None = None

    def record(done: Done) -> None:
        nonlocal stopped
        if done.error is not None:
            session.interrupted(done.seq, done.error)
            raise done.error
        try:
            session.record(done.seq, done.exchange)
        except stop_type as exc:  # no new sends; what is in flight is recorded as it ends
            stopped = stopped or exc

    try:
        while True:
            while (done := senders.next(0)) is not None:  # what has ended, in that order
                record(done)
            wait: float | None = None
            if todo and stopped is None and senders.free is not None:
                try:
                    session.check_budget()
                except stop_type as exc:
                    stopped = exc
                    continue
                gap = session.since_done()
                if gap is None or gap >= s.min_gap_s:
                    row = todo.popleft()
                    transport = senders.free
                    outgoing = session.attempt(transport, row.seq, row.request_sha256, gap)
                    senders.start(row.seq, transport, outgoing)
                    continue
                wait = max(round(s.min_gap_s - gap, 6), 0.000001)
            if not senders.in_flight:
                if wait is None:
                    break  # nothing left to send, nothing out
                session.clock.sleep(wait)
                continue
            done = senders.next(POLL_S if wait is None else min(wait, POLL_S))
            if done is not None:
                record(done)
    except BaseException as exc:
        for seq in list(senders.in_flight):  # in the order sent
            session.interrupted(seq, exc)
        raise
    finally:
        senders.close(first)
    if stopped is not None:
        raise stopped
