"""The journal's record vocabulary: building outcome records and folding records into totals.

Record types (journal format 1): ``session`` (one per runner invocation, with its settings),
``attempt`` (written and fsynced before the request leaves), ``outcome`` (after it, or on
recovery), ``stop`` (why a session ended). Both the runner and ``results`` read the journal
through ``JournalState``, so the allowance they count and the rows they derive agree.
"""

from __future__ import annotations

import base64
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from needlepoint.jsonio import canonical_bytes
from needlepoint.run.clock import parse_iso_utc
from needlepoint.run.interpret import cost_of, parse_response, reasoning_tokens
from needlepoint.run.scoring import Classification, classify, classify_safely
from needlepoint.run.transport import REDACTED, Scrubber

__all__ = ["REDACTED", "JournalState", "Scrubber", "decode_body", "encode_body"]

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
        "classification": classification.to_json(),
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
    return {
        "seq": seq,
        "time": time,
        "http_status": None,
        "error": "interrupted",
        "error_detail": detail,
        "body": None,
        "body_encoding": None,
        "body_truncated": False,
        "headers": {},
        "latency_s": None,
        "usage": None,
        "cost": None,
        "recovered": recovered,
        "classification": c.to_json(),
    }


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
    locates the whole record in journal.jsonl (a ``journal_read.Locator``), for the one reader
    that needs the text again (``results``).
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
        )


@dataclass
class JournalState:
    """Totals folded from journal records, in order; outcomes are kept as ``OutcomeSummary``."""

    attempts: dict[int, dict[str, Any]] = field(default_factory=dict)
    outcomes: dict[int, OutcomeSummary] = field(default_factory=dict)
    sent: list[dict[str, Any]] = field(default_factory=list)  # every attempt, in journal order
    attempt_count: int = 0
    last_done_text: str | None = None  # time of the latest outcome
    last_time_text: str | None = None  # latest time in any record
    spent: float = 0.0
    unknown_cost: list[int] = field(default_factory=list)
    sessions: int = 0

    @classmethod
    def of(cls, records: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> JournalState:
        state = cls()
        for record in records:
            state.add(record)
        return state

    def add(self, record: dict[str, Any], at: Any = None) -> None:
        kind = record.get("type")
        if "time" in record:
            self.last_time_text = record["time"]
        if kind == "session":
            self.sessions += 1
        elif kind == "attempt":
            self.attempt_count += 1
            entry = {k: record.get(k) for k in ("seq", "request_sha256", "time")}
            self.attempts.setdefault(record.get("seq"), entry)
            self.sent.append(entry)
        elif kind == "outcome":
            self.outcomes.setdefault(record.get("seq"), OutcomeSummary.of(record, at))
            self.last_done_text = record.get("time")
            cost = record.get("cost")
            if isinstance(cost, int | float) and not isinstance(cost, bool):
                self.spent += cost
            else:
                self.unknown_cost.append(record.get("seq"))

    @property
    def last_done(self) -> float | None:
        """Wall (or simulated) time of the latest outcome, in epoch seconds."""
        return None if self.last_done_text is None else parse_iso_utc(self.last_done_text)

    @property
    def last_time(self) -> float | None:
        return None if self.last_time_text is None else parse_iso_utc(self.last_time_text)

    @property
    def dangling(self) -> list[int]:
        """Seqs attempted without an outcome: the process died while they were in flight."""
        return [s for s in self.attempts if s not in self.outcomes]

    def counts(self) -> dict[str, int]:
        return dict(Counter(r.status for r in self.outcomes.values()))

    def why_unknown(self, seq: int) -> str:
        """Why the cost of an outcome is unknown, for the stop line."""
        outcome = self.outcomes.get(seq)
        if outcome is None or not outcome.has_usage:
            return "no usage in the response"
        return "its usage has no integer prompt_tokens and completion_tokens"
