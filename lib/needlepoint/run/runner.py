"""Where a request is sent and journalled: the run loop, its sessions, resume and progress.

``run_protocol`` checks the options, creates or resumes the run folder and runs one ``Session``:
frozen bytes in the frozen order, an explicit allowance, no retries. ``Session.one`` fsyncs an
``attempt`` record before each request and an ``outcome`` record after it; a stop rule raises
``Stop`` with the reason the session's ``stop`` record carries. A resume continues with the next
unattempted seq; an attempt without an outcome becomes ``indeterminate_interrupted`` and is never
sent again. The allowance, the money spent and the last completion time are read back from the
journal, so a resume never grants fresh budget; every setting that differs from run.json is said
before anything is sent, and a recorded gap override is carried unless the gap flags are given.

Progress: ``auto`` is a live tqdm bar on stderr (plain lines when stderr is not a terminal);
``terminal`` the same bar on the terminal that
started the process, past a notebook kernel's capture (so it never lands in the executed
notebook); ``deterministic`` one refresh per request and no times or rates; ``off`` nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import needlepoint
from needlepoint.design.prepared import Prepared
from needlepoint.design.profiles import ENDPOINTS, body_profile
from needlepoint.design.protocol import design_fingerprint
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import sha256_hex
from needlepoint.run import folder as run_folder
from needlepoint.run.clock import SIM_EPOCH, RealClock, SimClock, anchor_gap, iso_utc
from needlepoint.run.concurrent import send_concurrently
from needlepoint.run.journal import Journal, JournalState
from needlepoint.run.options import LIVE_MODES, PROGRESS_MODES, RunOptions, Settings, check_settings
from needlepoint.run.records import (
    RUN_FORMAT,
    RUN_KIND,
    CostRecord,
    DeclarationRef,
    RunRecord,
    SessionRecord,
    SimulationRecord,
    interrupted_fields,
    received_fields,
)
from needlepoint.run.scoring import PROTOCOL_FAILURE
from needlepoint.run.transport import Scrubber
from needlepoint.safeio import relative_path


def terminal_stream() -> IO[str]:
    """A text stream on the process's own stderr, even where a Jupyter kernel captures it.

    ipykernel replaces ``sys.stderr`` with a stream that goes into the notebook, and its
    ``fileno()`` answers with a copy of the original descriptor: the terminal (or log) that
    started the kernel. Elsewhere ``sys.stderr.fileno()`` is simply 2.
    """
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return sys.__stderr__ or sys.stderr
    return open(os.dup(fd), "w", encoding="utf-8", errors="replace", buffering=1)


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (a closed or odd stream is not one)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def clock_text(seconds: float) -> str:
    """``1:02:03`` or ``4:05``: a duration as a reader of a progress line expects it."""
    whole = max(round(seconds), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    """What a run shows while it works (see the module's docstring for the modes).

    ``auto`` draws a bar only on a terminal: redirected to a file, a bar redrawn in place is
    thousands of ``\r`` updates, so it prints a plain line every tenth of the run instead
    (mode ``lines``). Live modes show the time still to go as a lower bound that counts the
    waits: each request left takes its mean latency so far plus the gap after it (tqdm's own
    estimate, from the recent rate alone, once said 24:51 where the gaps alone took 42 min).
    """

    def __init__(self, mode: str, total: int, initial: int, label: str) -> None:
        if mode not in PROGRESS_MODES:
            raise ValueError(f"progress must be one of {PROGRESS_MODES}")
        self.mode = mode
        self.bar: Any = None
        self.stream: IO[str] | None = None
        self.total, self.n, self.label = total, initial, label
        self.latencies: list[float] = []
        self.sent_at: float | None = None
        if mode == "off":
            return
        if mode == "auto" and not is_terminal(sys.stderr):
            self.mode = "lines"
            self.every = max(1, total // 10)
            return
        from tqdm import tqdm

        options: dict[str, Any] = {"file": sys.stderr, "unit": "req", "leave": True}
        if mode in LIVE_MODES:
            # tqdm's remaining time is left out: ours counts the gaps (``eta``)
            options["bar_format"] = "{desc} {n_fmt}/{total_fmt} |{bar:24}| {elapsed}{postfix}"
        if mode == "terminal":
            self.stream = terminal_stream()
            # A bar redrawn in place reads well on a terminal; in a log it is one endless line.
            if not self.stream.isatty():
                self.mode = "off"
                self.close("")
                return
            options.update(file=self.stream, leave=False)
        if mode == "deterministic":
            options.update(
                bar_format="{desc} {n_fmt}/{total_fmt} |{bar:24}|{postfix}",
                mininterval=0,
                miniters=1,
                ncols=100,
                dynamic_ncols=False,
            )
        self.bar = tqdm(total=total, initial=initial, desc=label, **options)

    def waiting(self, seq: int, last: str, wait_s: float) -> None:
        """Shown while waiting out the gap (live only: a countdown is not deterministic)."""
        if self.bar is not None and self.mode in LIVE_MODES:
            self.bar.set_postfix_str(f"seq={seq} last={last} wait={wait_s:.0f}s")

    def sending(self, seq: int, last: str) -> None:
        self.sent_at = time.monotonic()
        if self.bar is not None and self.mode in LIVE_MODES:
            self.bar.set_postfix_str(f"seq={seq} last={last} sending")

    def eta(self, next_wait_s: float) -> str:
        """`` eta ≥M:SS``: requests left × (mean latency so far + the gap), or nothing yet."""
        left = self.total - self.n
        if self.mode not in (*LIVE_MODES, "lines") or not self.latencies or left <= 0:
            return ""
        mean = sum(self.latencies) / len(self.latencies)
        return f" eta ≥{clock_text(left * (mean + next_wait_s))}"

    def done(self, seq: int, outcome: str, next_wait_s: float) -> None:
        if self.sent_at is not None:
            self.latencies.append(time.monotonic() - self.sent_at)
            self.sent_at = None
        self.n += 1
        if self.mode == "lines":
            if self.n % self.every == 0 or self.n == self.total:
                eta = self.eta(next_wait_s)
                line = f"{self.label} {self.n}/{self.total}: seq {seq} {outcome}{eta}"
                print(line, file=sys.stderr, flush=True)
            return
        if self.bar is None:
            return
        eta = self.eta(next_wait_s)
        self.bar.set_postfix_str(
            f"seq={seq} last={outcome} wait={next_wait_s:g}s{eta}", refresh=False
        )
        self.bar.update(1)

    def close(self, message: str) -> None:
        if self.mode == "lines" and message:
            print(f"{self.label} {self.n}/{self.total}: {message}", file=sys.stderr, flush=True)
            self.mode = "off"
        if self.bar is not None:
            self.bar.set_postfix_str(message, refresh=False)
            self.bar.close()
            self.bar = None
        if self.stream is not None and self.stream is not sys.__stderr__:
            with contextlib.suppress(OSError):
                self.stream.close()
            self.stream = None


# run.json field -> how a user names it. Fields that cannot differ on a resume (refused, or
# derived from the fixed prepared folder) and the creation time are not listed.
FLAGS = {
    "allow": "--allow",
    "min_gap_s": "--min-gap-s",
    "override_reason": "--override-reason",
    "timeout_s": "--timeout-s",
    "deadline_s": "the request deadline (twice --timeout-s)",
    "api_key_env": "--api-key-env",
    "allow_insecure_http": "--allow-insecure-http",
    "prepared_dir": "the prepared folder",
    "package_version": "the needlepoint version",
    "no_key": "--no-key",
    "self_hosted": "--self-hosted",
    "concurrency": "--concurrency",
}
COST_FLAGS = {"input_rate": "--input-rate", "output_rate": "--output-rate", "cap": "--cost-cap"}


def carry_recorded_gap(options: RunOptions, saved: RunRecord | None) -> tuple[RunOptions, bool]:
    """``options`` with run.json's gap override when the resume gives neither gap flag."""
    if (
        saved is None
        or saved.override_reason is None
        or options.min_gap_s is not None
        or (options.override_reason or "").strip()
    ):
        return options, False
    carried = dataclasses.replace(
        options, min_gap_s=saved.min_gap_s, override_reason=saved.override_reason
    )
    return carried, True


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return repr(value) if isinstance(value, str) else str(value)


def resume_changes(saved: RunRecord, wanted: RunRecord) -> list[str]:
    """One phrase per setting of this session that differs from run.json."""
    pairs = [(FLAGS[name], getattr(saved, name), getattr(wanted, name)) for name in FLAGS]
    pairs += [
        (flag, getattr(saved.cost, name), getattr(wanted.cost, name))
        for name, flag in COST_FLAGS.items()
    ]
    out = [f"{flag} {_show(b)} (run.json: {_show(a)})" for flag, a, b in pairs if a != b]
    keys = saved.extra.keys() | wanted.extra.keys()
    extra = sorted(k for k in keys if saved.extra.get(k) != wanted.extra.get(k))
    if extra:
        out.append(f"run metadata {', '.join(extra)} (differs from run.json's extra)")
    return out


def resume_line(run_dir: str, saved: RunRecord, wanted: RunRecord, carried: bool) -> str:
    """The line printed before a resumed session starts."""
    head = f"resuming {run_dir}"
    if carried:
        head += (
            f"; the recorded gap override is carried: --min-gap-s {_show(saved.min_gap_s)} "
            f"(protocol {_show(saved.protocol_min_gap_s)} s), reason {saved.override_reason!r}"
        )
    changes = resume_changes(saved, wanted)
    if changes:
        return f"{head}; settings that differ from run.json: {'; '.join(changes)}"
    return f"{head}; every setting as recorded in run.json"


class Stop(Exception):
    """A stop rule fired: the session ends with this reason."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(reason)
        self.reason, self.detail = reason, detail


def allowance_spent(state: JournalState, allow: int) -> str | None:
    """Why no request may be sent under ``--allow``, or None: the one place the allowance is
    counted, across every session of the run folder (a resume never grants fresh budget)."""
    if state.attempt_count >= allow:
        return f"{state.attempt_count} attempts recorded, --allow {allow}"
    return None


class Session:
    """One invocation of the runner on one run folder: the loop and its stop rules."""

    def __init__(
        self, s: Settings, journal: Journal, notify: Callable[[str], None] | None = None
    ) -> None:
        self.s = s
        self.journal = journal
        self.state = journal.state
        self.scrub = Scrubber(s.api_key)
        if s.simulation:
            self.clock: Any = SimClock(max(self.state.last_time or SIM_EPOCH, SIM_EPOCH))
        else:
            self.clock = RealClock()
        self.last_done_mono: float | None = None
        # An earlier session's last completion, anchored on first use (clock.anchor_gap).
        self.resume_gap: tuple[float, float, str] | None = None
        self.notify = notify
        self.failures_in_a_row = 0
        self.last = "-"
        plan = s.prepared.plan
        self.progress = Progress(
            s.progress, len(plan), len(self.state.attempts), "SIMULATION" if s.simulation else "run"
        )

    def append(self, type_: str, **fields: Any) -> dict[str, Any]:
        return self.journal.append(type_, **self.scrub(fields))

    def now(self) -> str:
        return iso_utc(self.clock.now())

    def since_done(self) -> float | None:
        """Seconds since the latest completion, to the microsecond (None before the first)."""
        if self.last_done_mono is not None:
            return round(self.clock.monotonic() - self.last_done_mono, 6)
        if self.state.last_done is None:
            return None
        if self.resume_gap is None:
            self.resume_gap = anchor_gap(self.clock, self.state.last_done, self.s.min_gap_s)
            if self.resume_gap[2] and self.notify is not None:
                self.notify(self.resume_gap[2])
        at_anchor, mono, _ = self.resume_gap
        return round(at_anchor + self.clock.monotonic() - mono, 6)

    def transport(self) -> Any:
        from needlepoint.run.transport import Transport

        mock = None
        if self.s.simulation:
            from needlepoint.run.simulate import Simulator

            sim = Simulator(
                self.s.simulate,
                self.s.prepared,
                self.clock,
                timeout_s=self.s.timeout_s,
                deadline_s=self.s.deadline_s,
                params=self.s.sim_params,
            )
            mock = sim.transport()
        return Transport(
            self.s.base_url or "http://simulation.invalid/v1",
            api_key=self.s.api_key,
            timeout_s=self.s.timeout_s,
            deadline_s=self.s.deadline_s,
            clock=self.clock,
            mock=mock,
            user_agent=f"needlepoint/{needlepoint.__version__}",
            path=ENDPOINTS[body_profile(self.s.prepared.protocol)],
        )

    def check_budget(self) -> None:
        """Stop rules that apply before a request may be sent."""
        spent = allowance_spent(self.state, self.s.allow)
        if spent is not None:
            raise Stop("allowance_spent", spent)
        if self.s.cost_cap is not None:
            if self.state.unknown_cost:
                seq = self.state.unknown_cost[-1]
                raise Stop(
                    "cost_unknown",
                    f"the cost of seq {seq} is unknown ({self.state.why_unknown(seq)}), so the "
                    f"cap of {self.s.cost_cap:g} cannot be enforced",
                )
            if self.state.spent >= self.s.cost_cap:
                raise Stop("cost_cap", f"spent {self.state.spent:.6f} of {self.s.cost_cap:g}")

    def wait_gap(self, seq: int) -> float | None:
        gap = self.since_done()
        while gap is not None and gap < self.s.min_gap_s:
            # At least a microsecond: a gap finer than that (1.0000004) would round to a
            # wait of 0, and a simulated clock, which a sleep of 0 never moves, would loop.
            remaining = max(round(self.s.min_gap_s - gap, 6), 0.000001)
            self.progress.waiting(seq, self.last, remaining)
            live = self.progress.mode in LIVE_MODES and not self.clock.simulated
            step = 1.0 if live else remaining  # a live countdown ticks each second
            self.clock.sleep(min(step, remaining))
            gap = self.since_done()
        return gap

    def check_outcome(self, seq: int, status: str, http_status: int | None) -> None:
        """Stop rules that apply after an outcome."""
        if http_status in self.s.stop_statuses:
            raise Stop("stop_status", f"HTTP {http_status} at seq {seq}")
        self.failures_in_a_row = self.failures_in_a_row + 1 if status == PROTOCOL_FAILURE else 0
        if self.failures_in_a_row >= self.s.max_consecutive_failures:
            raise Stop(
                "consecutive_failures",
                f"{self.failures_in_a_row} protocol failures in a row, the last at seq {seq}",
            )

    def one(self, transport: Any, seq: int, expected_sha: str) -> None:
        self.check_budget()
        gap = self.wait_gap(seq)
        outgoing = self.attempt(transport, seq, expected_sha, gap)
        try:
            ex = transport.send(outgoing)
        except BaseException as exc:  # KeyboardInterrupt mid-request: it may have executed
            self.interrupted(seq, exc)
            raise
        self.record(seq, ex)

    def attempt(self, transport: Any, seq: int, expected_sha: str, gap: float | None) -> Any:
        """Build the request and journal (fsync) its ``attempt`` record: before it is sent."""
        outgoing = transport.build(self.s.prepared.bodies[seq])
        if outgoing.sha256 != expected_sha:
            raise NeedlepointError(f"seq {seq}: body to send does not hash to plan.csv's value")
        self.progress.sending(seq, self.last)
        self.append("attempt", seq=seq, request_sha256=outgoing.sha256, time=self.now(), gap_s=gap)
        return outgoing

    def interrupted(self, seq: int, exc: BaseException) -> None:
        """Journal an attempt in flight when the process was interrupted: it may have executed.
        Once the status line had arrived, the status, kept headers and bytes read are kept."""
        arrived = getattr(exc, "exchange", None)
        if arrived is not None:
            self.append("outcome", **self.received(seq, arrived))
            return
        detail = f"{type(exc).__name__} while the request was in flight"
        self.append("outcome", **interrupted_fields(seq, self.now(), detail, False))

    def record(self, seq: int, ex: Any) -> None:
        """Journal what arrived for ``seq``, then apply the stop rules that follow an outcome."""
        # Whatever arrived is journalled before anything else can go wrong.
        record = self.append("outcome", **self.received(seq, ex))
        c = record["classification"]
        self.last_done_mono = self.clock.monotonic()
        self.last = c["kind"] or c["status"]
        self.progress.done(seq, self.last, self.s.min_gap_s)
        self.check_outcome(seq, c["status"], ex.http_status)

    def received(self, seq: int, ex: Any) -> dict[str, Any]:
        """The outcome fields of an exchange that got an answer (whole, or cut by Ctrl-C)."""
        # An echoing server: the key goes in every spelling, before anything is classified, so
        # the classification audit-run derives from the stored body is the one recorded.
        ex = dataclasses.replace(
            ex,
            body=self.scrub(ex.body),
            headers=self.scrub(ex.headers),
            error_detail=self.scrub(ex.error_detail),
        )
        return received_fields(
            seq,
            self.now(),
            ex,
            answer=self.s.prepared.answer_key[seq],
            model=self.s.model,
            unknown=self.s.prepared.protocol.get("unknown", "UNKNOWN"),
            rates=(self.s.input_rate, self.s.output_rate),
            profile=body_profile(self.s.prepared.protocol),
        )

    def run(self, run_json_sha256: str) -> tuple[str, str]:
        s = self.s
        dropped = self.journal.dropped_tail
        record = SessionRecord(
            session=len(self.state.sessions) + 1,
            time=self.now(),
            run_json_sha256=run_json_sha256,
            package_version=needlepoint.__version__,
            **s.limits(),
            dropped_tail_sha256=sha256_hex(dropped) if dropped else None,
            declaration_sha256=None if s.declaration is None else s.declaration.sha256,
            concurrency=s.concurrency if s.concurrency > 1 else None,
        )
        self.append("session", **record.to_plain())
        for seq in self.state.dangling:
            detail = "attempt journalled, but the process ended before its outcome"
            self.append("outcome", **interrupted_fields(seq, self.now(), detail, True))
        reason, detail = "complete", "every planned seq has been attempted"
        transport = self.transport()
        try:
            if s.concurrency > 1:
                send_concurrently(self, transport, Stop)
            else:
                for row in s.prepared.plan:
                    if row.seq not in self.state.attempts:
                        self.one(transport, row.seq, row.request_sha256)
        except Stop as stop:
            reason, detail = stop.reason, stop.detail
        except KeyboardInterrupt:
            reason, detail = "interrupted", "KeyboardInterrupt"
            self.append("stop", time=self.now(), reason=reason, detail=detail)
            raise
        except BaseException as exc:
            reason, detail = "crashed", f"{type(exc).__name__}: {exc}"
            self.append("stop", time=self.now(), reason=reason, detail=detail)
            raise
        finally:
            transport.close()
            self.progress.close(reason)
        self.append("stop", time=self.now(), reason=reason, detail=detail)
        return reason, detail


@dataclass(frozen=True)
class RunSummary:
    """How a session ended, and the run folder's totals across every session."""

    run_dir: Path
    simulation: bool
    stop_reason: str
    stop_detail: str
    allow: int
    attempts_total: int
    attempts_this_session: int
    counts: dict[str, int]
    cost_spent: float | None
    journal_sha256: str
    loop_wall_s: float = field(default=0.0, compare=False)
    # planned requests never attempted, and the resume line (empty for a new run folder)
    unattempted: int = 0
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """A short human summary (deterministic for a simulated run)."""
        label = "SIMULATION - not a model result. " if self.simulation else ""
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items())) or "none"
        cost = "unknown" if self.cost_spent is None else f"{self.cost_spent:.6f}"
        out = [
            f"{label}stopped: {self.stop_reason}: {self.stop_detail}",
            f"attempts: {self.attempts_total} of {self.allow} allowed "
            f"({self.attempts_this_session} this session); outcomes: {counts}",
            f"cost: {cost}; journal sha256 {self.journal_sha256}",
        ]
        if self.stop_reason == "allowance_spent" and self.unattempted:
            out.append(continue_hint(self.attempts_total, self.unattempted))
        return out


def continue_hint(attempts: int, unattempted: int) -> str:
    """How to go on once the allowance is spent: the same command with a larger total --allow."""
    return (
        f"to continue: run the same command again with a larger total --allow (it counts every "
        f"attempt in this run folder): --allow {attempts + unattempted} sends the {unattempted} "
        "planned requests not yet attempted"
    )


def run_protocol(
    prepared_dir: str | Path,
    run_dir: str | Path,
    options: RunOptions,
    notify: Callable[[str], None] | None = None,
) -> RunSummary:
    """Run (or resume) a prepared folder into ``run_dir``; the notebook and CLI entry point.

    ``options`` is checked (``options.check_settings``) before anything is written. A resume
    carries run.json's gap override unless the gap flags are given again, and ``notify``
    receives, before anything is sent, one line naming every setting that differs from run.json.
    """
    root = Path(run_dir)
    # The folders first (cheap, and the likeliest mistake), then every option and the key.
    if root.exists() and not root.is_dir():
        raise NeedlepointError(f"{root}: exists and is not a folder")
    saved = None
    if run_folder.has_run_record(root):
        saved = run_folder.read_run_record(root)
    elif root.is_dir():
        _refuse_foreign(root)
    options, carried = carry_recorded_gap(options, saved)
    s = check_settings(prepared_dir, options)
    for warning in s.warnings:  # a short test key accepted for a server you own
        (notify or (lambda line: print(line, file=sys.stderr, flush=True)))(warning)
    root.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    with run_folder.FolderLock(root):
        if run_folder.has_run_record(root):
            record = build_run_record(s, "", root)
            saved = run_folder.read_run_record(root)
            run_folder.check_resume(root, saved, record)
            run_folder.check_not_rewound(root)
            run_sha = run_folder.run_record_sha256(root)
            notes.append(resume_line(str(root), saved, record, carried))
            if notify is not None:
                notify(notes[-1])
        else:
            _refuse_foreign(root)
            created = iso_utc(SIM_EPOCH if s.simulation else time.time())
            run_sha = run_folder.write_run_record(root, build_run_record(s, created, root))
        run_folder.append_provenance(root, iso_utc(time.time()))
        journal = Journal(root, fsync=s.fsync)
        try:
            summary = _session(s, root, journal, run_sha, notify)
            return dataclasses.replace(summary, notes=(*notes, *summary.notes))
        finally:
            run_folder.write_context_manifest(root, s.prepared, journal)
            journal.close()
            run_folder.append_provenance(root, iso_utc(time.time()), end=True)


def _refuse_foreign(root: Path) -> None:
    """A folder without run.json must be empty (but for a lock): it becomes a new run folder."""
    if any(p.name != run_folder.LOCK_NAME for p in root.iterdir()):
        raise NeedlepointError(f"{root}: not empty and has no run.json; use a new folder")


def _session(
    s: Settings,
    root: Path,
    journal: Journal,
    run_sha: str,
    notify: Callable[[str], None] | None = None,
) -> RunSummary:
    state = journal.state
    remaining = [r.seq for r in s.prepared.plan if r.seq not in state.attempts]
    before = state.attempt_count
    start = time.perf_counter()
    said: list[str] = []  # what the session told the user (a clock step at the resume)
    if not remaining:
        reason, detail = "complete", "every planned seq has been attempted; nothing to send"
    elif (spent := allowance_spent(state, s.allow)) is not None:
        raise NeedlepointError(
            f"{root}: allowance spent: {spent}; resuming never grants fresh budget; "
            + continue_hint(state.attempt_count, len(remaining))
        )
    elif s.cost_cap is not None and state.unknown_cost:
        raise NeedlepointError(
            f"{root}: the cost of seq {state.unknown_cost[0]} is unknown, so --cost-cap "
            "cannot be enforced; resume without --cost-cap to accept that"
        )
    else:

        def tell(line: str) -> None:
            said.append(line)
            if notify is not None:
                notify(line)

        session = Session(s, journal, tell)
        reason, detail = session.run(run_sha)
    state = journal.state
    unattempted = sum(r.seq not in state.attempts for r in s.prepared.plan)
    return RunSummary(
        run_dir=root,
        simulation=s.simulation,
        stop_reason=reason,
        stop_detail=detail,
        allow=s.allow,
        attempts_total=state.attempt_count,
        attempts_this_session=state.attempt_count - before,
        counts=state.counts(),
        cost_spent=None if state.unknown_cost else round(state.spent, 12),
        journal_sha256=journal.head,
        loop_wall_s=time.perf_counter() - start,
        unattempted=unattempted,
        notes=tuple(said),
    )


def prepared_fields(p: Prepared, run_dir: Path) -> dict[str, Any]:
    """The run.json fields that the prepared folder fixes, whoever executed the run (this runner
    or an imported inspect log): the format, the package, where the folder is from the run, and
    the protocol and design it froze."""
    return {
        "format": RUN_FORMAT,
        "kind": RUN_KIND,
        "package_version": needlepoint.__version__,
        "prepared_dir": relative_path(p.root, run_dir),
        "prepared_fingerprint": p.fingerprint,
        "protocol_id": p.protocol.get("protocol_id"),
        "protocol_version": p.protocol.get("version"),
        "design_fingerprint": design_fingerprint(p.protocol),
        "body_profile": body_profile(p.protocol),
    }


def build_run_record(s: Settings, created: str, run_dir: Path) -> RunRecord:
    """The run.json record for checked settings ``s``.

    Provenance that changes with every commit (git, interpreter, packages) goes to
    provenance.jsonl instead, so a simulated run's journal hash stays a pure function of the run.
    """
    p = s.prepared
    sim = None
    if s.simulate is not None:
        from needlepoint.run.simulate import FAULT_CYCLE

        sim = SimulationRecord(
            mode=s.simulate,
            params=s.sim_params,
            fault_cycle=FAULT_CYCLE if s.simulate == "faulty" else None,
        )
    return RunRecord(
        **prepared_fields(p, run_dir),
        created=created,
        simulation=s.simulation,
        simulate=sim,
        model=s.model,
        base_url=s.base_url,
        api_key_env=s.api_key_env,
        allow=s.allow,
        min_gap_s=s.min_gap_s,
        protocol_min_gap_s=s.protocol_min_gap_s,
        override_reason=s.override_reason,
        timeout_s=s.timeout_s,
        deadline_s=s.deadline_s,
        cost=CostRecord(input_rate=s.input_rate, output_rate=s.output_rate, cap=s.cost_cap),
        extra=dict(s.run_meta),
        allow_insecure_http=True if s.allow_insecure_http else None,
        declaration=None
        if s.declaration is None
        else DeclarationRef(relative_path(s.declaration.path, run_dir), s.declaration.sha256),
        no_key=True if s.no_key else None,
        self_hosted=s.self_hosted,
        concurrency=s.concurrency if s.concurrency > 1 else None,
    )
