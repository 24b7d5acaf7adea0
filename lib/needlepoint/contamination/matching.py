"""Exact, token-boundary-aware matching of answers against text, line by line.

A line is cut into tokens: maximal runs of word characters (letters, digits, underscore), and
every other character on its own. Han and kana characters count as single tokens, because those
scripts do not separate words with spaces. An answer matches where its own tokens occur as
consecutive tokens of the line, so 975 does not match inside 1975 but does match in "975 km",
"(975)" or "距离975公里". This is `grep -F -w` with the boundary checked only on the answer's
word-character edges; the two statements are equivalent (tests check this against each other).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

_SINGLE = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_TOKEN = re.compile(rf"[^\W{_SINGLE}]+|.", re.DOTALL)
_WORD = re.compile(rf"[^\W{_SINGLE}]+")
# For ASCII text the word tokens are runs of [A-Za-z0-9_]; str.translate plus split finds them
# about three times faster than the regex, which is most of a scan's cost.
_ASCII_NONWORD = str.maketrans({c: " " for c in map(chr, range(128)) if not _WORD.match(c)})


def tokens(text: str) -> list[str]:
    """Cut text into the tokens that matching respects."""
    return _TOKEN.findall(text)


def _is_word(ch: str) -> bool:
    return _WORD.match(ch) is not None


@dataclass(frozen=True)
class Hit:
    """One occurrence: which keys' value was found, and on which 1-based line."""

    keys: tuple[str, ...]
    value: str
    line: int
    text: str


@dataclass(frozen=True)
class _Value:
    text: str
    keys: tuple[str, ...]
    glue_left: bool  # the value starts with a word character, so the left edge needs a boundary
    glue_right: bool


class AnswerIndex:
    """Values keyed by an anchor word, so a file is tokenised once and only plausible values are
    searched for (with ``str.find``) and then checked at their edges."""

    def __init__(self, values: Mapping[str, str]) -> None:
        by_value: dict[str, list[str]] = {}
        for key, value in values.items():
            if not value or "\n" in value or "\r" in value:
                raise ValueError(f"value for {key!r} must be one non-empty line")
            by_value.setdefault(value, []).append(key)
        self._anchored: dict[str, list[_Value]] = {}
        self._always: list[_Value] = []  # values without a word token (punctuation, Han only)
        for value, keys in sorted(by_value.items()):
            entry = _Value(value, tuple(sorted(keys)), _is_word(value[0]), _is_word(value[-1]))
            words = _WORD.findall(value)
            if words:
                # The longest word is the rarest in practice: fewest files pass the filter.
                anchor = max(words, key=len)
                self._anchored.setdefault(anchor, []).append(entry)
            else:
                self._always.append(entry)
        self._size = len(by_value)

    def __len__(self) -> int:
        return self._size

    def _candidates(self, text: str) -> list[_Value]:
        found = list(self._always)
        anchored = self._anchored
        if text.isascii():
            words = set(text.translate(_ASCII_NONWORD).split())
        else:
            words = set(_WORD.findall(text))
        for word in anchored.keys() & words:
            found.extend(anchored[word])
        return found

    def search(self, text: str) -> Iterator[Hit]:
        """Yield every hit in ``text`` (lines split on LF), ordered by line then position."""
        hits: list[tuple[int, int, _Value]] = []
        for v in self._candidates(text):
            start, n, lines_seen = 0, len(v.text), set()
            line, counted = 0, 0  # newlines before position `counted`, advanced as find moves on
            while (i := text.find(v.text, start)) != -1:
                start = i + 1
                if v.glue_left and i > 0 and _is_word(text[i - 1]):
                    continue
                if v.glue_right and i + n < len(text) and _is_word(text[i + n]):
                    continue
                line, counted = line + text.count("\n", counted, i), i
                if line not in lines_seen:
                    lines_seen.add(line)
                    hits.append((line, i, v))
        hits.sort(key=lambda h: (h[0], h[1]))
        for line, i, v in hits:
            begin = text.rfind("\n", 0, i) + 1
            end = text.find("\n", i)
            line_text = text[begin : len(text) if end == -1 else end]
            yield Hit(v.keys, v.text, line + 1, line_text.rstrip("\r"))
