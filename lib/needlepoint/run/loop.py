"""The run loop: frozen bytes, frozen order, an explicit allowance, no retries, a journal first.

Before each request an ``attempt`` record is fsynced; after it an ``outcome`` record. Resuming
continues with the next unattempted seq; an attempt without an outcome becomes
``indeterminate_interrupted`` and is never sent again. The allowance, the money spent and the
last completion time are read back from the journal, so a resume never grants fresh budget.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import MAX_JSON_FILE_BYTES, sha256_hex
from needlepoint.run import folder as run_folder
from needlepoint.run import provenance
from needlepoint.run.clock import SIM_EPOCH, iso_utc
from needlepoint.run.journal import Journal
from needlepoint.run.options import DEFAULT_TIMEOUT_S, RunOptions, Settings, check_settings
from needlepoint.run.resume import carry_recorded_gap, resume_line
from needlepoint.run.session import Session
from needlepoint.safeio import read_limited

__all__ = ["DEFAULT_TIMEOUT_S", "RunOptions", "RunSummary", "run_protocol"]


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

    ``options`` is checked (``settings.check_settings``) before anything is written. A resume
    carries run.json's gap override unless the gap flags are given again, and ``notify``
    receives, before anything is sent, one line naming every setting that differs from run.json.
    """
    root = Path(run_dir)
    # The folders first (cheap, and the likeliest mistake), then every option and the key.
    if root.exists() and not root.is_dir():
        raise NeedlepointError(f"{root}: exists and is not a folder")
    saved = None
    if (root / run_folder.RUN_NAME).exists():
        saved = run_folder.read_run_record(root)
    elif root.is_dir():
        _refuse_foreign(root)
    options, carried = carry_recorded_gap(options, saved)
    s = check_settings(prepared_dir, options)
    root.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    with run_folder.FolderLock(root):
        run_json = root / run_folder.RUN_NAME
        if run_json.exists():
            record = run_folder.build_run_record(s, "", root)
            saved = run_folder.read_run_record(root)
            run_folder.check_resume(root, saved, record)
            run_folder.check_not_rewound(root)
            run_sha = sha256_hex(read_limited(run_json, MAX_JSON_FILE_BYTES, follow=False))
            notes.append(resume_line(str(root), saved, record, carried))
            if notify is not None:
                notify(notes[-1])
        else:
            _refuse_foreign(root)
            created = iso_utc(SIM_EPOCH if s.simulation else time.time())
            run_sha = run_folder.write_run_record(
                root, run_folder.build_run_record(s, created, root)
            )
        provenance.append_provenance(root, iso_utc(time.time()))
        journal = Journal(root, fsync=s.fsync)
        try:
            return dataclasses.replace(_session(s, root, journal, run_sha), notes=tuple(notes))
        finally:
            run_folder.write_context_manifest(
                root,
                run_folder.context_manifest(
                    run_folder.relative_prepared(s.prepared.root, root),
                    s.prepared.fingerprint,
                    s.prepared.manifest.get("files", {}),
                    journal.state,
                    journal.count,
                    journal.head,
                ),
            )
            journal.close()
            provenance.append_provenance(root, iso_utc(time.time()), end=True)


def _refuse_foreign(root: Path) -> None:
    """A folder without run.json must be empty (but for a lock): it becomes a new run folder."""
    if any(p.name != run_folder.LOCK_NAME for p in root.iterdir()):
        raise NeedlepointError(f"{root}: not empty and has no run.json; use a new folder")


def _session(s: Settings, root: Path, journal: Journal, run_sha: str) -> RunSummary:
    state = journal.state
    remaining = [r.seq for r in s.prepared.plan if r.seq not in state.attempts]
    before = state.attempt_count
    start = time.perf_counter()
    if not remaining:
        reason, detail = "complete", "every planned seq has been attempted; nothing to send"
    elif state.attempt_count >= s.allow:
        raise NeedlepointError(
            f"{root}: allowance spent: {state.attempt_count} attempts recorded, --allow "
            f"{s.allow}; resuming never grants fresh budget; "
            + continue_hint(state.attempt_count, len(remaining))
        )
    elif s.cost_cap is not None and state.unknown_cost:
        raise NeedlepointError(
            f"{root}: the cost of seq {state.unknown_cost[0]} is unknown, so --cost-cap "
            "cannot be enforced; resume without --cost-cap to accept that"
        )
    else:
        session = Session(s, journal)
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
    )
