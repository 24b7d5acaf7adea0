"""`needlepoint sweep`: several runs side by side, one worker process per run, never pooled.

A sweep file (SWEEP.json) lists runs; each entry is the options of one `needlepoint run` with a
name and two folders (relative to the file's folder), read strictly: an unknown key, a wrong
type, another format or version, two entries with one name or one run folder are refused with
one line that names the entry.

Each worker (``python -m needlepoint.run.sweep``, in a session of its own so that a terminal's
Ctrl-C reaches it only through the sweep) is an unchanged ``runner.run_protocol``, with its own
journal, lock, spacing, allowance and stop rules. Every worker checks its options first
(``check_settings``); if any is refused, none starts. Then all start at once, one progress line
per run drawn from what its journal has durably recorded. Ctrl-C is forwarded once to each
worker, and the sweep waits for every journal to be closed; running it again resumes each.

A worker speaks JSON lines: it reads ``{"prepared", "run_dir", "options"}``, answers ``ready``
(with ``planned`` and ``simulation``) or ``refused``, starts on ``go`` (anything else, or the end
of input, exits without writing), and ends with ``done``, ``refused`` or ``interrupted``. If its
input closes while it runs (the sweep was killed), it interrupts itself as Ctrl-C would: nobody
may be left spending an allowance that nobody watches.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import IO, Any

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import read_json
from needlepoint.run.journal import JOURNAL_NAME
from needlepoint.run.options import PROGRESS_MODES, RunOptions, check_settings
from needlepoint.run.runner import is_terminal, run_protocol
from needlepoint.schema import fail, from_plain, record_from_plain

SWEEP_FORMAT = "needlepoint-sweep"
SWEEP_VERSION = 1
# One worker process per run: a bound keeps a mistyped file from starting hundreds of them.
MAX_RUNS = 64
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")


# What a sweep entry names besides the options, and the `needlepoint run` options it may set
# (RunOptions fields; the others keep their defaults).
SWEEP_ENTRY = ("name", "prepared", "run_dir")
SWEEP_OPTIONS = ("allow", "simulate", "sim_params", "base_url", "model", "api_key_env")
SWEEP_OPTIONS += ("min_gap_s", "override_reason", "timeout_s", "input_rate", "output_rate")
SWEEP_OPTIONS += ("cost_cap", "no_key", "self_hosted", "concurrency")
SWEEP_KEYS = (*SWEEP_ENTRY, *SWEEP_OPTIONS)


@dataclass(frozen=True)
class SweepRun:
    """One entry of ``runs``: the options of one `needlepoint run`, plus a name to show and its
    two folders; in the file, the options' keys stand beside the others (``SWEEP_KEYS``)."""

    name: str
    prepared: str
    run_dir: str
    options: RunOptions

    @classmethod
    def from_plain(cls, value: dict[str, Any], where: str) -> SweepRun:
        """Read one entry; the options after ``allow`` may be left out and take their defaults."""
        missing = [k for k in (*SWEEP_ENTRY, "allow") if k not in value]
        if missing:
            fail(f"{where}.{missing[0]}", "missing")
        unknown = sorted(set(value) - set(SWEEP_KEYS))
        if unknown:
            fail(f"{where}.{unknown[0]}", "unknown field")
        own = [from_plain(str, value[k], f"{where}.{k}") for k in SWEEP_ENTRY]
        given = {k: v for k, v in value.items() if k in SWEEP_OPTIONS}
        defaults = {f.name: f.default for f in dataclasses.fields(RunOptions)}
        defaults = {k: v for k, v in defaults.items() if v is not MISSING and k not in given}
        return cls(*own, record_from_plain(RunOptions, defaults | given, where))


@dataclass(frozen=True)
class SweepFile:
    """The whole sweep file."""

    format: str
    version: int
    runs: tuple[SweepRun, ...]


@dataclass(frozen=True)
class PlannedRun:
    """One entry with its folders resolved against the sweep file's folder, and the declaration
    every run of the sweep is started under (`sweep --declaration`), if any."""

    entry: SweepRun
    prepared: Path
    run_dir: Path
    declaration: Path | None = None

    @property
    def name(self) -> str:
        return self.entry.name


def parse_sweep(value: Any, name: str) -> SweepFile:
    """Check a sweep file's JSON value; ``name`` is how refusals refer to the file."""
    if not isinstance(value, dict):
        raise NeedlepointError(f"{name}: expected a JSON object, got {type(value).__name__}")
    fmt, version = value.get("format"), value.get("version")
    if fmt != SWEEP_FORMAT:
        raise NeedlepointError(f"{name}: field format: expected {SWEEP_FORMAT!r}, got {fmt!r}")
    if version != SWEEP_VERSION or isinstance(version, bool):
        raise NeedlepointError(
            f"{name}: {SWEEP_FORMAT} version {version!r} is not supported "
            f"(this needlepoint reads version {SWEEP_VERSION})"
        )
    sweep: SweepFile = from_plain(SweepFile, value, name)
    if not sweep.runs:
        raise NeedlepointError(f"{name}: field runs: lists no run")
    if len(sweep.runs) > MAX_RUNS:
        raise NeedlepointError(f"{name}: field runs: {len(sweep.runs)} runs, at most {MAX_RUNS}")
    seen: set[str] = set()
    for i, run in enumerate(sweep.runs):
        where = f"{name}: runs[{i}]"
        if not _NAME.fullmatch(run.name):
            raise NeedlepointError(
                f"{where}.name: {run.name!r}: use 1-40 letters, digits, '.', '_' or '-'"
            )
        if run.name in seen:
            raise NeedlepointError(f"{where}.name: {run.name!r} names two runs")
        seen.add(run.name)
        for key in ("prepared", "run_dir"):
            text = getattr(run, key)
            if not text.strip() or "\x00" in text:
                raise NeedlepointError(f"{where}.{key}: must name a folder")
    return sweep


def read_sweep(path: str | Path) -> list[PlannedRun]:
    """Read SWEEP.json and resolve each run's folders against the file's own folder."""
    p = Path(path)
    if p.is_dir():
        raise NeedlepointError(f"{p}: is a folder; give the sweep file (SWEEP.json)")
    sweep = parse_sweep(read_json(p, pipes=True), p.name)
    base = p.parent
    planned = [PlannedRun(r, base / r.prepared, base / r.run_dir) for r in sweep.runs]
    folders: dict[Path, str] = {}
    for run in planned:
        key = run.run_dir.resolve()
        if key in folders:
            raise NeedlepointError(
                f"{p.name}: run {run.name!r}: run folder {run.entry.run_dir} is also the folder "
                f"of run {folders[key]!r}; every run needs its own journal"
            )
        folders[key] = run.name
    return planned


@dataclass
class JournalTail:
    """Follows one journal.jsonl as it grows, reading only complete lines."""

    path: Path
    offset: int = 0
    outcomes: int = 0
    last: str = "-"

    def poll(self) -> None:
        """Read lines appended since the last poll; a torn last line waits for its newline."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return
        end = data.rfind(b"\n")
        if end < 0:
            return
        self.offset += end + 1
        for line in data[: end + 1].splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            if record.get("type") == "outcome":
                self.outcomes += 1
                c = record.get("classification")
                if isinstance(c, dict):
                    self.last = str(c.get("kind") or c.get("status") or "-")


class SweepProgress:
    """One progress line per run (``auto``), or nothing (``off``)."""

    def __init__(self, mode: str, names: list[str], run_dirs: list[Path]) -> None:
        self.mode = mode
        self.names = names
        self.tails = [JournalTail(d / JOURNAL_NAME) for d in run_dirs]
        self.bars: list[Any] = []
        self.shown: list[tuple[int, str]] = []
        self.width = max(len(n) for n in names)

    def start(self, planned: list[int], simulation: list[bool]) -> None:
        """Open one bar per run, starting at what each journal already holds; not on a
        terminal, plain lines instead (bars redrawn in place fill a log with ``\r`` updates)."""
        for tail in self.tails:
            tail.poll()
        if self.mode == "off":
            return
        if self.mode == "auto" and not is_terminal(sys.stderr):
            self.mode = "lines"
            self.planned = planned
            self.said: list[tuple[int, str]] = [(-1, "")] * len(self.names)
            return
        from tqdm import tqdm

        for i, name in enumerate(self.names):
            label = f"{name:<{self.width}}" + (" SIMULATION" if simulation[i] else "")
            self.bars.append(
                tqdm(
                    total=planned[i],
                    initial=self.tails[i].outcomes,
                    desc=label,
                    position=i,
                    leave=True,
                    file=sys.stderr,
                    unit="req",
                    bar_format="{desc} {n_fmt}/{total_fmt} |{bar:20}|{postfix}",
                )
            )
            self.shown.append((-1, ""))

    def refresh(self, ended: dict[int, str]) -> None:
        """Poll every journal and redraw; ``ended`` maps a run's index to how it ended."""
        for i, tail in enumerate(self.tails):
            tail.poll()
            if self.mode == "lines":
                self._line(i, tail, ended.get(i))
            if not self.bars:
                continue
            bar = self.bars[i]
            now = (min(tail.outcomes, bar.total), f"last={tail.last} {ended.get(i) or 'running'}")
            if now != self.shown[i]:  # redraw only what changed: a log file stays readable
                self.shown[i] = now
                bar.n = now[0]
                bar.set_postfix_str(now[1], refresh=False)
                bar.refresh()

    def _line(self, i: int, tail: JournalTail, end: str | None) -> None:
        """A plain line for run ``i`` at every tenth of its plan, and when it ends."""
        total = self.planned[i]
        done = min(tail.outcomes, total)
        step = done * 10 // max(total, 1)
        key = (step, end or "")
        if key == self.said[i]:
            return
        self.said[i] = key
        state = end or "running"
        print(f"{self.names[i]:<{self.width}} {done}/{total}: last={tail.last} {state}",
              file=sys.stderr, flush=True)  # fmt: skip

    def close(self, ended: dict[int, str]) -> None:
        """Draw the final state of every line and leave it on screen."""
        if self.mode == "lines":
            self.refresh(ended)
            return
        if not self.bars:
            return
        self.refresh(ended)
        for bar in self.bars:
            bar.close()
        self.bars = []


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
            [sys.executable, "-m", "needlepoint.run.sweep"],
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
            dataclasses.replace(run.entry.options, progress="off", declaration=declaration)
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
