"""The run the analysis reads: its results table validated row by row, and what was run where.

Every row is checked against the prepared plan it claims to come from: plan columns and request
hash must match, status and kind must be a documented pair, valid responses must re-score to the
recorded status, and numbers are either empty (unknown) or well-formed. A problem is one line
naming the file, the line and the field. A results cell may hold a whole response body, so the
reader accepts cells up to the runner's body limit, escaped for CSV.

A pilot is refused as a main run: it runs a design on held-out materials to calibrate it
(``needlepoint.pilot``); its prepared protocol carries ``rationale.kind: "pilot"`` and its
run.json ``extra.pilot: true``, and the calibration reads nothing else.

The run's context (the headline's facts) comes from the run folder: the endpoint's host (from
run.json's base URL, never the full URL or a key), the first and last date and the sessions
(from the journal), and how long the prompts of each background length are: in tokens counted
by the served tokenizer (``token_counts.json`` in the prepared folder, when it belongs to these
very materials), else in the prompt tokens the endpoint reported (``usage.prompt_tokens``), else
in characters, labelled as such.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from needlepoint.analysis.record import LengthSize, RunContext
from needlepoint.design.prepared import PlanCell, Prepared, load_prepared
from needlepoint.design.profiles import text_chars
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
from needlepoint.safeio import open_read

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
    # Near names placed before the target (answer key, depth designs only; None in v1 and v2).
    near_before: int | None = None
    # A wrong code naming a near name placed before the target ("before") or after it
    # ("after"); None otherwise, and wherever the answer key does not say (v1 and v2).
    near_side: str | None = None

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


# The largest value each number of a results table may hold, checked before any arithmetic: a
# sum or a mean of values inside these stays finite (1e308 once overflowed to inf, and a
# 4,000-digit token count overflowed a float). Token counts: what usage may report (2^53 - 1);
# latency: the longest request (twice the largest --timeout-s); cost: 10^15, 1,000 times the
# largest --cost-cap; an HTTP status has three digits.
NUMBER_LIMITS: dict[str, float] = {
    "http_status": 999,
    "prompt_tokens": 2**53 - 1,
    "completion_tokens": 2**53 - 1,
    "reasoning_tokens": 2**53 - 1,
    "latency_s": 2 * 86_400,
    "cost": 1e15,
}


def _parse_number(text: str, kind: type, where: str, field: str) -> Any:
    if text == "":
        return None
    limit = NUMBER_LIMITS[field]  # every number column has one (tested)
    if len(text) > 40:  # no number inside its limit needs more characters
        raise NeedlepointError(
            f"{where}: field {field}: {len(text)} characters, not a number from 0 to {limit:g}"
        )
    try:
        value = kind(text)
    except ValueError:
        raise NeedlepointError(f"{where}: field {field}: not a number: {text!r}") from None
    if (kind is float and not math.isfinite(value)) or value < 0:
        raise NeedlepointError(f"{where}: field {field}: must be finite and >= 0, got {text!r}")
    if value > limit:
        raise NeedlepointError(f"{where}: field {field}: {text} is above its limit of {limit:g}")
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
        side = near_side(row, prepared.answer_key[seq])
        numbers = {f: _parse_number(row[f], int, where, f) for f in _INT_FIELDS}
        numbers |= {f: _parse_number(row[f], float, where, f) for f in _FLOAT_FIELDS}
        outcomes.append(
            Outcome(
                **{f.name: getattr(planned, f.name) for f in fields(PlanCell)},
                status=row["status"],
                kind=row["kind"],
                **numbers,
                lenient=lenient,
                near_kind=near,
                near_before=prepared.answer_key[seq].get("near_before"),
                near_side=side,
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
        context=run_context(prepared, outcomes, None, simulation=simulation),
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
    context, sessions = run_facts(Path(run_dir), prepared, outcomes, simulation)
    source, unverified = "run journal", None
    if extra.get("executed_elsewhere") is True:
        # An imported run (needlepoint.interop): its journal was re-written from another
        # harness's log, so the rows are only as verified as import.json says.
        source = f"{extra.get('source')} log, imported ({extra.get('import')})"
        unverified = (
            f"executed by {extra.get('source')}, not by needlepoint's runner; the request bytes "
            f"and the order were not controlled ({extra.get('import')} lists what was verified)"
        )
    return AnalysisInput(
        prepared.protocol, prepared.fingerprint, outcomes, simulation, journal, source,
        unverified=unverified, context=context, sessions=sessions,
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


# --- reading a results table ---------------------------------------------------------------------


# Columns added to results.csv after its first version: a table written before one existed
# reads it as empty (unknown), as the JSON records read a field added later.
LATER_COLUMNS = ("reasoning_tokens",)

# A results.csv cell can hold a whole answer: at most 16 MiB of body, so at most 16 Mi
# characters once read (the csv module counts a field's characters after undoing its quoting,
# and holds them as 4 bytes each: a field at this limit costs 68 MiB).
RESULTS_FIELD_LIMIT = 17 * 1024 * 1024
# A physical line: that answer with every quote doubled, and the other, short cells.
MAX_LINE_CHARS = 2 * RESULTS_FIELD_LIMIT + 64 * 1024


def read_results_csv(path: str | Path) -> Iterator[tuple[int, dict[str, str]]]:
    """Rows of a results CSV with the line each starts on, one at a time (a table of any size
    costs the memory of one row); the header must hold every column but those added later
    (LATER_COLUMNS), which read as empty, unknown, in a table written before they existed."""
    p = Path(path)
    try:
        fh = open_read(p, follow=True)
    except FileNotFoundError:
        raise NeedlepointError(f"{p}: file not found") from None
    # Any other OSError is open_read's own one-line refusal (follow=True turns it into one).
    return _rows(p, fh)


def _rows(p: Path, raw: Any) -> Iterator[tuple[int, dict[str, str]]]:
    # response_text holds a whole answer, up to the runner's body limit: far past csv's default
    # field limit (128 KiB), which would refuse the results.csv that `results` wrote.
    limit = csv.field_size_limit()
    csv.field_size_limit(max(limit, RESULTS_FIELD_LIMIT))
    fh = io.TextIOWrapper(raw, encoding="utf-8", newline="")
    try:
        yield from _read_rows(p, fh)
    finally:
        csv.field_size_limit(limit)
        fh.close()


def _lines(p: Path, fh: Any) -> Iterator[str]:
    """The file's physical lines, each refused past MAX_LINE_CHARS before it is held whole (a
    file of one endless line would otherwise be read into memory before csv sees it)."""
    number = 0
    while line := fh.readline(MAX_LINE_CHARS + 1):
        number += 1
        if len(line) > MAX_LINE_CHARS:
            raise NeedlepointError(
                f"{p}:{number}: a line longer than {MAX_LINE_CHARS} characters (not read)"
            )
        yield line


def _read_rows(p: Path, fh: Any) -> Iterator[tuple[int, dict[str, str]]]:
    try:
        reader = csv.reader(_lines(p, fh))
        header = next(reader, None)
        if header is None:
            raise NeedlepointError(f"{p}:1: empty file, expected a header row")
        missing = [c for c in RESULT_COLUMNS if c not in header and c not in LATER_COLUMNS]
        if missing:
            raise NeedlepointError(f"{p}:1: field {missing[0]}: missing column")
        extra = [c for c in header if c not in RESULT_COLUMNS] or (
            [c for c in header if header.count(c) > 1]
        )
        if extra:
            raise NeedlepointError(f"{p}:1: field {extra[0]}: unexpected or repeated column")
        absent = dict.fromkeys((c for c in LATER_COLUMNS if c not in header), "")
        start = reader.line_num + 1
        for values in reader:
            if len(values) != len(header):
                raise NeedlepointError(
                    f"{p}:{start}: field {header[min(len(values), len(header) - 1)]}: row "
                    f"has {len(values)} fields, header has {len(header)}"
                )
            yield start, {**dict(zip(header, values, strict=True)), **absent}
            start = reader.line_num + 1
    except UnicodeDecodeError as exc:
        raise NeedlepointError(f"{p}: not UTF-8 ({exc.reason})") from None
    except csv.Error as exc:
        raise NeedlepointError(f"{p}:{reader.line_num}: malformed CSV ({exc})") from None


# --- the pilot refusal ---------------------------------------------------------------------------


def check_pilot(where: str | Path, marked: bool, pilot: bool, mark: str) -> None:
    """Refuse a pilot read as a main run (``pilot`` False), or a main run read as a pilot."""
    if marked and not pilot:
        raise NeedlepointError(
            f"{where}: is a pilot ({mark} says so): pilots run on held-out materials to "
            "calibrate a design and are never analysed as a main run; use needlepoint calibrate"
        )
    if pilot and not marked:
        raise NeedlepointError(f"{where}: is not a pilot ({mark} does not mark one)")


# --- what was run where and when -----------------------------------------------------------------


TOKEN_COUNTS_FILE = "token_counts.json"  # written by `local-model tokenize-check`
TOKENIZER = "token_counts.json (the served tokenizer)"
USAGE = "usage.prompt_tokens (reported by the endpoint)"
# A simulated run's usage is made up by the fake transport from the body's size: no endpoint
# reported it and no tokenizer counted it, so it is never labelled as if one had.
SIMULATED_USAGE = "usage.prompt_tokens (made up by the simulator: no endpoint, no tokenizer)"
CHARACTERS = "characters of the prompt text (no token count recorded)"


def near_kind(row: Mapping[str, str], answer: Mapping[str, Any]) -> str | None:
    """The kind of the near name whose code a wrong answer gives (``unrelated`` under low)."""
    codes, kinds = list(answer.get("near_codes", ())), answer.get("near_kinds", ())
    code = java_trim(row["response_text"]) if row["status"] == ERROR and kinds else None
    return kinds[codes.index(code)] if code in codes else None


def near_side(row: Mapping[str, str], answer: Mapping[str, Any]) -> str | None:
    """Whether a wrong code names a near name placed before or after the target: the answer
    key lists near codes in slot order and counts those before the target (``near_before``)."""
    before = answer.get("near_before")
    codes = list(answer.get("near_codes", ()))
    if row["status"] != ERROR or not isinstance(before, int):
        return None
    code = java_trim(row["response_text"])
    return None if code not in codes else ("before" if codes.index(code) < before else "after")


def _size(length: int, unit: str, source: str, values: list[int]) -> LengthSize:
    return LengthSize(
        length=length,
        unit=unit,
        source=source,
        requests=len(values),
        minimum=min(values),
        median=float(statistics.median(values)),
        maximum=max(values),
    )


def _tokenizer_counts(prepared: Prepared) -> dict[int, list[int]] | None:
    """Per length, the prompt tokens ``token_counts.json`` records, if it is whole and ours."""
    path = prepared.root / TOKEN_COUNTS_FILE
    try:
        if not path.is_file() or path.stat().st_size > 64 * 1024 * 1024:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("prepared_fingerprint") != prepared.fingerprint:
            return None
        lengths = {p.seq: p.length for p in prepared.plan}
        out: dict[int, list[int]] = defaultdict(list)
        for r in data["requests"]:
            tokens = r["prompt_tokens"]
            if type(tokens) is not int or lengths.get(r["seq"]) != r["length"]:
                return None
            out[r["length"]].append(tokens)
        return dict(out) if sorted(out) == sorted(set(lengths.values())) else None
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None  # unreadable or another shape: the next source is used


def length_sizes(
    prepared: Prepared, outcomes: Iterable[Any], simulation: bool = False
) -> tuple[LengthSize, ...]:
    """Prompt size per background length, from the best source available for all of them;
    a simulated run's usage is labelled as the simulator's."""
    rows = list(outcomes)
    lengths = sorted({o.length for o in rows})
    counted = _tokenizer_counts(prepared)
    if counted is not None:
        return tuple(_size(n, "tokens", TOKENIZER, counted[n]) for n in lengths)
    usage: dict[int, list[int]] = defaultdict(list)
    for o in rows:
        if o.prompt_tokens is not None:
            usage[o.length].append(o.prompt_tokens)
    if all(usage.get(n) for n in lengths):
        source = SIMULATED_USAGE if simulation else USAGE
        return tuple(_size(n, "tokens", source, usage[n]) for n in lengths)
    chars: dict[int, list[int]] = defaultdict(list)
    for p in prepared.plan:
        chars[p.length].append(text_chars(json.loads(prepared.bodies[p.seq])))
    return tuple(_size(n, "characters", CHARACTERS, chars[n]) for n in lengths)


def run_context(
    prepared: Prepared, outcomes: Iterable[Any], records: list[dict[str, Any]] | None,
    base_url: str | None = None, simulation: bool = False,
) -> RunContext:  # fmt: skip
    """The context of a run (``records``: its journal) or of a results table (None)."""
    host = urlsplit(base_url).hostname if base_url else None
    times = sorted(str(r["time"])[:10] for r in records or () if isinstance(r.get("time"), str))
    return RunContext(
        endpoint_host=host,
        first_date=times[0] if times else None,
        last_date=times[-1] if times else None,
        sessions=None if records is None else sum(r.get("type") == "session" for r in records),
        lengths=length_sizes(prepared, outcomes, simulation),
    )


def sessions_by_seq(records: Iterable[dict[str, Any]]) -> dict[int, int]:
    """The session that sent each attempted seq (the session record before its attempt)."""
    current, out = 0, {}
    for r in records:
        if r.get("type") == "session":
            current = int(r.get("session") or current + 1)
        elif r.get("type") == "attempt" and isinstance(r.get("seq"), int):
            out.setdefault(r["seq"], current)
    return out


def run_facts(
    run_dir: Path, prepared: Prepared, outcomes: Iterable[Any], simulation: bool = False
) -> tuple[RunContext, dict[int, int]]:
    """The context of a run folder and the session of each seq, from run.json and the journal."""
    from needlepoint.run.journal import walk

    # Only what the context needs of each record, read as a stream: never the bodies.
    records = walk(run_dir).state.timeline()
    base_url = read_run_record(run_dir).base_url
    context = run_context(prepared, outcomes, records, base_url, simulation)
    return context, sessions_by_seq(records)
