"""Canonical JSON and hashing: the bytes that every SHA-256 in the project is taken over.

Canonical means sorted keys, UTF-8, no ASCII escaping and no insignificant whitespace, so that
any language can reproduce the same bytes from the same values.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.safeio import open_read, read_limited, write_bytes_atomic

__all__ = ["canonical_bytes", "parse_json", "read_json", "sha256_hex", "write_bytes_atomic"]

# Deeper than any file this project writes (a journal record: about 70 levels at most), shallow
# enough that no recursive encoder downstream can run out of stack.
MAX_JSON_DEPTH = 128
# The largest JSON document read whole (a contamination manifest of 100,000 files is ~20 MB).
MAX_JSON_FILE_BYTES = 64 * 1024 * 1024


def canonical_bytes(value: Any) -> bytes:
    """Return the canonical JSON encoding of ``value``."""
    return json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    ).encode("utf-8")


def is_canonical(value: Any, data: bytes) -> bool:
    """Whether ``data`` is exactly ``canonical_bytes(value)``, compared piece by piece so that a
    record of many MiB is never encoded whole a second time."""
    encoder = json.JSONEncoder(
        sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )
    at = 0
    try:
        for piece in encoder.iterencode(value):
            chunk = piece.encode("utf-8")
            if data[at : at + len(chunk)] != chunk:
                return False
            at += len(chunk)
    except (ValueError, TypeError, UnicodeEncodeError, RecursionError):
        return False
    return at == len(data)


def sha256_hex(data: bytes) -> str:
    """Hex SHA-256 of raw bytes."""
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes, streamed so large files stay out of memory.

    A regular file only (links to one are followed): a FIFO planted where a file should be
    would block the reader forever, so it is refused with one line instead.
    """
    h = hashlib.sha256()
    with open_read(path, follow=True) as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_json(path: str | os.PathLike[str], *, follow: bool = True, pipes: bool = False) -> Any:
    """Load one JSON document, turning every failure into a one-line NeedlepointError.

    A file larger than MAX_JSON_FILE_BYTES, a FIFO (unless ``pipes``: a file the user names,
    such as ``--protocol <(...)``), or (``follow=False``, for a run folder's records) a symbolic
    link is refused without being read.
    """
    p = Path(path)
    data = read_limited(p, MAX_JSON_FILE_BYTES, follow=follow, pipes=pipes)
    return parse_json(decode_utf8(data, str(p)), str(p))


def decode_utf8(data: bytes, where: str, *, by_line: bool = False) -> str:
    """An input file's bytes as text; bytes that are not UTF-8 are refused in one line naming
    ``where`` (with ``by_line``, the line they are on too), the reason and the byte offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if by_line:
            line = data[: exc.start].count(b"\n") + 1
            where = f"{where}:{line}"
        raise NeedlepointError(f"{where}: not UTF-8 ({exc.reason} at byte {exc.start})") from None


def parse_json(text: str, where: str, line: int | None = None) -> Any:
    """Strict JSON from an input file: no NaN or Infinity, no nesting past the parser's stack,
    no integer too long to read; each refusal is one line naming ``where`` and the line (the
    given ``line`` of a JSONL file, or the line within ``text``)."""
    at = f"{where}:{line}" if line is not None else where
    try:
        value = json.loads(text, parse_constant=refuse_constant, object_pairs_hook=unique_object)
    except DuplicateKey as exc:
        raise NeedlepointError(
            f"{at}: duplicate key {exc.key!r} (each key may appear once)"
        ) from None
    except json.JSONDecodeError as exc:
        at = at if line is not None else f"{where}:{exc.lineno}"
        raise NeedlepointError(f"{at}: broken JSON ({exc.msg})") from None
    except ValueError as exc:  # NaN/Infinity, or an integer of more than 4300 digits
        raise NeedlepointError(f"{at}: not JSON ({str(exc)[:120]})") from None
    except RecursionError:
        raise NeedlepointError(f"{at}: JSON nested too deeply") from None
    if json_depth(value) > MAX_JSON_DEPTH:
        raise NeedlepointError(f"{at}: JSON nested more than {MAX_JSON_DEPTH} levels deep")
    return value


def json_depth(value: Any) -> int:
    """How many objects and lists are nested at the deepest point (iteratively: no recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict | list):
            deepest = max(deepest, depth)
            stack.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


class DuplicateKey(ValueError):
    """A JSON object names one key twice: which value is meant cannot be known."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` that refuses a repeated key instead of keeping the last value."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return value


def refuse_constant(name: str) -> Any:
    """``parse_constant`` for every strict reader: NaN and Infinity are not JSON numbers (Python
    reads them by default, and a record holding one could not be written back as JSON)."""
    raise ValueError(f"{name} is not a JSON number")


def jsonl_values(text: str, where: str) -> list[tuple[int, Any]]:
    """``(line, value)`` for each line of a JSONL file's text, each parsed strictly; a blank line
    is refused (a final newline is not a line)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise NeedlepointError(f"{where}:{number}: empty line")
        out.append((number, parse_json(line, where, number)))
    return out


def jsonl_bytes(values: Iterable[Any]) -> bytes:
    """Canonical JSONL: one canonical document per line, each ending in a newline."""
    return b"".join(canonical_bytes(v) + b"\n" for v in values)
