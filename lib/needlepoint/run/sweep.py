"""`needlepoint sweep`: several runs side by side, one worker process per run, never pooled.

Each worker is an unchanged `needlepoint run` (``run_protocol``) on its own prepared folder and
run folder, so each keeps its own journal, lock, spacing, allowance and stop rules; the sweep
adds nothing to what a run does. It only starts them together and watches:

1. every worker checks its options and prepared folder (``check_settings``) in parallel; if any
   is refused, none starts, and the first refusal is the sweep's one-line error;
2. then all start at once; one progress line per run is drawn from its journal;
3. Ctrl-C (or SIGINT) is forwarded once to each worker, which stops as `needlepoint run` does on
   Ctrl-C; the sweep waits for every journal to be closed. Running the sweep again resumes each.

Workers live in sessions of their own, so a terminal's Ctrl-C reaches them only through the
sweep, exactly once, and never in the middle of the stop record it caused.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import IO, Any

from needlepoint.errors import NeedlepointError
from needlepoint.run.options import PROGRESS_MODES
from needlepoint.run.sweep_progress import SweepProgress
from needlepoint.run.sweep_spec import PlannedRun

_POLL_S = 0.2
# A run ended well when `needlepoint run` would have exited 0.
_FINISHED = ("complete", "allowance_spent")


@dataclass(frozen=True)
class RunEnd:
    """How one run of the sweep ended: ``done``, ``refused``, ``interrupted`` or ``crashed``."""

    name: str
    state: str
    stop_reason: str | None
    lines: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.state == "done" and self.stop_reason in _FINISHED


@dataclass(frozen=True)
class SweepSummary:
    """Every run's end, in the sweep file's order."""

    runs: tuple[RunEnd, ...]
    interrupted: bool

    def lines(self) -> list[str]:
        """One block per run, each line prefixed with the run's name."""
        return [f"[{r.name}] {line}" for r in self.runs for line in r.lines]

    @property
    def exit_status(self) -> int:
        """130 interrupted; 2 a run refused or crashed; 3 a stop rule fired; else 0."""
        if self.interrupted:
            return 130
        if any(r.state in ("refused", "crashed") for r in self.runs):
            return 2
        return 0 if all(r.ok for r in self.runs) else 3


class _Worker:
    """One worker process and the thread that reads its JSON-lines events."""

    def __init__(self, index: int, run: PlannedRun, events: queue.Queue[Any]) -> None:
        self.index, self.run = index, run
        self.first: dict[str, Any] | None = None
        self.last: dict[str, Any] | None = None
        self.crash: list[str] = []
        # Kept for the worker's lifetime (a crash's last line is reported), closed in end().
        self.stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "needlepoint.run.sweep_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            start_new_session=True,  # Ctrl-C in the terminal reaches the sweep only
            text=True,
            encoding="utf-8",
        )
        assert self.proc.stdin is not None
        declaration = None if run.declaration is None else str(run.declaration)
        options = dataclasses.asdict(
            dataclasses.replace(run.entry.options(progress="off"), declaration=declaration)
        )
        message = {"prepared": str(run.prepared), "run_dir": str(run.run_dir), "options": options}
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        self.reader = threading.Thread(target=self._read, args=(events,), daemon=True)
        self.reader.start()

    def _read(self, events: queue.Queue[Any]) -> None:
        """Keep the first and the latest event; tell the sweep of each, and of the end (None)."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            self.first = self.first or event
            self.last = event
            events.put((self.index, event))
        events.put((self.index, None))

    def send(self, line: str) -> None:
        """Write a line to the worker, and close its input unless it is ``go``."""
        stdin = self.proc.stdin
        if stdin is None or stdin.closed:
            return
        try:
            if line:
                stdin.write(line + "\n")
                stdin.flush()
            if line != "go":
                stdin.close()
        except OSError:
            pass  # the worker has already gone: its end is read from its events

    def interrupt(self) -> None:
        """Ctrl-C for this worker, once, if it is still running."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)

    def end(self) -> RunEnd:
        """Wait for the process and its last event, then say how the run ended."""
        self.proc.wait()
        self.reader.join()
        self.send("")
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if not self.stderr.closed:
            self.stderr.seek(0)
            self.crash = self.stderr.read().decode("utf-8", "replace").strip().splitlines()
            self.stderr.close()
        name, ev = self.run.name, self.last or {}
        kind = ev.get("event")
        if kind == "done":
            return RunEnd(name, "done", ev["stop_reason"], tuple(ev["lines"]))
        if kind == "refused":
            return RunEnd(name, "refused", None, (f"refused: {ev['message']}",))
        if kind == "interrupted":
            return RunEnd(
                name, "interrupted", "interrupted", ("interrupted; run the sweep again to resume",)
            )
        why = self.crash[-1] if self.crash else "no message"
        return RunEnd(name, "crashed", None, (f"worker exited {self.proc.returncode}: {why}",))


def _await(workers: list[_Worker], events: queue.Queue[Any], pending: set[int]) -> None:
    """Take events until every worker in ``pending`` has sent its first one (or ended)."""
    while pending:
        index, _ = events.get()
        pending.discard(index)


def _refusal(workers: list[_Worker]) -> str | None:
    bad = [w for w in workers if (w.first or {}).get("event") != "ready"]
    if not bad:
        return None
    first = bad[0]
    why = (first.first or {}).get("message") or first.end().lines[0]
    more = f" ({len(bad) - 1} more refused)" if len(bad) > 1 else ""
    return f"run {first.run.name!r}: {why}{more}; no run was started"


def run_sweep(planned: list[PlannedRun], progress: str = "auto") -> SweepSummary:
    """Check every run, start all of them together, and wait for each to end.

    Raises ``NeedlepointError`` (nothing started) when any run is refused by its checks.
    """
    if progress not in PROGRESS_MODES:
        raise NeedlepointError(f"progress must be one of {', '.join(PROGRESS_MODES)}")
    events: queue.Queue[Any] = queue.Queue()
    workers: list[_Worker] = []
    ended: dict[int, str] = {}
    display = SweepProgress(
        "off" if progress == "off" else "auto",
        [r.name for r in planned],
        [r.run_dir for r in planned],
    )
    interrupted = False
    refusal: str | None = None
    try:
        workers = [_Worker(i, run, events) for i, run in enumerate(planned)]
        _await(workers, events, set(range(len(workers))))
        refusal = _refusal(workers)
        if refusal is None:
            display.start(
                [(w.first or {})["planned"] for w in workers],
                [(w.first or {})["simulation"] for w in workers],
            )
            for w in workers:
                w.send("go")
            _watch(workers, events, display, ended)
        else:
            for w in workers:
                w.send("")  # a ready worker exits without writing anything
    except KeyboardInterrupt:
        interrupted = True
        for w in workers:
            w.interrupt()
    except BaseException:
        for w in workers:  # never leave a run spending while nobody watches
            w.interrupt()
        raise
    finally:
        _close(workers)
        display.close(ended)
    if refusal is not None:
        raise NeedlepointError(refusal)
    return SweepSummary(tuple(w.end() for w in workers), interrupted)


def _watch(
    workers: list[_Worker], events: queue.Queue[Any], display: SweepProgress, ended: dict[int, str]
) -> None:
    """Redraw the progress lines until every worker has ended."""
    while len(ended) < len(workers):
        try:
            index, event = events.get(timeout=_POLL_S)
        except queue.Empty:
            pass
        else:
            if event is None:
                last = workers[index].last or {}
                ended[index] = last.get("stop_reason") or last.get("event") or "ended"
        display.refresh(ended)


def _close(workers: list[_Worker]) -> None:
    """Wait for every worker to close its journal; a second Ctrl-C does not cut that short."""
    while True:
        try:
            for w in workers:
                w.proc.wait()
            return
        except KeyboardInterrupt:
            alive = sum(w.proc.poll() is None for w in workers)
            print(f"waiting for {alive} run(s) to close their journals", file=sys.stderr)
