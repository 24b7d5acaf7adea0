"""Exact, token-boundary-aware matching of answers against text, line by line.

A line is cut into tokens: maximal runs of word characters (letters, digits, underscore), and
every other character on its own. Han and kana characters count as single tokens, because those
scripts do not separate words with spaces. An answer matches where its own tokens occur as
consecutive tokens of the line, so 975 does not match inside 1975 but does match in "975 km",
"(975)" or "距离975公里". This is `grep -F -w` with the boundary checked only on the answer's
word-character edges.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

_SINGLE = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_TOKEN = re.compile(rf"[^\W{_SINGLE}]+|.", re.DOTALL)


def tokens(text: str) -> list[str]:
    """Cut text into the tokens that matching respects."""
    return _TOKEN.findall(text)


@dataclass(frozen=True)
class Hit:
    """One occurrence: which keys' value was found, and on which 1-based line."""

    keys: tuple[str, ...]
    value: str
    line: int
    text: str


class AnswerIndex:
    """Values indexed by their first token, so a file is scanned once for all of them."""

    def __init__(self, values: Mapping[str, str]) -> None:
        by_value: dict[str, list[str]] = {}
        for key, value in values.items():
            by_value.setdefault(value, []).append(key)
        self._first: dict[str, list[tuple[list[str], str, tuple[str, ...]]]] = {}
        for value, keys in sorted(by_value.items()):
            toks = tokens(value)
            if toks:
                self._first.setdefault(toks[0], []).append((toks, value, tuple(sorted(keys))))

    def __len__(self) -> int:
        return sum(len(v) for v in self._first.values())

    def search(self, text: str) -> Iterator[Hit]:
        """Yield every hit in ``text`` (lines split on LF), in line order."""
        first = self._first
        # Most files hold none of the first tokens; one pass over the whole text tells.
        if first.keys().isdisjoint(tokens(text)):
            return
        for number, line in enumerate(text.split("\n"), start=1):
            toks = tokens(line)
            if first.keys().isdisjoint(toks):
                continue
            seen: set[str] = set()
            for k, tok in enumerate(toks):
                for value_toks, value, keys in first.get(tok, ()):
                    n = len(value_toks)
                    if value not in seen and (n == 1 or toks[k : k + n] == value_toks):
                        seen.add(value)
                        yield Hit(keys, value, number, line.rstrip("\r"))
