"""Untrusted text made safe for the place it goes: one helper per sink, and one copy of each rule.

Model ids, file names, folder names, memo lines and bodies come from servers and from files
that anyone may have written. Each sink needs its own treatment:

- **a terminal** (``terminal``): C0 and C1 controls, DEL, line and paragraph separators and the
  bidirectional overrides are written as escapes (``\\x1b``, ``\\u202e``), so one value prints
  as one line that cannot clear the screen, set the window title, rewrite the line with a CR,
  forge a second report line, or reorder what is shown;
- **Markdown that may be rendered to HTML** (``md_text`` for running text and table cells,
  ``md_code`` for a code span): ``md_text`` escapes every character that Markdown or HTML would
  read as markup (``<``, ``&``, ``[``, backticks, ...), and ``md_code`` puts the value in a
  fence of backticks longer than any run inside it, so nothing in it can close the span;
- **files** (``Scrubber``): the API key, in any spelling a server may echo it (itself, JSON
  ``\\uXXXX`` escapes, percent-encoding, HTML entities, base64 at every alignment, the URL-safe
  alphabet included, so ``base64("Bearer KEY")`` too) and in every byte encoding the journal
  may store a body in (UTF-8, and UTF-16 and UTF-32 in either byte order, which the journal
  keeps as base64 because they are not UTF-8), is replaced by ``[REDACTED]``.
"""

from __future__ import annotations

import base64
import re
from typing import Any

# C0 controls, DEL and C1 controls; NEL (U+0085) is a C1 control. The line and paragraph
# separators end a line in some terminals and editors; the bidirectional controls (embeddings,
# overrides, isolates and marks) reorder what is displayed around them.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# A lone surrogate: a byte of a file name that is not UTF-8 (surrogateescape), or a JSON
# "\ud800" escape; either is no text. The one copy: the design files and the answers use it too.
SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(value: object) -> str:
    """``value`` as text that prints as exactly one line and changes nothing on the terminal."""
    text = _UNSAFE.sub(_escape, str(value))
    return SURROGATE.sub(_escape, text)


# The ASCII punctuation that Markdown (CommonMark, GFM tables, Jupyter's ``$`` maths) reads as
# inline markup; CommonMark lets a backslash escape any of them. ``<``, ``>`` and ``&`` become
# entities, so the text stays inert when Markdown passes raw HTML through. Block markup (``#``,
# ``-``, ``1.`` at the start of a line) is not escaped: these values go inside a line, after
# other text or in a table cell, never at its start.
_MD_PUNCT = re.compile(r"([\\`*_{}\[\]!|~$])")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def md_text(value: object) -> str:
    """``value`` as Markdown text inside a line or a table cell that renders as itself, on one
    line: no link, image, emphasis, code span or HTML can be made from it."""
    text = terminal(value)
    text = re.sub("[&<>]", lambda m: _HTML[m.group(0)], text)
    return _MD_PUNCT.sub(r"\\\1", text)


def md_code(value: object) -> str:
    """``value`` as a Markdown code span that nothing inside it can close, on one line.

    The fence is one backtick longer than the longest run of backticks in the value; a value
    that starts or ends with a backtick or a space is padded with one space on each side (which
    CommonMark strips again). In a code span ``<`` and ``&`` are shown literally, never as markup.
    A ``|`` would still end a table cell in GFM, so it is escaped (GFM removes the backslash).
    """
    text = terminal(value).replace("|", "\\|")
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    if text.startswith(("`", " ")) or text.endswith(("`", " ")) or not text:
        text = f" {text} "
    return f"{fence}{text}{fence}"


REDACTED = "[REDACTED]"
# Characters of base64 that a key's encoding must share with the text around it, at most.
_B64_EDGE = 2
# The byte encodings besides UTF-8 that a body may arrive in and be stored in (as base64).
WIDE_ENCODINGS = ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")


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
            alternatives = "|".join([literal, *b64])
            self._text = re.compile(f"(?={first})(?:{alternatives})")
            # A body that is not UTF-8 (a 401 in UTF-16 echoing the key) is stored as base64
            # of its bytes: the key's UTF-16 and UTF-32 spellings are found in the bytes.
            wide = [re.escape(key.encode(enc)) for enc in WIDE_ENCODINGS]
            first_bytes = b"[\\x00" + first[1:].encode("utf-8")
            self._bytes = re.compile(
                b"(?=" + first_bytes + b")(?:" + b"|".join([*wide, alternatives.encode()]) + b")"
            )

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
        if isinstance(value, tuple):
            return tuple(self(v) for v in value)
        return value


def say(*values: object, sep: str = " ", file: Any = None, flush: bool = False) -> None:
    """``print`` for a line that holds values from elsewhere: it stays one inert line. Each
    value is made safe alone, so a ``sep`` of ``"\\t"`` still separates columns."""
    print(sep.join(terminal(v) for v in values), file=file, flush=flush)
