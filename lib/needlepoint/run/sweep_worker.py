"""One run of a sweep, in a process of its own: checked first, started only when the sweep says.

``needlepoint.run.sweep`` starts ``python -m needlepoint.run.sweep_worker`` in a new session, so
a terminal's Ctrl-C reaches only the sweep, which then interrupts each worker exactly once; the
worker handles it exactly as `needlepoint run` does (the in-flight seq is journalled as
``indeterminate_interrupted``, then a ``stop`` record). It speaks JSON lines:

- stdin, first line: ``{"prepared": P, "run_dir": R, "options": {RunOptions fields}}``;
- stdout: ``{"event": "ready", "planned": N, "simulation": B}`` once the options and the prepared
  folder pass ``check_settings``, or ``{"event": "refused", "message": M}``;
- stdin, second line: ``go`` starts ``run_protocol``; anything else (or end of input) exits
  without writing, which is how one refused run keeps the whole sweep from starting;
- stdout, last: ``{"event": "done", ...}`` with the run's summary, ``refused`` or ``interrupted``.

The sweep keeps the worker's stdin open while it runs. If it closes (the sweep was killed, or its
terminal went away), the worker interrupts itself as Ctrl-C would: a worker in a session of its
own must never go on spending an allowance that nobody is watching.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.run.loop import run_protocol
from needlepoint.run.options import RunOptions, check_settings


def _emit(**event: Any) -> None:
    sys.stdout.write(json.dumps(event, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _interrupt_when_orphaned() -> None:
    """Wait for the end of stdin, then deliver SIGINT to the main thread (a blocked read wakes)."""
    sys.stdin.read()
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


def main() -> int:
    """Check, wait for ``go``, run; the exit status is the one `needlepoint run` would give."""
    # SIGINT is how the sweep stops a worker, even if whoever started the sweep ignored it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        message = json.loads(sys.stdin.readline())
        prepared, run_dir = message["prepared"], message["run_dir"]
        options = RunOptions(**message["options"])
        try:
            settings = check_settings(prepared, options)
        except NeedlepointError as exc:
            _emit(event="refused", message=str(exc))
            return 2
        _emit(event="ready", planned=len(settings.prepared.plan), simulation=settings.simulation)
        if sys.stdin.readline().strip() != "go":
            return 0
        threading.Thread(target=_interrupt_when_orphaned, daemon=True).start()
        try:
            summary = run_protocol(prepared, run_dir, options)
        except NeedlepointError as exc:
            _emit(event="refused", message=str(exc))
            return 2
    except KeyboardInterrupt:
        _emit(event="interrupted")
        return 130
    _emit(
        event="done",
        stop_reason=summary.stop_reason,
        lines=summary.lines(),
        attempts_total=summary.attempts_total,
        journal_sha256=summary.journal_sha256,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
