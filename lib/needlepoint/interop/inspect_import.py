"""``needlepoint import inspect``: an inspect_ai log of an exported task, verified per sample and
written as a run folder labelled as executed elsewhere.

For every sample the import checks, and refuses the whole log when one fails:

- the sample's id names a planned seq and that seq's frozen body SHA-256, once (one epoch);
- every request inspect logged for it (``ModelEvent.call.request``) carries exactly the frozen
  messages and exactly the frozen generation parameters;
- the task names the prepared folder's design and protocol fingerprints.

Each answer is then scored from the raw response the log holds, by the very classification a
native run uses: the model the server named, the raw ``finish_reason`` (never inspect's mapped
``stop_reason``) and the answer text. An errored sample is a protocol failure (its HTTP status
when the error names one, else ``indeterminate_interrupted``) or, with no model call at all,
unexecuted: never wrong. Usage is taken from the raw response and compared with inspect's own
count; a difference is flagged.

How inspect executed the task is reported as deviations from the protocol, never hidden:
retries (``ModelEvent.retries``, more than one model call, ``error_retries``), cache reads,
``max_retries`` left unlimited, SDK retries not turned off, concurrency and the spacing observed
from the timestamps, the order observed against the frozen order.

The run folder holds ``run.json`` (``extra.source: inspect_ai <version>``, the log's SHA-256),
a journal re-written from the log by this import (not written ahead of each request, as the
runner's is: ``import.json`` says so), ``results.csv``, ``context_manifest.json`` and
``import.json`` / ``import.md``, which open with what was and was not verified.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import needlepoint
from needlepoint.design.prepared import Prepared, load_prepared
from needlepoint.design.profiles import body_profile
from needlepoint.design.protocol import design_fingerprint
from needlepoint.design.verify import verify_prepared
from needlepoint.errors import NeedlepointError
from needlepoint.interop.export import frozen_samples
from needlepoint.interop.inspect_log import (
    LoggedCall,
    LoggedEval,
    LoggedSample,
    read_header,
    read_samples,
)
from needlepoint.jsonio import canonical_bytes, file_sha256
from needlepoint.run.audit import audit_run
from needlepoint.run.clock import iso_utc
from needlepoint.run.folder import CONTEXT_NAME, RUN_NAME, write_context_manifest, write_run_record
from needlepoint.run.journal import HEAD_NAME, JOURNAL_NAME, Journal
from needlepoint.run.records import (
    CostRecord,
    RunRecord,
    SessionRecord,
    interrupted_fields,
    received_fields,
)
from needlepoint.run.results import RESULTS_NAME, write_results
from needlepoint.run.runner import prepared_fields
from needlepoint.run.transport import Exchange
from needlepoint.safeio import replaced_folder, write_bytes_atomic

IMPORT_NAME = "import.json"
IMPORT_MD = "import.md"
IMPORT_KIND = "needlepoint-import"
IMPORT_FORMAT = 1
SOURCE_PREFIX = "inspect_ai"
# Files the import writes; an output folder holding anything else is refused.
_OWNED = (RUN_NAME, JOURNAL_NAME, HEAD_NAME, CONTEXT_NAME, RESULTS_NAME, IMPORT_NAME, IMPORT_MD)
OVERRIDE_REASON = (
    "executed by inspect_ai, not by needlepoint's runner: no gap was enforced; the spacing "
    "observed in the log is reported in import.json"
)
# Keys of inspect's logged request that are not generation parameters of the body.
_NOT_BODY = ("messages", "extra_headers")
_UNSET_WHEN_NONE = ("tools", "tool_choice")
_STATUS = re.compile(r"Error code: ([1-9][0-9]{2})\b")

VERIFIED = (
    "each sample's id names a planned seq and its frozen body SHA-256, once",
    "the task names this design's and these materials' fingerprints",
    "every request inspect logged carries exactly the frozen messages",
    "every request inspect logged carries exactly the frozen generation parameters",
    "each answer is scored from the raw response: the model the server named, the raw "
    "finish_reason, the answer text (needlepoint's strict scoring)",
    "usage read from the raw response and compared with inspect's own count",
)
NOT_VERIFIED = (
    "the exact request bytes on the wire: the log holds the request as the SDK built it, "
    "re-serialised, and no request SHA-256",
    "the exact response bytes: the log holds the response as the SDK parsed it",
    "the order: inspect scheduled the samples; the order is observed from the timestamps, "
    "not controlled",
    "that nothing else was sent: requests the SDK retried below inspect leave no trace in the log",
    "the journal: re-written from the log by this import, not written ahead of each request",
)


@dataclass(frozen=True)
class ImportRecord:
    """import.json: where the run came from, what was verified, and every deviation found."""

    format: int
    kind: str
    source: str
    inspect_version: str
    log_name: str
    log_sha256: str
    log_status: str
    model: str
    design_fingerprint: str
    protocol_fingerprint: str
    verified: tuple[str, ...]
    not_verified: tuple[str, ...]
    deviations: tuple[str, ...]
    samples: int
    answered: int
    errored: int
    missing: int
    observed_order: tuple[int, ...]

    def lines(self) -> list[str]:
        """What the import prints, and what import.md holds: verification first."""
        out = [f"source: {self.source} (log SHA-256 {self.log_sha256})"]
        out += [f"verified: {v}" for v in self.verified]
        out += [f"not verifiable: {v}" for v in self.not_verified]
        out += [f"deviation: {d}" for d in self.deviations] or ["deviations: none found"]
        out.append(
            f"samples: {self.samples} planned, {self.answered} answered, {self.errored} "
            f"errored (protocol failures), {self.missing} missing (unexecuted)"
        )
        return out


@dataclass
class _Checked:
    """What one pass over the samples found."""

    by_seq: dict[int, LoggedSample] = field(default_factory=dict)
    deviations: list[str] = field(default_factory=list)


def _fail(sample: str, text: str) -> NeedlepointError:
    return NeedlepointError(f"sample {sample}: {text}; refused (nothing written)")


def _same_value(sent: Any, frozen: Any) -> bool:
    """JSON equality that keeps bool apart from numbers (0 == 0.0 is the same parameter)."""
    if isinstance(sent, bool) or isinstance(frozen, bool):
        return type(sent) is type(frozen) and sent == frozen
    if isinstance(sent, (int, float)) and isinstance(frozen, (int, float)):
        return sent == frozen
    if isinstance(sent, list) and isinstance(frozen, list):
        return len(sent) == len(frozen) and all(map(_same_value, sent, frozen))
    return type(sent) is type(frozen) and sent == frozen


def check_request(request: Any, frozen: Mapping[str, Any], sample: str) -> None:
    """Refuse a logged request whose messages or parameters differ from the frozen body."""
    if not isinstance(request, dict):
        raise _fail(sample, "the log holds no raw request (ModelEvent.call) to verify")
    messages = request.get("messages")
    if messages != frozen["messages"]:
        if not isinstance(messages, list) or len(messages) != len(frozen["messages"]):
            raise _fail(sample, "the messages sent are not the frozen messages")
        for i, (m, f) in enumerate(zip(messages, frozen["messages"], strict=True)):
            if m != f:
                raise _fail(sample, f"message {i} sent differs from the frozen message")
    sent = {
        k: v
        for k, v in request.items()
        if k not in _NOT_BODY and not (k in _UNSET_WHEN_NONE and v is None)
    }
    params = {k: v for k, v in frozen.items() if k != "messages"}
    for name in sorted(set(sent) | set(params)):
        if name not in sent:
            raise _fail(sample, f"parameter {name} is frozen but was not sent")
        if name not in params:
            raise _fail(sample, f"parameter {name} was sent but is not in the frozen body")
        if not _same_value(sent[name], params[name]):
            raise _fail(
                sample, f"parameter {name} sent as {sent[name]!r}, frozen as {params[name]!r}"
            )


def _check_header(head: LoggedEval, prepared: Prepared, log: Path) -> list[str]:
    meta = head.metadata
    design = design_fingerprint(prepared.protocol)
    if meta.get("needlepoint_design_fingerprint") != design:
        raise NeedlepointError(
            f"{log}: the task does not name this design (needlepoint_design_fingerprint "
            f"{str(meta.get('needlepoint_design_fingerprint'))[:12]}, prepared {design[:12]}); "
            "export the task from this prepared folder"
        )
    if meta.get("needlepoint_protocol_fingerprint") != prepared.fingerprint:
        raise NeedlepointError(
            f"{log}: the task was exported from other materials (protocol fingerprint "
            f"{str(meta.get('needlepoint_protocol_fingerprint'))[:12]}, prepared "
            f"{prepared.fingerprint[:12]})"
        )
    out = []
    if head.status != "success":
        out.append(f"the log's status is {head.status!r}, not 'success'")
    if head.epochs not in (None, 1):
        out.append(f"epochs {head.epochs}: each frozen request is sent once")
    if head.model_args.get("max_retries") != 0:
        out.append(
            "the SDK's own retries were not turned off (-M max_retries=0 missing): a request "
            "it retried leaves no trace in the log"
        )
    if head.max_connections not in (None, 1):
        out.append(f"max_connections {head.max_connections}: requests may have overlapped")
    if head.max_samples not in (1,):
        out.append(
            f"max_samples {head.max_samples}: samples were not run one at a time "
            "(--max-samples 1 missing)"
        )
    return out


def _sample_deviations(s: LoggedSample, seq: int) -> list[str]:
    out = []
    retries = sum(c.retries for c in s.calls)
    if retries:
        out.append(f"seq {seq}: inspect retried the model call {retries} time(s)")
    failed = [c for c in s.calls[:-1] if c.error]
    if failed:
        out.append(
            f"seq {seq}: inspect retried the request {len(failed)} time(s) after an error "
            f"({failed[0].error.splitlines()[0][:80]})"
        )
    if len(s.calls) > 1:
        out.append(f"seq {seq}: {len(s.calls)} model calls for one frozen request")
    if s.error_retries:
        out.append(f"seq {seq}: the sample was retried {s.error_retries} time(s) after an error")
    if any(c.cache == "read" for c in s.calls):
        out.append(f"seq {seq}: the answer was read from inspect's cache, not from the server")
    if any(c.config_max_retries is None and not c.config_unset for c in s.calls):
        out.append(f"seq {seq}: max_retries was unlimited for this call")
    return out


def _collect(prepared: Prepared, log: Path) -> tuple[_Checked, dict[int, dict[str, Any]]]:
    samples, _ = frozen_samples(prepared)
    by_id = {s.id: s for s in samples}
    frozen = {
        s.seq: {"messages": [{"role": r, "content": t} for r, t in s.messages]} for s in samples
    }
    for seq, body in prepared.bodies.items():
        parsed = json.loads(body)
        frozen[seq] |= {k: v for k, v in parsed.items() if k != "messages"}
    checked = _Checked()
    for s in read_samples(log):
        entry = by_id.get(s.id)
        if entry is None:
            raise _fail(s.id[:80], "its id names no frozen request of this prepared folder")
        if entry.seq in checked.by_seq:
            raise _fail(s.id[:80], f"seq {entry.seq} appears twice (epoch {s.epoch})")
        for call in s.calls:
            if call.request is not None or call.error is None:
                check_request(call.request, frozen[entry.seq], s.id[:80])
        checked.by_seq[entry.seq] = s
        checked.deviations += _sample_deviations(s, entry.seq)
    return checked, frozen


def _exchange(s: LoggedSample) -> tuple[Exchange | None, LoggedCall | None]:
    """The exchange that answered the sample (its last model call), or None if none was made."""
    if not s.calls:
        return None, None
    call = s.calls[-1]
    latency = 0.0
    if call.started is not None and call.completed is not None:
        latency = max(0.0, call.completed - call.started)
    if call.error is None and s.error is None and isinstance(call.response, dict):
        body = canonical_bytes(call.response)
        return Exchange(200, body, None, "", latency, False, {}), call
    error = call.error or s.error or "the sample ended in an error"
    found = _STATUS.search(error)
    if found:
        body = canonical_bytes(call.response) if isinstance(call.response, dict) else None
        return Exchange(int(found.group(1)), body, None, error[:500], latency, False, {}), call
    return None, call


def _usage_deviation(seq: int, s: LoggedSample, call: LoggedCall) -> str | None:
    usage = call.response.get("usage") if isinstance(call.response, dict) else None
    if not isinstance(usage, dict):
        return f"seq {seq}: the response reports no usage"
    own = s.output_usage
    if own is None:
        return None
    if (own["input_tokens"], own["output_tokens"]) != (
        usage.get("prompt_tokens"),
        usage.get("completion_tokens"),
    ):
        return (
            f"seq {seq}: inspect's usage ({own['input_tokens']} in, {own['output_tokens']} out) "
            f"differs from the response's ({usage.get('prompt_tokens')}, "
            f"{usage.get('completion_tokens')})"
        )
    return None


def _spacing(calls: list[tuple[int, LoggedCall]], min_gap_s: float | None) -> list[str]:
    out = []
    # One interval per sample: inspect logs a retried call as an error event inside the span of
    # the final event, so calls of one sample overlap by construction.
    spans: dict[int, tuple[float, float]] = {}
    for seq, c in calls:
        if c.started:
            lo, hi = spans.get(seq, (c.started, c.started))
            spans[seq] = (min(lo, c.started), max(hi, c.completed or c.started))
    timed = sorted((lo, hi, seq) for seq, (lo, hi) in spans.items())
    gaps = [b[0] - a[1] for a, b in itertools.pairwise(timed)]
    overlaps = sum(1 for g in gaps if g < 0)
    if overlaps:
        out.append(f"{overlaps} request(s) started before the previous one had completed")
    if gaps and min_gap_s:
        short = sum(1 for g in gaps if 0 <= g < min_gap_s)
        if short:
            out.append(
                f"{short} gap(s) between a completion and the next request were shorter than "
                f"the protocol's {min_gap_s:g} s (smallest observed {max(0.0, min(gaps)):.3f} s)"
            )
    return out


def import_inspect(
    log_path: str | Path, prepared_dir: str | Path, out_dir: str | Path
) -> ImportRecord:
    """Verify ``log_path`` against ``prepared_dir`` and write the run folder ``out_dir``."""
    log = Path(log_path)
    head = read_header(log)
    report = verify_prepared(prepared_dir)
    if not report.ok:
        raise NeedlepointError(
            f"{prepared_dir}: prepared folder fails verify: {report.problems[0]}"
        )
    prepared = load_prepared(prepared_dir)
    if body_profile(prepared.protocol) != "chat":
        raise NeedlepointError(f"{prepared_dir}: only chat-profile designs are exported/imported")
    deviations = _check_header(head, prepared, log)
    log_sha = file_sha256(log)
    checked, _ = _collect(prepared, log)
    deviations += checked.deviations
    model = str(prepared.protocol.get("model"))
    source = f"{SOURCE_PREFIX} {head.inspect_version}"
    out = Path(out_dir)
    plan_order = [row.seq for row in prepared.plan]
    timed: list[tuple[int, LoggedCall]] = []
    outcomes: list[tuple[float, int, Exchange | None, LoggedCall | None, LoggedSample]] = []
    for seq in plan_order:
        s = checked.by_seq.get(seq)
        if s is None or not s.calls:
            continue
        exchange, call = _exchange(s)
        assert call is not None
        timed += [(seq, c) for c in s.calls]
        first = s.calls[0].started or 0.0
        outcomes.append((first, seq, exchange, call, s))
        if exchange is not None and exchange.http_status == 200:
            note = _usage_deviation(seq, s, call)
            if note:
                deviations.append(note)
    outcomes.sort(key=lambda o: (o[0], o[1]))
    observed = tuple(o[1] for o in outcomes)
    planned_executed = tuple(seq for seq in plan_order if seq in set(observed))
    if observed != planned_executed:
        deviations.append("the observed order differs from the frozen execution order")
    gap = prepared.protocol.get("runner", {}).get("min_gap_s")
    deviations += _spacing(timed, gap if isinstance(gap, (int, float)) else None)
    errored = sum(1 for o in outcomes if o[2] is None or o[2].http_status != 200)
    missing = len(plan_order) - len(outcomes)
    if missing:
        deviations.append(f"{missing} planned request(s) have no model call in the log")
    record = ImportRecord(
        format=IMPORT_FORMAT,
        kind=IMPORT_KIND,
        source=source,
        inspect_version=head.inspect_version,
        log_name=log.name,
        log_sha256=log_sha,
        log_status=head.status,
        model=model,
        design_fingerprint=design_fingerprint(prepared.protocol),
        protocol_fingerprint=prepared.fingerprint,
        verified=VERIFIED,
        not_verified=NOT_VERIFIED,
        deviations=tuple(deviations),
        samples=len(plan_order),
        answered=len(outcomes) - errored,
        errored=errored,
        missing=missing,
        observed_order=observed,
    )
    with replaced_folder(out, lambda name: name in _OWNED) as fresh:
        _write_run(fresh, out, prepared, head, record, outcomes)
        # The run audit of what inspect did: a stop rule the runner would have obeyed, say.
        audit = audit_run(fresh, prepared.root)
        found = _audit_deviations(audit.problems, fresh)
        record = replace(record, deviations=record.deviations + found)
        write_bytes_atomic(fresh / IMPORT_NAME, canonical_bytes(_plain(record)) + b"\n")
        md = ["# Imported run: executed by " + record.source, ""]
        md += [f"- {line}" for line in record.lines()]
        write_bytes_atomic(fresh / IMPORT_MD, ("\n".join(md) + "\n").encode("utf-8"))
    return record


def _write_run(
    fresh: Path,
    out: Path,
    prepared: Prepared,
    head: LoggedEval,
    record: ImportRecord,
    outcomes: list[Any],
) -> None:
    created = iso_utc(outcomes[0][0]) if outcomes and outcomes[0][0] else iso_utc(0.0)
    run = RunRecord(
        **prepared_fields(prepared, out),
        created=created,
        simulation=False,
        simulate=None,
        model=record.model,
        base_url=head.model_base_url,
        api_key_env=None,
        allow=len(prepared.plan),
        min_gap_s=0.0,
        protocol_min_gap_s=float(prepared.protocol.get("runner", {}).get("min_gap_s", 0.0)),
        override_reason=OVERRIDE_REASON,
        timeout_s=0.0,
        deadline_s=0.0,
        cost=CostRecord(input_rate=None, output_rate=None, cap=None),
        extra={
            "source": record.source,
            "executed_elsewhere": True,
            "log_name": record.log_name,
            "log_sha256": record.log_sha256,
            "inspect_model": head.model,
            "import": IMPORT_NAME,
        },
    )
    run_sha = write_run_record(fresh, run)
    unknown = prepared.protocol.get("unknown", "UNKNOWN")
    with Journal(fresh) as journal:
        session = SessionRecord(
            session=1,
            time=created,
            run_json_sha256=run_sha,
            package_version=needlepoint.__version__,
            allow=run.allow,
            min_gap_s=0.0,
            override_reason=OVERRIDE_REASON,
            timeout_s=0.0,
            deadline_s=0.0,
            input_rate=None,
            output_rate=None,
            cost_cap=None,
        )
        journal.append("session", **session.to_plain())
        sha = {row.seq: row.request_sha256 for row in prepared.plan}
        previous: float | None = None
        for started, seq, exchange, call, _ in outcomes:
            began = iso_utc(started) if started else created
            ended = iso_utc(call.completed) if call.completed else began
            # The spacing observed; an overlap (reported as a deviation) is recorded as 0.
            gap = (
                None if previous is None or not started else round(max(0.0, started - previous), 6)
            )
            previous = call.completed or started or previous
            journal.append("attempt", seq=seq, request_sha256=sha[seq], time=began, gap_s=gap)
            if exchange is None:
                detail = f"inspect_ai: {(call.error or 'the sample ended in an error')[:500]}"
                journal.append("outcome", **interrupted_fields(seq, ended, detail, False))
            else:
                journal.append(
                    "outcome",
                    **received_fields(
                        seq,
                        ended,
                        exchange,
                        answer=prepared.answer_key[seq],
                        model=record.model,
                        unknown=unknown,
                        rates=(None, None),
                    ),
                )
        journal.append(
            "stop", time=created, reason="imported", detail=f"{record.source} log {record.log_name}"
        )
        write_context_manifest(fresh, prepared, journal)
    write_results(fresh, prepared.root)


def _audit_deviations(problems: list[str], folder: Path) -> tuple[str, ...]:
    """audit-run's problems with the imported folder, one line per kind of problem (the seq and
    line numbers folded into a count and the first place)."""
    kinds: dict[str, tuple[int, str]] = {}
    for p in problems:
        # The folder is a temporary sibling until the import completes: never name it.
        where, _, what = p.removeprefix(f"{folder}/").replace(folder.name, "RUNDIR").partition(": ")
        kind = re.sub(r"\bseq \d+", "seq N", what) or where
        count, first = kinds.get(kind, (0, where))
        kinds[kind] = (count + 1, first)
    return tuple(
        f"audit-run: {count} x {kind} (first at {first})" for kind, (count, first) in kinds.items()
    )


def _plain(record: ImportRecord) -> dict[str, Any]:
    from needlepoint.schema import to_plain

    return to_plain(record)


def imported_lines(run_dir: str | Path) -> list[str]:
    """For the analysis summary of an imported run: where it was executed, then what the import
    verified and could not, and its deviations (from import.json); nothing for a native run."""
    from needlepoint.jsonio import read_json
    from needlepoint.run.folder import read_run_record

    extra = read_run_record(Path(run_dir)).extra
    if extra.get("executed_elsewhere") is not True:
        return []
    head = f"- imported: executed by {extra.get('source')}, log SHA-256 `{extra.get('log_sha256')}`"
    try:
        value = read_json(Path(run_dir) / IMPORT_NAME, follow=False)
        lines = ImportRecord(**{k: value[k] for k in ImportRecord.__dataclass_fields__}).lines()
        assert all(isinstance(line, str) for line in lines)
    except (NeedlepointError, OSError, KeyError, TypeError, AssertionError, AttributeError):
        return [head, f"- {IMPORT_NAME} cannot be read: what the import verified is not shown"]
    return [head, *(f"- {line}" for line in lines[1:])]
