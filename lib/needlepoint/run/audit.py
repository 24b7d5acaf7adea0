"""``needlepoint audit-run RUNDIR``: prove after the fact that a run folder was not edited and
that the runner kept its own rules.

It checks the hash chain and head, run.json against every session record, the prepared folder
against its manifest, each attempt against plan.csv (right bytes, each seq at most once, each
the next unattempted seq in plan order), the
write-ahead order, the allowance, the spacing, the stop rules, each recorded classification
against a fresh one, the context manifest, and results.csv against the journal. A session run
with ``--concurrency N`` (its record says so) may interleave attempts with outcomes, with at
most N attempts open at a time; any other session, one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from needlepoint.design.prepared import frozen_model
from needlepoint.design.profiles import body_profile
from needlepoint.design.protocol import design_fingerprint
from needlepoint.errors import NeedlepointError
from needlepoint.run.declaration import check_declaration
from needlepoint.run.folder import (
    CONTEXT_NAME,
    RUN_NAME,
    read_context_manifest,
    read_run_record,
    run_record_sha256,
)
from needlepoint.run.journal import JOURNAL_NAME, read_chain, walk
from needlepoint.run.records import RunRecord, decode_body
from needlepoint.run.results import RESULTS_NAME, Rows, differs_at, load_frozen_plan
from needlepoint.run.scoring import PROTOCOL_FAILURE, classify_safely
from needlepoint.safeio import open_read
from needlepoint.schema import to_plain

_EPS = 1e-6


@dataclass
class RunAuditReport:
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def count(self, name: str) -> None:
        self.checked[name] = self.checked.get(name, 0) + 1

    def lines(self) -> list[str]:
        out = [f"checked {k}: {v}" for k, v in sorted(self.checked.items())]
        out += [f"WARNING {w}" for w in self.warnings]
        out += [f"PROBLEM {p}" for p in self.problems]
        out.append("audit-run: " + ("ok" if self.ok else f"{len(self.problems)} problem(s)"))
        return out


class _Walk:
    """Replays the journal record by record, checking each against the runner's rules."""

    def __init__(self, audit: RunAuditReport, prepared: Any, run_sha: str, path: Path) -> None:
        self.a = audit
        self.p = prepared
        self.run_sha = run_sha
        self.path = path
        self.plan = {row.seq: row for row in prepared.plan}
        # The runner sends the next unattempted seq in plan order, every time (several at once
        # with concurrency, but still started in that order): the position of the next one.
        self.order = [row.seq for row in prepared.plan]
        self.next_at = 0
        self.out_of_order: int | None = None  # the first seq sent out of plan order
        self.model = frozen_model(prepared)
        self.session: dict[str, Any] | None = None
        self.attempted: set[int] = set()
        # Attempted, outcome not yet seen: at most one, or the session's ``concurrency``.
        self.pending: set[int] = set()
        self.dangling: set[int] = set()  # left pending by a process that died
        self.concurrency = 1
        self.recovering = False
        self.attempts = 0
        self.spent = 0.0
        self.any_outcome = False
        self.stopped_reason: str | None = None  # a stop rule fired: no attempt may follow
        self.failures = 0

    def problem(self, n: int, text: str) -> None:
        self.a.problems.append(f"{self.path}:{n + 1}: {text}")

    def record(self, r: dict[str, Any]) -> None:
        n, kind = r.get("n", -1), r.get("type")
        if self.session is None and kind != "session":
            self.problem(n, "the journal must start with a session record")
        handler = getattr(self, f"_{kind}", None)
        if handler is None:
            self.problem(n, f"unknown record type {kind!r}")
        else:
            handler(n, r)

    def _session(self, n: int, r: dict[str, Any]) -> None:
        self.a.count("sessions")
        self.dangling, self.pending = self.pending, set()
        self.concurrency = r.get("concurrency") or 1
        if r.get("run_json_sha256") != self.run_sha:
            self.problem(n, "run_json_sha256 differs from run.json (run.json was edited)")
        self.session, self.stopped_reason, self.failures = r, None, 0
        self.recovering = True

    def _attempt(self, n: int, r: dict[str, Any]) -> None:
        self.a.count("attempts")
        self.recovering = False
        seq, s = r.get("seq"), self.session or {}
        row = self.plan.get(seq)
        if row is None:
            self.problem(n, f"seq {seq!r} is not in plan.csv")
        elif r.get("request_sha256") != row.request_sha256:
            self.problem(n, f"seq {seq}: request_sha256 differs from plan.csv")
        if seq in self.attempted:
            self.problem(n, f"seq {seq} was sent a second time")
        else:
            self._check_order(n, seq)
        if self.dangling or len(self.pending) >= self.concurrency:
            other = min(self.dangling or self.pending)
            self.problem(n, f"seq {seq} sent before seq {other} had its outcome")
        if self.stopped_reason:
            self.problem(n, f"seq {seq} sent after a stop rule fired ({self.stopped_reason})")
        self.attempts += 1
        if self.attempts > s.get("allow", 0):
            self.problem(n, f"attempt {self.attempts} exceeds the allowance {s.get('allow')}")
        gap = r.get("gap_s")
        if gap is None and self.any_outcome:
            self.problem(n, f"seq {seq}: no gap recorded after an earlier completion")
        if gap is not None and gap < s.get("min_gap_s", 0) - _EPS:
            self.problem(n, f"seq {seq}: gap {gap} s is below the minimum {s.get('min_gap_s')}")
        self.attempted.add(seq)
        if isinstance(seq, int):
            self.pending.add(seq)

    def _check_order(self, n: int, seq: Any) -> None:
        """Each attempt is of the next unattempted seq in plan order; the first that is not
        is named (a re-chained journal with its records reordered passes every hash check)."""
        while self.next_at < len(self.order) and self.order[self.next_at] in self.attempted:
            self.next_at += 1
        expected = self.order[self.next_at] if self.next_at < len(self.order) else None
        if seq != expected and self.out_of_order is None and seq in self.plan:
            self.out_of_order = seq
            self.problem(
                n,
                f"seq {seq} was sent out of plan order: the next unattempted seq in plan "
                f"order was {expected} (the first seq out of order)",
            )

    def _outcome(self, n: int, r: dict[str, Any]) -> None:
        self.a.count("outcomes")
        seq = r.get("seq")
        if r.get("recovered"):
            if not self.recovering or seq not in self.dangling:
                self.problem(n, f"seq {seq}: recovered outcome not for the attempt left open")
            self.dangling.discard(seq)  # type: ignore[arg-type]
        elif seq not in self.pending:
            self.problem(n, f"outcome for seq {seq} does not follow its attempt")
        else:
            self.pending.discard(seq)  # type: ignore[arg-type]
        self.any_outcome = True
        self._reclassify(n, r)
        s = self.session or {}
        status = (r.get("classification") or {}).get("status")
        if r.get("recovered"):
            return
        if r.get("http_status") in set(self.p.protocol["runner"]["stop_statuses"]):
            self.stopped_reason = f"HTTP {r.get('http_status')}"
        self.failures = self.failures + 1 if status == PROTOCOL_FAILURE else 0
        if self.failures >= int(self.p.protocol["runner"]["max_consecutive_failures"]):
            self.stopped_reason = "consecutive failures"
        self.spent += r.get("cost") or 0.0
        cap = s.get("cost_cap")
        if cap is not None and r.get("cost") is None:
            self.stopped_reason = "unknown cost with a cap"
        elif cap is not None and self.spent >= cap:
            self.stopped_reason = "cost cap reached"

    def _reclassify(self, n: int, r: dict[str, Any]) -> None:
        seq = r.get("seq")
        if seq not in self.plan:
            return
        fresh = classify_safely(
            http_status=r.get("http_status"),
            transport_error=r.get("error"),
            body=decode_body(r),
            answer=self.p.answer_key.get(seq, {}),
            model=self.model,
            unknown=self.p.protocol.get("unknown", "UNKNOWN"),
            profile=body_profile(self.p.protocol),
        )
        if to_plain(fresh) != r.get("classification"):
            self.problem(n, f"seq {seq}: recorded classification differs from the body's")

    def _stop(self, n: int, r: dict[str, Any]) -> None:
        self.a.count("stops")


def audit_run(run_dir: str | Path, prepared_dir: str | Path | None = None) -> RunAuditReport:
    """Audit one run folder; problems make it fail, warnings do not.

    The journal is read twice, one record at a time: first for its chain and schema, then
    through the rules; memory stays that of one record, whatever the journal's size.
    """
    root = Path(run_dir)
    audit = RunAuditReport()
    run = read_run_record(root)
    run_sha = run_record_sha256(root)
    walked = walk(root)
    chain, state = walked.chain, walked.state
    audit.problems += chain.problems
    audit.warnings += chain.warnings
    audit.checked["journal records"] = chain.count
    try:
        prepared = load_frozen_plan(root, run, prepared_dir)
    except NeedlepointError as exc:
        audit.problems.append(f"prepared folder: {exc}")
        return audit
    _check_variant(root, run, prepared.protocol, audit)
    if not chain.schema_ok:
        # Mistyped records cannot be judged by the rules; the problems above name them.
        audit.problems.append("journal: records do not follow the schema; rules not checked")
        return audit
    rules = _Walk(audit, prepared, run_sha, root / JOURNAL_NAME)
    again = read_chain(root, lambda record, at: rules.record(record), keep=False)
    if again.head != chain.head and not chain.live:
        audit.problems.append(f"{root / JOURNAL_NAME}: changed while it was audited")
    for seq in sorted(rules.pending):
        audit.warnings.append(f"seq {seq} has no outcome yet (the runner died)")
    _check_context(root, state.sent, prepared.fingerprint, audit)
    found = check_declaration(root, run, state)
    audit.problems += found.problems
    audit.warnings += found.warnings
    for name in found.passed:
        audit.count(name)
    results = root / RESULTS_NAME
    if os.path.lexists(results):
        audit.count("results.csv")
        rows = Rows(root, prepared.plan, state, run.simulation, chain.head)
        if differs_at(results, rows) is not None:
            _check_stale(root, results, prepared.plan, run.simulation, audit)
    return audit


def _check_stale(root: Path, results: Path, plan: Any, simulation: bool, a: RunAuditReport) -> None:
    """results.csv differs from the journal: stale (derived, exactly, from an earlier state of
    this journal, e.g. while the run went on) is a warning; anything else is a problem."""
    try:
        with open_read(results) as fh:  # every row ends with the journal hash it came from
            fh.seek(max(os.fstat(fh.fileno()).st_size - 65, 0))
            stamp = fh.read().rstrip(b"\n")[-64:].decode("ascii")
    except (OSError, NeedlepointError, UnicodeDecodeError):
        stamp = ""
    earlier = walk(root, upto=stamp)
    rows = Rows(root, plan, earlier.state, simulation, stamp)
    if earlier.reached and differs_at(results, rows) is None:
        a.warnings.append(
            f"{results}: derived when the journal had {earlier.state.records} records (stale, "
            "not edited); "
            f"rerun `needlepoint results {root}`"
        )
    else:
        a.problems.append(f"{results}: differs from the journal's re-derivation")


def _check_context(root: Path, attempts: Any, fingerprint: str, audit: RunAuditReport) -> None:
    path = root / CONTEXT_NAME
    if not os.path.lexists(path):
        audit.warnings.append(f"{path}: missing")
        return
    try:
        manifest = read_context_manifest(root)
    except NeedlepointError as exc:
        audit.problems.append(str(exc))
        return
    audit.count("context manifest")
    if manifest.get("prepared_manifest_sha256") != fingerprint:
        audit.problems.append(f"{path}: prepared_manifest_sha256 differs from the run's")
    sent = [(r.seq, r.request_sha256) for r in attempts]
    listed = [(e.get("seq"), e.get("request_sha256")) for e in manifest.get("sent", [])]
    if listed != sent[: len(listed)]:
        audit.problems.append(f"{path}: its sent list differs from the journal's attempts")
    elif len(listed) < len(sent):
        audit.warnings.append(f"{path}: lists {len(listed)} of {len(sent)} sent (runner died)")


def _check_variant(root: Path, run: RunRecord, protocol: Any, audit: RunAuditReport) -> None:
    """run.json's design fingerprint and body profile must be the prepared protocol's.

    A run folder made before they were recorded has neither: nothing to compare.
    """
    expected = {
        "design_fingerprint": design_fingerprint(protocol),
        "body_profile": body_profile(protocol),
    }
    for name, value in expected.items():
        if getattr(run, name) is not None:
            audit.count(f"run.json {name}")
            if getattr(run, name) != value:
                audit.problems.append(
                    f"{root / RUN_NAME}: {name} differs from the prepared protocol's"
                )
