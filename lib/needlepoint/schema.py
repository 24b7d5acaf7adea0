"""Every typed file on disk: one codec between frozen dataclasses and JSON, and ``Fields``.

A record is a frozen dataclass whose field names are its JSON keys and whose type hints say what
each value may be. Writing turns it into plain dicts, lists and scalars; reading checks every
key and type against the hints and refuses anything else with one line naming the field, so a
hand-edited or foreign file never half-loads. A record that stores some keys flattened (one key
per condition order, say) overrides ``to_plain`` and ``from_plain`` for itself.

An input file whose shape is a rule rather than a record (a protocol, a journal line) is read
through ``Fields``: each accessor checks one field's presence, type and range, and a refusal is
``FILE[:LINE]: field NAME: problem`` (exit 2), never a traceback later. Nested objects get their
own ``Fields`` with a dotted prefix, so the message names the full path.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import MAX_JSON_FILE_BYTES, decode_utf8, parse_json
from needlepoint.safeio import read_limited

_MISSING = object()


def type_name(value: Any) -> str:
    """The JSON name of a Python value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def is_int(value: Any) -> bool:
    """A JSON integer: an int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A finite JSON number: a float that is not NaN or infinite, or an integer small enough to
    become one exactly (|n| <= 2^53); not a boolean."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, int):
        return abs(value) <= 2**53
    return math.isfinite(value)


class Fields:
    """One JSON object of a file; each accessor checks a field's presence and type."""

    def __init__(self, obj: Any, where: str, prefix: str = "") -> None:
        self.where, self.prefix = where, prefix
        if not isinstance(obj, dict):
            name = prefix.rstrip(".") or "document"
            raise NeedlepointError(
                f"{where}: field {name}: expected an object, found {type_name(obj)}"
            )
        self.obj = obj

    def fail(self, name: str, problem: str) -> NeedlepointError:
        """The one-line error for field ``name`` of this object."""
        return NeedlepointError(f"{self.where}: field {self.prefix}{name}: {problem}")

    def get(self, name: str, optional: bool) -> Any:
        value = self.obj.get(name, _MISSING)
        if value is _MISSING:
            if optional:
                return None
            raise self.fail(name, "missing")
        return value

    def _check(self, name: str, ok: Callable[[Any], bool], what: str, optional: bool) -> Any:
        value = self.get(name, optional)
        if value is None and optional:
            return None
        if not ok(value):
            raise self.fail(name, f"expected {what}, found {type_name(value)}")
        return value

    def integer(
        self, name: str, *, low: int | None = None, high: int | None = None, optional: bool = False
    ) -> Any:
        """An integer, optionally within ``low..high`` (inclusive); None only if optional."""
        value = self._check(name, is_int, "an integer", optional)
        if value is not None:
            self._range(name, value, low, high)
        return value

    def number(
        self,
        name: str,
        *,
        low: float | None = None,
        high: float | None = None,
        optional: bool = False,
    ) -> Any:
        """A finite number (integer or not), optionally within ``low..high``."""
        value = self._check(name, is_number, "a finite number", optional)
        if value is not None:
            self._range(name, value, low, high)
        return value

    def _range(self, name: str, value: Any, low: Any, high: Any) -> None:
        if low is not None and value < low:
            raise self.fail(name, f"{value!r} is below the minimum {low}")
        if high is not None and value > high:
            raise self.fail(name, f"{value!r} is above the maximum {high}")

    def text(self, name: str, *, nonempty: bool = False, optional: bool = False) -> Any:
        """A string (non-empty when asked); None only if optional."""
        value = self._check(name, lambda v: isinstance(v, str), "a string", optional)
        if nonempty and value == "":
            raise self.fail(name, "must not be empty")
        return value

    def boolean(self, name: str, *, optional: bool = False) -> Any:
        return self._check(name, lambda v: isinstance(v, bool), "true or false", optional)

    def choice(self, name: str, options: Sequence[Any], *, optional: bool = False) -> Any:
        """One of ``options`` (compared with their types, so 1 is not True)."""
        value = self.get(name, optional)
        if value is None and optional:
            return None
        if not any(type(value) is type(o) and value == o for o in options):
            shown = ", ".join(repr(o) for o in options)
            raise self.fail(name, f"{value!r} is not one of {shown}")
        return value

    def sha256(self, name: str, *, optional: bool = False) -> Any:
        """A lower-case hex SHA-256 digest."""
        value = self.text(name, optional=optional)
        if value is not None and (
            len(value) != 64 or any(c not in "0123456789abcdef" for c in value)
        ):
            raise self.fail(name, "expected a lower-case hex SHA-256 digest")
        return value

    def nested(self, name: str, *, optional: bool = False) -> Fields | None:
        """A nested object as ``Fields``."""
        value = self._check(name, lambda v: isinstance(v, dict), "an object", optional)
        return None if value is None else Fields(value, self.where, f"{self.prefix}{name}.")

    def array(
        self,
        name: str,
        item: Callable[[Any], bool] | None = None,
        what: str = "",
        *,
        nonempty: bool = False,
        optional: bool = False,
    ) -> Any:
        """A list whose every element passes ``item`` (described by ``what``)."""
        value = self._check(name, lambda v: isinstance(v, list), "a list", optional)
        if value is None:
            return None
        if nonempty and not value:
            raise self.fail(name, "must not be empty")
        if item is not None:
            for i, element in enumerate(value):
                if not item(element):
                    raise self.fail(f"{name}[{i}]", f"expected {what}, found {type_name(element)}")
        return value

    def only(self, names: Sequence[str]) -> None:
        """Refuse fields that the schema does not name."""
        extra = sorted(set(self.obj) - set(names))
        if extra:
            raise self.fail(extra[0], "unknown field")


R = TypeVar("R")


def to_plain(value: Any) -> Any:
    """The JSON value of a record (or of any nesting of records, tuples, dicts and scalars)."""
    hook = getattr(value, "to_plain", None)
    if hook is not None and dataclasses.is_dataclass(value):
        return hook()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return fields_plain(value)
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    return value


# Metadata of a field a record keeps for its own use only (a time in nanoseconds beside the ISO
# text the document shows, say): ``dataclasses.field(metadata=IN_MEMORY)``. Writing leaves it
# out, so such a record is written, never read back.
IN_MEMORY = {"plain": False}


def fields_plain(record: Any) -> dict[str, Any]:
    """A record's fields as a JSON object, in field order, without any ``to_plain`` override."""
    return {
        f.name: to_plain(getattr(record, f.name))
        for f in dataclasses.fields(record)
        if f.metadata.get("plain", True)
    }


@functools.cache
def hints(cls: type) -> dict[str, Any]:
    """A dataclass's resolved field types (cached: the string annotations are parsed once)."""
    resolved = typing.get_type_hints(cls)
    return {f.name: resolved[f.name] for f in dataclasses.fields(cls)}


def field_names(cls: type) -> list[str]:
    """A record's field names in order: the keys its JSON object has."""
    return [f.name for f in dataclasses.fields(cls)]


def fail(where: str, text: str) -> typing.NoReturn:
    """Refuse a value with one line that names where it is."""
    raise NeedlepointError(f"{where}: {text}")


def from_plain(tp: Any, value: Any, where: str) -> Any:
    """Read ``value`` as type ``tp`` (a record, tuple, dict, union or scalar), checking it all."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        choices = [a for a in args if a is not type(None)]
        if len(choices) != 1:
            raise TypeError(f"{where}: only `X | None` unions are supported")
        return from_plain(choices[0], value, where)
    if origin is tuple:
        if not isinstance(value, list):
            fail(where, f"expected a list, got {type(value).__name__}")
        return tuple(from_plain(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            fail(where, f"expected an object, got {type(value).__name__}")
        return {k: from_plain(args[1], v, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            fail(where, f"expected an object, got {type(value).__name__}")
        custom = getattr(tp, "from_plain", None)
        return custom(value, where) if custom is not None else record_from_plain(tp, value, where)
    return _scalar(tp, value, where)


def record_from_plain(cls: type[R], value: dict[str, Any], where: str) -> R:
    """Build record ``cls`` from a JSON object with exactly its fields."""
    names = field_names(cls)
    missing = [n for n in names if n not in value]
    if missing:
        fail(f"{where}.{missing[0]}" if where else missing[0], "missing")
    unknown = sorted(set(value) - set(names))
    if unknown:
        fail(f"{where}.{unknown[0]}" if where else unknown[0], "unknown field")
    types_ = hints(cls)
    prefix = f"{where}." if where else ""
    return cls(**{n: from_plain(types_[n], value[n], prefix + n) for n in names})


def _scalar(tp: Any, value: Any, where: str) -> Any:
    # bool is an int in Python; a JSON true is never a count or a rate here.
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        # An integer stays an integer: its JSON bytes (2 versus 2.0) must survive a round trip.
        # Finite, and an integer no larger than a double holds exactly, so arithmetic on it
        # can neither overflow nor turn into inf or NaN.
        ok = is_number(value)
    elif tp is str:
        ok = isinstance(value, str)
    else:
        raise TypeError(f"{where}: unsupported field type {tp!r}")
    if not ok:
        fail(where, f"expected {tp.__name__}, got {value!r}")
    return value


def document_bytes(record: Any) -> bytes:
    """A versioned document as a file: sorted keys, two-space indent, UTF-8, final newline.

    Readable in a diff, and the same bytes for the same record; NaN is refused, never written.
    """
    text = json.dumps(
        to_plain(record), indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False
    )
    return (text + "\n").encode("utf-8")


def versioned_from_json(data: bytes | str, cls: type[R], fmt: str, version: int, where: str) -> R:
    """Read a versioned document, refusing another format or version and any malformed field."""
    value = parse_json(decode_utf8(data, where) if isinstance(data, bytes) else data, where)
    if not isinstance(value, dict) or value.get("format") != fmt:
        found = value.get("format") if isinstance(value, dict) else None
        raise NeedlepointError(f"{where}: format {found!r} is not {fmt!r}")
    if value.get("version") != version:
        raise NeedlepointError(
            f"{where}: {fmt} version {value.get('version')!r} is not supported "
            f"(this needlepoint reads version {version})"
        )
    try:
        return typing.cast(R, from_plain(cls, value, ""))
    except NeedlepointError as exc:
        raise NeedlepointError(f"{where}: field {exc}") from None


def read_versioned(path: str | Path, cls: type[R], fmt: str, version: int) -> R:
    """Load a versioned document file (``versioned_from_json`` naming the file in every message)."""
    p = Path(path)
    data = read_limited(p, MAX_JSON_FILE_BYTES)
    return versioned_from_json(data, cls, fmt, version, str(p))


class AddedLater:
    """A record with fields added after its first version, or written only when they apply
    (``ADDED_LATER``): left out of its JSON while None, and read as None when missing, so a file
    written before them keeps its bytes."""

    ADDED_LATER: ClassVar[tuple[str, ...]] = ()

    def to_plain(self) -> dict[str, Any]:
        """The JSON object without the ``ADDED_LATER`` fields that are None: a record read from
        an older file is written back with exactly the keys it had."""
        plain = fields_plain(self)
        for name in self.ADDED_LATER:
            if plain[name] is None:
                del plain[name]
        return plain

    @classmethod
    def from_plain(cls, value: dict[str, Any], where: str) -> Any:
        """Read the record; a missing ``ADDED_LATER`` field reads as None."""
        return record_from_plain(cls, dict.fromkeys(cls.ADDED_LATER) | value, where)
