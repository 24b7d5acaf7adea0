"""The documented shape of a prepared folder's files, checked before anything uses them.

``load_prepared`` and the independent audit both read the data files through these checks, so
a truncated, re-encoded or hand-edited file is refused as ``FILE[:LINE]: field NAME: problem``
(exit 2), never a traceback. Whether the *content* is the protocol's is for verify and audit to
judge; this module only guarantees that every field is present and of its documented type.
It imports nothing from the generator, so the audit stays independent of it.
"""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path
from typing import Any

from needlepoint.design.protocol_schema import MAX_PREPARED_BYTES, estimated_bytes
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import parse_json
from needlepoint.safeio import read_limited
from needlepoint.schema import Fields

PLAN_COLUMNS = (
    "seq",
    "block",
    "pair",
    "case",
    "length",
    "similarity",
    "condition",
    "order",
    "request_sha256",
)
DATA_FILES = ("protocol.json", "requests.jsonl", "plan.csv", "answer_key.jsonl")
_INT_COLUMNS = ("seq", "block", "pair", "length")
_DIGITS = re.compile(r"[0-9]{1,9}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def read_text(path: Path, limit: int = MAX_PREPARED_BYTES) -> str:
    """A data file as UTF-8 text; every failure is one line naming the file (and line).

    A FIFO is refused without blocking, and a file larger than ``limit`` without being read.
    """
    data = read_limited(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise NeedlepointError(f"{path}:{line}: not UTF-8 ({exc.reason})") from None


def size_limits(protocol: dict[str, Any]) -> dict[str, int]:
    """The most bytes each data file of this protocol's prepared folder can hold: more, and it
    is not the file prepare wrote (so it is refused before it is read, whatever its size)."""
    requests = protocol["cases"] * len(protocol["lengths"]) * len(protocol["similarities"])
    requests *= len(protocol["conditions"])
    materials = estimated_bytes(protocol) + (1 << 20)  # an upper estimate, with room
    return {
        "requests.jsonl": materials,
        "answer_key.jsonl": materials,
        "plan.csv": 1024 + 512 * requests,  # nine short fields and a SHA-256 per request
    }


def check_file_sizes(root: Path, protocol: dict[str, Any]) -> None:
    """Refuse a data file larger than the protocol allows, before reading any of it."""
    for name, limit in size_limits(protocol).items():
        try:
            size = os.stat(root / name).st_size
        except OSError:
            continue  # missing or unreadable: the reader says so
        if size > limit:
            raise NeedlepointError(
                f"{root / name}: {size} bytes, more than this protocol's prepared file can hold "
                f"(at most {limit}); not read"
            )


def check_plan(path: Path, text: str | None = None) -> list[dict[str, str]]:
    """plan.csv's rows as dicts of strings: the documented header, nine fields per row,
    decimal integers where the columns are numbers, a hex SHA-256."""
    text = read_text(path) if text is None else text
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise NeedlepointError(f"{path}: malformed CSV ({exc})") from None
    if not rows or tuple(rows[0]) != PLAN_COLUMNS:
        raise NeedlepointError(f"{path}:1: header must be {','.join(PLAN_COLUMNS)}")
    out = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(PLAN_COLUMNS):
            raise NeedlepointError(
                f"{path}:{number}: {len(row)} fields, the header has {len(PLAN_COLUMNS)}"
            )
        values = dict(zip(PLAN_COLUMNS, row, strict=True))
        for name in _INT_COLUMNS:
            if not _DIGITS.fullmatch(values[name]):
                raise NeedlepointError(
                    f"{path}:{number}: field {name}: expected a decimal integer, found "
                    f"{values[name][:20]!r}"
                )
        if not _HEX64.fullmatch(values["request_sha256"]):
            raise NeedlepointError(
                f"{path}:{number}: field request_sha256: expected a lower-case hex SHA-256"
            )
        out.append(values)
    return out


def _no_surrogates(value: Any, f: Fields) -> None:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if _SURROGATE.search(v):
                raise f.fail("value", "a string holds a lone surrogate (not Unicode text)")
        elif isinstance(v, dict):
            stack.extend(v)
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def check_request(value: Any, where: str) -> dict[str, Any]:
    """One requests.jsonl line: ``{"body": {...}, "seq": N}``, the body's fields typed.

    Which fields a body holds depends on its body profile (chat and reasoning send
    ``messages``, completion a ``prompt``); which belong is for verify and audit to judge.
    """
    f = Fields(value, where)
    _no_surrogates(value, f)
    f.integer("seq", low=1)
    body = f.nested("body")
    assert body is not None
    body.text("model")
    body.number("temperature", optional=True)
    for name in ("max_tokens", "max_completion_tokens"):
        body.integer(name, optional=True)
    body.text("reasoning_effort", optional=True)
    body.array("stop", lambda v: isinstance(v, str), "a string", optional=True)
    if "prompt" in body.obj or "messages" not in body.obj:
        body.text("prompt")
    if "messages" in body.obj:
        body.array("messages", lambda m: isinstance(m, dict), "an object")
        for i, message in enumerate(body.obj["messages"]):
            m = Fields(message, where, f"body.messages[{i}].")
            m.text("role")
            m.text("content")
    return value


def check_answer(value: Any, where: str) -> dict[str, Any]:
    """One answer_key.jsonl line with every documented field typed."""
    f = Fields(value, where)
    _no_surrogates(value, f)
    f.integer("seq", low=1)
    for name in ("expected", "target_code", "target_name", "similarity", "condition"):
        f.text(name)
    for name in ("codes_present", "near_codes", "near_names", "near_kinds"):
        f.array(name, lambda v: isinstance(v, str), "a string")
    return value


def check_manifest(value: Any, where: str) -> dict[str, Any]:
    """manifest.json: format, package_version, a SHA-256 per data file, source hashes."""
    f = Fields(value, where)
    f.integer("format")
    f.text("package_version")
    files = f.nested("files")
    assert files is not None
    for name in DATA_FILES:
        files.sha256(name)
    f.sha256("design_fingerprint", optional=True)  # absent from manifests older than it
    sources = f.nested("sources", optional=True)
    if sources is not None:
        for name, digest in sources.obj.items():
            if not isinstance(digest, str):
                raise sources.fail(name, "expected a string")
    return value


def jsonl_values(path: Path, text: str | None = None) -> list[tuple[int, Any]]:
    """``(line, value)`` for each line of a JSONL data file; a blank line is refused."""
    text = read_text(path) if text is None else text
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise NeedlepointError(f"{path}:{number}: empty line")
        out.append((number, parse_json(line, str(path), number)))
    return out
