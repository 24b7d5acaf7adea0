"""The schema of journal records (format 1), checked field by field on every read.

The hash chain proves that nothing was edited after the fact, but a re-chained file (records
edited and every hash recomputed) passes it; so each record is also checked against the
documented fields and types before the runner, ``results`` or ``audit-run`` uses it.
"""

from __future__ import annotations

from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.run.clock import parse_iso_utc
from needlepoint.run.scoring import STATUSES
from needlepoint.schema import Fields, is_int

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
    f.integer("allow", low=1)
    f.number("min_gap_s", low=0)
    f.text("override_reason", optional=True)
    f.number("timeout_s", low=0)
    f.number("deadline_s", low=0)
    for name in ("input_rate", "output_rate", "cost_cap"):
        f.number(name, low=0, optional=True)
    for name in ("dropped_tail_sha256", "declaration_sha256"):
        if name in f.obj:
            f.sha256(name)


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
