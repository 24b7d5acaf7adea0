"""Test ids in plain printable ASCII.

pytest escapes an id with a backslash, a control or a non-ASCII character, and when the same
test module is collected twice in one process (mutmut does: docs/mutation.md) it escapes such
an id again, so the second collection cannot find the test by the id the first one gave.
"""

from __future__ import annotations


def plain_id(text: str) -> str:
    """``text`` with every character outside printable ASCII (and the backslash) as <U+XXXX>."""
    return "".join(c if " " <= c <= "~" and c != "\\" else f"<U+{ord(c):04X}>" for c in text)
