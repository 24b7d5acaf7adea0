"""Every record a run folder holds, typed once: run.json, the journal's four record types and
the context manifest, with the schema each journal line is checked against on every read.

run.json (format 1) says once what the run is; each ``session`` record repeats the ``Limits``
that may differ between sessions (the allowance, the spacing, the timeouts, the money). Both are
frozen records serialised through ``needlepoint.schema``; ``docs/schema.md`` states every field,
and a test checks that it lists exactly these.

Journal record types (format 1): ``session`` (one per runner invocation, with its settings),
``attempt`` (written and fsynced before the request leaves), ``outcome`` (after it, or on
recovery), ``stop`` (why a session ended). The hash chain proves that nothing was edited after
the fact, but a re-chained file (records edited and every hash recomputed) passes it; so each
record is also checked against the documented fields and types before the runner, ``results``
or ``audit-run`` uses it. Outcome records are built here so that they can always be journalled.
"""

from __future__ import annotations

import base64
import typing
from dataclasses import dataclass
from typing import Any, ClassVar

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes
from needlepoint.run.clock import parse_iso_utc
from needlepoint.run.interpret import cost_of, parse_response, reasoning_tokens
from needlepoint.run.scoring import STATUSES, Classification, classify, classify_safely
from needlepoint.run.simulate import PositionParams
from needlepoint.run.transport import Exchange
from needlepoint.schema import AddedLater, Fields, hints, is_int, to_plain

RUN_FORMAT = 1
RUN_KIND = "needlepoint-run"


@dataclass(frozen=True)
class Limits:
    """What a session may spend and how it is paced: checked into ``Settings``, stated by every
    session record (run.json holds the first session's, with the rates under ``cost``)."""

    allow: int
    min_gap_s: float
    override_reason: str | None
    timeout_s: float
    deadline_s: float
    input_rate: float | None
    output_rate: float | None
    cost_cap: float | None

    def limits(self) -> dict[str, Any]:
        """Just the ``Limits`` fields of this record (of a subclass too), by name."""
        return {name: getattr(self, name) for name in hints(Limits)}


@dataclass(frozen=True)
class SimulationRecord:
    """How a simulated run was simulated (run.json ``simulate``; null for a live run)."""

    mode: str
    params: PositionParams | None
    fault_cycle: tuple[str, ...] | None


@dataclass(frozen=True)
class CostRecord:
    """The money settings (run.json ``cost``): rates per million tokens and the cap."""

    input_rate: float | None
    output_rate: float | None
    cap: float | None


@dataclass(frozen=True)
class DeclarationRef:
    """run.json's ``declaration``: the file, relative to the run folder, and its SHA-256."""

    path: str
    sha256: str


@dataclass(frozen=True)
class RunRecord(AddedLater):
    """run.json: what this run is, written once when its folder is created."""

    format: int
    kind: str
    created: str
    simulation: bool
    simulate: SimulationRecord | None
    prepared_dir: str
    prepared_fingerprint: str
    protocol_id: str | None
    protocol_version: int | None
    model: str
    base_url: str | None
    api_key_env: str | None
    allow: int
    min_gap_s: float
    protocol_min_gap_s: float
    override_reason: str | None
    timeout_s: float
    deadline_s: float
    cost: CostRecord
    package_version: str
    extra: dict[str, Any]
    # The prepared protocol's design fingerprint and body profile. A run.json written before
    # they existed has neither: read as None, and written back without them.
    design_fingerprint: str | None = None
    body_profile: str | None = None
    # True when --allow-insecure-http let the key travel over plain http to a host that is not
    # loopback; absent otherwise (and in every run.json written before the flag existed).
    allow_insecure_http: bool | None = None
    # The declaration the run was started under (`--declaration`); absent without one.
    declaration: DeclarationRef | None = None
    # A server you own: true when it ran without a key (--no-key), the host vouched for with
    # --self-hosted, and the requests in flight at once when above 1 (--concurrency). Absent
    # otherwise, and in every run.json written before they existed.
    no_key: bool | None = None
    self_hosted: str | None = None
    concurrency: int | None = None

    ADDED_LATER: ClassVar = (
        "design_fingerprint",
        "body_profile",
        "allow_insecure_http",
        "declaration",
        "no_key",
        "self_hosted",
        "concurrency",
    )


@dataclass(frozen=True, kw_only=True)
class SessionRecord(Limits, AddedLater):
    """The settings one session ran under: the journal's ``session`` record, less its envelope.

    ``dropped_tail_sha256`` is written only when the session dropped a torn journal tail, and
    ``declaration_sha256`` only when the run was started under a declaration.
    """

    session: int
    time: str
    run_json_sha256: str
    package_version: str
    dropped_tail_sha256: str | None = None
    declaration_sha256: str | None = None
    # Requests in flight at once, written only when above 1: attempts may then interleave with
    # outcomes, at most this many open at a time (audit-run checks it).
    concurrency: int | None = None

    ADDED_LATER: ClassVar = ("dropped_tail_sha256", "declaration_sha256", "concurrency")


@dataclass(frozen=True)
class AttemptRecord:
    """An ``attempt`` record (``n``: its line in the journal, from 0)."""

    n: int
    seq: int
    request_sha256: str
    time: str
    gap_s: float | None

    @classmethod
    def of(cls, record: dict[str, Any]) -> AttemptRecord:
        return cls(*(record.get(k) for k in ("n", "seq", "request_sha256", "time", "gap_s")))

    def sent(self) -> dict[str, Any]:
        """The attempt as the context manifest lists it."""
        return {"seq": self.seq, "request_sha256": self.request_sha256, "time": self.time}


@dataclass(frozen=True)
class StopRecord:
    """A ``stop`` record: why a session ended."""

    n: int
    time: str
    reason: str
    detail: str

    @classmethod
    def of(cls, record: dict[str, Any]) -> StopRecord:
        return cls(*(record.get(k) for k in ("n", "time", "reason", "detail")))


# Answers up to this many characters are kept in the folded state (a real answer is a code).
KEPT_TEXT_CHARS = 4096


def _count(usage: Any, name: str) -> int | None:
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class OutcomeSummary:
    """What the runner and ``results`` keep of an outcome: everything but the body, the headers
    and a long answer text, so the memory of reading a journal never grows with its bodies.

    ``response_text`` is None when the answer was longer than KEPT_TEXT_CHARS; ``at`` then
    locates the whole record in journal.jsonl (a ``journal.Locator``), for the readers that need
    the text again (``results``, the study's run entries).
    """

    seq: int
    time: str
    http_status: int | None
    latency_s: float | None
    cost: float | None
    recovered: bool
    status: str
    kind: str
    response_text: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    has_usage: bool
    at: Any = None
    n: int | None = None  # its line in the journal (None for a record read outside one)

    @classmethod
    def of(cls, record: dict[str, Any], at: Any = None) -> OutcomeSummary:
        c = record.get("classification") or {}
        usage = record.get("usage")
        text = c.get("response_text")
        return cls(
            seq=record.get("seq"),  # type: ignore[arg-type]  # checked by the journal schema
            time=record.get("time"),  # type: ignore[arg-type]
            http_status=record.get("http_status"),
            latency_s=record.get("latency_s"),
            cost=record.get("cost"),
            recovered=bool(record.get("recovered")),
            status=c.get("status"),
            kind=c.get("kind"),
            response_text=text if isinstance(text, str) and len(text) <= KEPT_TEXT_CHARS else None,
            prompt_tokens=_count(usage, "prompt_tokens"),
            completion_tokens=_count(usage, "completion_tokens"),
            reasoning_tokens=reasoning_tokens(usage),
            has_usage=isinstance(usage, dict),
            at=at,
            n=record.get("n"),
        )


RECORD_TYPES = ("session", "attempt", "outcome", "stop")
BODY_ENCODINGS = ("utf-8", "base64")


def _time(f: Fields, name: str) -> None:
    value = f.text(name)
    try:
        parse_iso_utc(value)
    except (ValueError, OverflowError, OSError):
        raise f.fail(name, f"{value[:40]!r} is not an ISO-8601 time") from None


def _session(f: Fields) -> None:
    f.integer("session", low=1)
    _time(f, "time")
    f.sha256("run_json_sha256")
    f.text("package_version")
    for name, tp in hints(Limits).items():  # a count of at least 1, else non-negative numbers
        optional = type(None) in typing.get_args(tp)
        if tp is int:
            f.integer(name, low=1)
        elif tp is str or str in typing.get_args(tp):
            f.text(name, optional=optional)
        else:
            f.number(name, low=0, optional=optional)
    for name in ("dropped_tail_sha256", "declaration_sha256"):
        if name in f.obj:
            f.sha256(name)
    if "concurrency" in f.obj:
        f.integer("concurrency", low=2)


def _attempt(f: Fields) -> None:
    f.integer("seq", low=1)
    f.sha256("request_sha256")
    _time(f, "time")
    f.number("gap_s", low=0, optional=True)


def _outcome(f: Fields) -> None:
    f.integer("seq", low=1)
    _time(f, "time")
    f.integer("http_status", low=100, high=999, optional=True)
    f.text("error", optional=True)
    f.text("error_detail")
    body = f.text("body", optional=True)
    encoding = f.choice("body_encoding", (*BODY_ENCODINGS, None))
    if (body is None) != (encoding is None):
        raise f.fail("body_encoding", "must be null exactly when body is null")
    f.boolean("body_truncated")
    headers = f.nested("headers")
    assert headers is not None
    for name, value in headers.obj.items():
        if not isinstance(value, str):
            raise headers.fail(name, "expected a string")
    f.number("latency_s", low=0, optional=True)
    f.nested("usage", optional=True)
    f.number("cost", low=0, optional=True)
    f.boolean("recovered")
    c = f.nested("classification")
    assert c is not None
    c.choice("status", STATUSES)
    c.text("kind")
    c.text("response_text")


def _stop(f: Fields) -> None:
    _time(f, "time")
    f.text("reason", nonempty=True)
    f.text("detail")


_CHECKS = {"session": _session, "attempt": _attempt, "outcome": _outcome, "stop": _stop}


def record_problem(record: Any, where: str) -> str | None:
    """The first way ``record`` departs from the schema, as one line, or None."""
    try:
        f = Fields(record, where)
        kind = f.choice("type", RECORD_TYPES)
        if not is_int(record.get("n")) or not isinstance(record.get("prev"), str):
            raise f.fail("n" if not is_int(record.get("n")) else "prev", "missing or mistyped")
        _CHECKS[kind](f)
    except NeedlepointError as exc:
        return str(exc)
    return None


_CONTROLS = bytes(range(0x20))


def encode_body(body: bytes | None) -> tuple[str | None, str | None]:
    """Raw body as journal text: UTF-8 when it decodes, base64 otherwise.

    Also base64 when JSON escaping would more than double the text (16 MiB of control
    characters would become a 96 MB line): the journal line stays within a small multiple of
    the body limit whatever a server sends.
    """
    if body is None:
        return None, None
    try:
        text: str | None = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or _escaped_extra(body) > len(body):
        return base64.b64encode(body).decode("ascii"), "base64"
    return text, "utf-8"


def _escaped_extra(body: bytes) -> int:
    """Bytes that JSON escaping adds: one per quote and backslash, up to five per control."""
    controls = len(body) - len(body.translate(None, _CONTROLS))
    return body.count(b'"') + body.count(b"\\") + 5 * controls


def decode_body(record: dict[str, Any]) -> bytes | None:
    """Inverse of encode_body for an outcome record."""
    if record.get("body") is None:
        return None
    if record.get("body_encoding") == "base64":
        return base64.b64decode(record["body"])
    return str(record["body"]).encode("utf-8")


def outcome_fields(
    seq: int,
    time: str,
    exchange: Any,
    classification: Classification,
    cost: float | None,
    usage: dict[str, Any] | None,
) -> dict[str, Any]:
    """The fields of an outcome record for one exchange (transport.Exchange)."""
    text, encoding = encode_body(exchange.body)
    return {
        "seq": seq,
        "time": time,
        "http_status": exchange.http_status,
        "error": exchange.error,
        "error_detail": exchange.error_detail,
        "body": text,
        "body_encoding": encoding,
        "body_truncated": exchange.truncated,
        "headers": exchange.headers,
        "latency_s": round(exchange.latency_s, 6),
        "usage": usage,
        "cost": cost,
        "recovered": False,
        "classification": to_plain(classification),
    }


def received_fields(
    seq: int,
    time: str,
    exchange: Any,
    *,
    answer: dict[str, Any],
    model: str,
    unknown: str,
    rates: tuple[float | None, float | None],
    profile: str = "chat",
) -> dict[str, Any]:
    """The outcome record of an exchange, built so that it can always be journalled.

    Parsing, classification, usage and cost cannot raise (interpret, classify_safely). Should
    the record still fail to serialise, the body is kept as base64 and the unparsed usage
    dropped: the classification stays the one ``audit-run`` derives from the stored bytes.
    """
    c = classify_safely(
        http_status=exchange.http_status,
        transport_error=exchange.error,
        body=exchange.body,
        answer=answer,
        model=model,
        unknown=unknown,
        profile=profile,
    )
    usage, detail = None, exchange.error_detail
    if exchange.error is None:
        parsed = parse_response(exchange.body)
        if isinstance(parsed.data, dict) and isinstance(parsed.data.get("usage"), dict):
            usage = parsed.data["usage"]
        if parsed.kind is not None and exchange.http_status == 200 and not detail:
            detail = f"{parsed.kind}: {parsed.reason}"
    fields = outcome_fields(seq, time, exchange, c, cost_of(usage, *rates), usage)
    fields["error_detail"] = detail
    try:
        # The body is strict-UTF-8-decoded text or base64, which always serialises; leaving
        # it out of this trial spares encoding up to 22 MB twice (journal.append encodes it).
        canonical_bytes({**fields, "body": None})
    except (ValueError, TypeError, OverflowError, RecursionError):
        raw = exchange.body
        fields.update(usage=None, cost=None, body_encoding=None if raw is None else "base64")
        fields["body"] = None if raw is None else base64.b64encode(raw).decode("ascii")
        fields["error_detail"] = f"{detail} (record kept in a safe form)".strip()
    return fields


def interrupted_fields(seq: int, time: str, detail: str, recovered: bool) -> dict[str, Any]:
    """An outcome for an attempt whose request may have run but whose answer we never got."""
    c = classify(http_status=None, transport_error="interrupted", body=None, answer={}, model="")
    nothing = Exchange(None, None, "interrupted", detail, 0.0, False, {})
    fields = outcome_fields(seq, time, nothing, c, None, None)
    return {**fields, "latency_s": None, "recovered": recovered}


CONTEXT_FORMAT = 1


def check_context_manifest(value: Any, where: str) -> dict[str, Any]:
    """context_manifest.json: the prepared folder's hashes and every request body sent."""
    f = Fields(value, where)
    f.choice("format", (CONTEXT_FORMAT,))
    f.text("prepared_dir")
    f.sha256("prepared_manifest_sha256")
    files = f.nested("prepared_files")
    assert files is not None
    for name in files.obj:
        files.sha256(name)
    f.array("sent", lambda v: isinstance(v, dict), "an object")
    for i, entry in enumerate(f.obj["sent"]):
        e = Fields(entry, where, f"sent[{i}].")
        e.integer("seq")
        e.sha256("request_sha256")
        e.text("time")
    f.integer("journal_records", low=0)
    f.sha256("journal_sha256")
    return value
