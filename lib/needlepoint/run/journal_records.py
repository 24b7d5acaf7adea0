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
from needlepoint.run.interpret import cost_of, parse_response
from needlepoint.run.scoring import Classification, classify, classify_safely

REDACTED = "[REDACTED]"
_CONTROLS = bytes(range(0x20))


class Scrubber:
    """Replaces the key wherever it might appear in a record (an echoing server, an error)."""

    def __init__(self, key: str | None) -> None:
        self.key = key

    def __call__(self, value: Any) -> Any:
        if not self.key:
            return value
        if isinstance(value, str):
            return value.replace(self.key, REDACTED)
        if isinstance(value, bytes):
            return value.replace(self.key.encode(), REDACTED.encode())
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v) for v in value]
        return value


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


@dataclass
class JournalState:
    """Totals folded from journal records, in order."""

    attempts: dict[int, dict[str, Any]] = field(default_factory=dict)
    outcomes: dict[int, dict[str, Any]] = field(default_factory=dict)
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

    def add(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if "time" in record:
            self.last_time_text = record["time"]
        if kind == "session":
            self.sessions += 1
        elif kind == "attempt":
            self.attempt_count += 1
            self.attempts.setdefault(record["seq"], record)
        elif kind == "outcome":
            self.outcomes.setdefault(record["seq"], record)
            self.last_done_text = record["time"]
            if record.get("cost") is None:
                self.unknown_cost.append(record["seq"])
            else:
                self.spent += record["cost"]

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
        return dict(Counter(r["classification"]["status"] for r in self.outcomes.values()))
