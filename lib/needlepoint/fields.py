"""Typed reading of one JSON object from an input file, refusing with one line per problem.

Every input file is checked field by field against its documented schema before any code
uses it, so a damaged or hand-edited file is refused as ``FILE[:LINE]: field NAME: problem``
(exit 2) instead of surfacing later as a traceback. ``Fields`` wraps one object; nested
objects get their own ``Fields`` with a dotted prefix, so the message names the full path.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from needlepoint.errors import NeedlepointError

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
