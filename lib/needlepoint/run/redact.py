"""Keep the key out of every record, in whatever encoding a server or a library echoes it.

A server may send the key back JSON-escaped (``\\u0073k-…``, ``\\/`` for a slash), percent-
encoded in a header, HTML-escaped, or base64-encoded (a ``Bearer`` or ``Basic`` header echoed
in a debug body); an error message may hold it in a ``repr``. The scrubber matches each
character of the key in any of those spellings, and the key's base64 forms at every alignment,
in bodies (before they are classified, so ``audit-run`` re-derives the same classification from
the stored bytes), headers and error details.
"""

from __future__ import annotations

import base64
import re
from typing import Any

REDACTED = "[REDACTED]"
# Characters of base64 that a key's encoding must share with the text around it, at most.
_B64_EDGE = 2


def _char_forms(c: str) -> str:
    """A pattern for one key character in any spelling: itself, ``\\uXXXX`` (any number of
    backslashes, either case), ``%XX``, ``&#NN;`` or ``&#xXX;``, or backslash-escaped."""
    code = ord(c)
    hx = "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in f"{code:02x}")
    hx4 = "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in f"{code:04x}")
    forms = [
        re.escape(c),
        rf"\\+[uU]{hx4}",
        rf"%{hx}",
        rf"&#0*{code};",
        rf"&#[xX]0*{hx};",
        rf"\\+{re.escape(c)}",  # \/ and \" and \\ (and a doubly escaped string's \\\/)
    ]
    return "(?:" + "|".join(forms) + ")"


def _base64_forms(key: bytes) -> list[str]:
    """The key's characters inside any base64 text, at each of the three byte alignments.

    Only the base64 characters that depend on the key's bytes alone are kept, so the pattern
    matches whatever precedes or follows it (``Bearer …``, ``user:…``).
    """
    out = []
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + key).decode("ascii")
        first = -(-offset * 8 // 6)  # characters fed by the padding bytes
        last = (offset + len(key)) * 8 // 6  # characters fed only by key bits end here
        core = encoded[first:last]
        if len(core) > _B64_EDGE:
            out.append(core)
            out.append(core.translate(str.maketrans("+/", "-_")))  # the URL-safe alphabet
    return out


class Scrubber:
    """Replaces the key wherever it might appear in a record (an echoing server, an error)."""

    def __init__(self, key: str | None) -> None:
        self.key = key
        self._text: re.Pattern[str] | None = None
        self._bytes: re.Pattern[bytes] | None = None
        if key:
            literal = "".join(_char_forms(c) for c in key)
            b64 = ["".join(_char_forms(c) if c == "/" else re.escape(c) for c in form)
                   for form in _base64_forms(key.encode("utf-8"))]  # fmt: skip
            # Every spelling starts with one of few characters: a look-ahead on them lets the
            # scan skip the rest of a 16 MiB body about four times faster.
            firsts = {key[0], "\\", "%", "&", *(form[0] for form in _base64_forms(key.encode()))}
            first = "[" + "".join(re.escape(c) for c in sorted(firsts)) + "]"
            pattern = f"(?={first})(?:" + "|".join([literal, *b64]) + ")"
            self._text = re.compile(pattern)
            self._bytes = re.compile(pattern.encode("utf-8"))

    def __call__(self, value: Any) -> Any:
        if self._text is None or self._bytes is None:
            return value
        if isinstance(value, str):
            return self._text.sub(REDACTED, value)
        if isinstance(value, bytes):
            return self._bytes.sub(REDACTED.encode(), value)
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v) for v in value]
        return value
