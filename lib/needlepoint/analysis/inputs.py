"""Read and validate the results table the analysis runs on, and refuse anything it must not pool.

Every row is checked against the prepared plan it claims to come from: plan columns and request
hash must match, status and kind must be a documented pair, valid responses must re-score to the
recorded status, and numbers are either empty (unknown) or well-formed. A problem is one line
naming the file, the line and the field.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.analysis.context import RunContext, near_kind, run_context, run_facts
from needlepoint.analysis.guards import check_pilot
from needlepoint.analysis.results_table import read_results_csv
from needlepoint.design.prepared import PlanCell, Prepared, load_prepared
from needlepoint.design.protocol import is_pilot
from needlepoint.design.schema import PLAN_COLUMNS
from needlepoint.design.verify import verify_prepared
from needlepoint.errors import NeedlepointError
from needlepoint.run.folder import read_run_record
from needlepoint.run.results import RESULT_COLUMNS, load_run_results
from needlepoint.run.scoring import (
    CORRECT,
    ERROR,
    ERROR_KINDS,
    PROTOCOL_FAILURE,
    PROTOCOL_FAILURE_KINDS,
    STATUSES,
    UNEXECUTED,
    java_trim,
    lenient_correct,
    score_text,
)

_INT_FIELDS = ("http_status", "prompt_tokens", "completion_tokens", "reasoning_tokens")
_FLOAT_FIELDS = ("latency_s", "cost")
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Outcome(PlanCell):
    """One validated results row; ``None`` in a number field means unknown, never zero."""

    status: str
    kind: str
    http_status: int | None
    latency_s: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None  # usage.completion_tokens_details, when the server reports it
    cost: float | None
    lenient: bool = False  # exploratory (scoring.lenient_correct); the decision never reads it
    near_kind: str | None = None  # a wrong code naming a near name: that name's kind

    @property
    def valid(self) -> bool:
        """Protocol-valid: a scored answer, right or wrong."""
        return self.status in (CORRECT, ERROR)

    @property
    def category(self) -> str:
        """valid, protocol_failure, indeterminate or unexecuted."""
        if self.valid:
            return "valid"
        if self.status == PROTOCOL_FAILURE and self.kind.startswith("indeterminate"):
            return "indeterminate"
        return self.status


@dataclass(frozen=True)
class AnalysisInput:
    """Everything the analysis needs: the frozen protocol, its fingerprint and one run's rows."""

    protocol: dict[str, Any]
    fingerprint: str
    outcomes: tuple[Outcome, ...]
    simulation: bool
    journal_sha256: str | None
    source: str
    # Why the rows are taken on trust, when no journal re-derived them (a results table).
    unverified: str | None = None
    context: RunContext | None = None  # endpoint host, dates, sessions, prompt sizes
    sessions: Mapping[int, int] | None = None  # seq -> the session that sent it (journal only)


# A results table is checked row by row against the prepared plan, but nothing proves that its
# statuses and its simulation flag are what a journal recorded.
UNVERIFIED_TABLE = (
    "its rows and simulation flag come from a results table and were not verified against a "
    "run journal"
)


def _parse_number(text: str, kind: type, where: str, field: str) -> Any:
    if text == "":
        return None
    try:
        value = kind(text)
    except ValueError:
        raise NeedlepointError(f"{where}: field {field}: not a number: {text!r}") from None
    if (kind is float and not math.isfinite(value)) or value < 0:
        raise NeedlepointError(f"{where}: field {field}: must be finite and >= 0, got {text!r}")
    return value


def _check_status(row: Mapping[str, str], answer: Mapping, unknown: str, where: str) -> bool:
    """Check the row's status and kind; return whether it is leniently correct (exploratory)."""
    status, kind = row["status"], row["kind"]
    if status not in STATUSES:
        raise NeedlepointError(f"{where}: field status: {status!r} is not one of {STATUSES}")
    allowed = {ERROR: ERROR_KINDS, PROTOCOL_FAILURE: PROTOCOL_FAILURE_KINDS}.get(status, ("",))
    if kind not in allowed:
        raise NeedlepointError(f"{where}: field kind: {kind!r} is not allowed with status {status}")
    if status == UNEXECUTED and any(row[f] for f in ("response_text", *_INT_FIELDS, "latency_s")):
        raise NeedlepointError(f"{where}: field status: unexecuted but a response is recorded")
    if status in (CORRECT, ERROR):
        # The table may come from elsewhere: a valid answer must score as recorded.
        trimmed = java_trim(row["response_text"])
        scored = score_text(trimmed, answer, unknown)
        if scored != (status, kind):
            raise NeedlepointError(
                f"{where}: field status: recorded {status}/{kind or '-'} but the response "
                f"text scores as {scored[0]}/{scored[1] or '-'}"
            )
        return lenient_correct(trimmed, answer["expected"])
    return False


def validate_rows(
    rows: Iterable[tuple[int, Mapping[str, str]]], prepared: Prepared, name: str
) -> tuple[tuple[Outcome, ...], bool, str | None]:
    """Check ``(line, row)`` pairs against the prepared plan; return outcomes in seq order."""
    plan = {p.seq: p for p in prepared.plan}
    unknown = prepared.protocol.get("unknown", "UNKNOWN")
    seen: dict[int, int] = {}
    outcomes: list[Outcome] = []
    first: tuple[int, str, str] | None = None
    for line, row in rows:
        where = f"{name}:{line}"
        missing = [c for c in RESULT_COLUMNS if row.get(c) is None]
        if missing:
            raise NeedlepointError(f"{where}: field {missing[0]}: missing")
        try:
            seq = int(row["seq"])
        except ValueError:
            raise NeedlepointError(f"{where}: field seq: not an integer: {row['seq']!r}") from None
        if seq not in plan:
            raise NeedlepointError(f"{where}: field seq: {seq} is not in the prepared plan")
        if seq in seen:
            raise NeedlepointError(f"{where}: field seq: {seq} repeats line {seen[seq]}")
        seen[seq] = line
        planned = plan[seq]
        for col in PLAN_COLUMNS[1:]:
            if row[col] != str(getattr(planned, col)):
                raise NeedlepointError(
                    f"{where}: field {col}: {row[col]!r} does not match the prepared plan "
                    f"({getattr(planned, col)!r}); wrong prepared folder or another protocol?"
                )
        if row["simulation"] not in ("true", "false"):
            raise NeedlepointError(f"{where}: field simulation: must be true or false")
        journal = row["journal_sha256"]
        if journal and (len(journal) != 64 or not set(journal) <= _HEX):
            raise NeedlepointError(f"{where}: field journal_sha256: not a SHA-256 hex digest")
        if first is None:
            first = (line, row["simulation"], journal)
        elif row["simulation"] != first[1]:
            raise NeedlepointError(
                f"{where}: field simulation: {row['simulation']} but line {first[0]} says "
                f"{first[1]}; simulated and live rows are never pooled"
            )
        elif journal != first[2]:
            raise NeedlepointError(
                f"{where}: field journal_sha256: differs from line {first[0]}; rows of "
                "different runs are never pooled"
            )
        lenient = _check_status(row, prepared.answer_key[seq], unknown, where)
        near = near_kind(row, prepared.answer_key[seq])
        numbers = {f: _parse_number(row[f], int, where, f) for f in _INT_FIELDS}
        numbers |= {f: _parse_number(row[f], float, where, f) for f in _FLOAT_FIELDS}
        outcomes.append(
            Outcome(
                seq=seq,
                block=planned.block,
                pair=planned.pair,
                case=planned.case,
                length=planned.length,
                similarity=planned.similarity,
                condition=planned.condition,
                order=planned.order,
                status=row["status"],
                kind=row["kind"],
                **numbers,
                lenient=lenient,
                near_kind=near,
            )
        )
    absent = sorted(set(plan) - set(seen))
    if absent:
        raise NeedlepointError(
            f"{name}: field seq: planned seq {absent[0]} has no row ({len(absent)} missing); "
            "unexecuted requests must be listed as unexecuted"
        )
    if first is None:
        raise NeedlepointError(f"{name}: no rows")
    outcomes.sort(key=lambda o: o.seq)
    return tuple(outcomes), first[1] == "true", first[2] or None


def _verified(prepared_dir: str | Path, pilot: bool = False) -> Prepared:
    report = verify_prepared(prepared_dir)
    if not report.ok:
        raise NeedlepointError(
            f"{prepared_dir}: prepared folder fails verify: {report.problems[0]}"
        )
    prepared = load_prepared(prepared_dir)
    check_pilot(prepared_dir, is_pilot(prepared.protocol), pilot, "its protocol's rationale")
    return prepared


def from_results_csv(csv_path: str | Path, prepared_dir: str | Path) -> AnalysisInput:
    """A results table made elsewhere, checked row by row against a verified prepared folder."""
    prepared = _verified(prepared_dir)
    outcomes, simulation, journal = validate_rows(
        read_results_csv(csv_path), prepared, str(csv_path)
    )
    return AnalysisInput(
        prepared.protocol,
        prepared.fingerprint,
        outcomes,
        simulation,
        journal,
        "results table",
        unverified=UNVERIFIED_TABLE,
        context=run_context(prepared, outcomes, None),
    )


def from_run(
    run_dir: str | Path, prepared_dir: str | Path | None = None, *, pilot: bool = False
) -> AnalysisInput:
    """A run folder re-derived from its journal (an edited results.csv is refused); a pilot's
    run is refused unless ``pilot`` is set, and then only a pilot's run is read."""
    extra = read_run_record(Path(run_dir)).extra
    check_pilot(run_dir, extra.get("pilot") is True, pilot, "run.json extra.pilot")
    run = load_run_results(run_dir, prepared_dir)
    prepared = _verified(run.prepared_dir, pilot)
    if prepared.fingerprint != run.prepared_fingerprint:
        raise NeedlepointError(
            f"{run_dir}: run was made from prepared fingerprint {run.prepared_fingerprint[:12]}, "
            f"but {run.prepared_dir.name} has {prepared.fingerprint[:12]}"
        )
    numbered = ((i + 2, row) for i, row in enumerate(run.rows))  # one row at a time
    name = f"{Path(run_dir).name}/results (re-derived from the journal)"
    outcomes, simulation, journal = validate_rows(numbered, prepared, name)
    if simulation != run.simulation or (journal or "") != run.journal_sha256:
        raise NeedlepointError(f"{run_dir}: run record and its rows disagree on simulation/journal")
    context, sessions = run_facts(Path(run_dir), prepared, outcomes)
    return AnalysisInput(
        prepared.protocol, prepared.fingerprint, outcomes, simulation, journal, "run journal",
        context=context, sessions=sessions,
    )  # fmt: skip


def refuse_pooling(inputs: Sequence[AnalysisInput], names: Sequence[str]) -> None:
    """The preregistered analysis covers one run; say precisely why several cannot be pooled."""
    if len(inputs) < 2:
        return
    base = inputs[0]
    for inp, name in zip(inputs[1:], names[1:], strict=True):
        if inp.fingerprint != base.fingerprint:
            raise NeedlepointError(
                f"{name}: protocol fingerprint {inp.fingerprint[:12]} differs from {names[0]} "
                f"({base.fingerprint[:12]}); runs of different protocols are never pooled"
            )
        if inp.simulation != base.simulation:
            raise NeedlepointError(
                f"{name}: simulated and live runs are never pooled ({names[0]} is "
                f"{'simulated' if base.simulation else 'live'})"
            )
    raise NeedlepointError(
        f"{names[1]}: the preregistered analysis covers one run; analyse each run on its own"
    )
