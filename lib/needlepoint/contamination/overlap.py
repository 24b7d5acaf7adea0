"""Reference vs memory: which reference answers already sit, verbatim, in the automatic context.

Each answer is matched exactly and line by line against every context file. A match can be
discarded by hand as chance, but only with a written reason; the share that remains is the part
of the reference that measured reading, not knowing.

Matching (also the timeline's): a line is cut into tokens, maximal runs of word characters
(letters, digits, underscore) and every other character on its own. Han and kana characters
count as single tokens, because those scripts do not separate words with spaces. An answer
matches where its own tokens occur as consecutive tokens of the line, so 975 does not match
inside 1975 but does match in "975 km", "(975)" or "距离975公里". This is `grep -F -w` with the
boundary checked only on the answer's word-character edges; the two statements are equivalent
(tests check this against each other).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from needlepoint.contamination.context import Context, ContextRef, Problem, Verification
from needlepoint.contamination.inputs import Discard, ReferencePair
from needlepoint.errors import NeedlepointError
from needlepoint.schema import IN_MEMORY

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


# --- the overlap check -------------------------------------------------------------------------


@dataclass(frozen=True)
class OverlapMatch:
    """A reference answer found at ``file:line``; a discarded one carries its reason."""

    reference_id: str
    answer: str
    file: str
    line: int
    text: str
    discard_reason: str | None = None

    @property
    def where(self) -> str:
        """The ``file:line`` location."""
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class OverlapResult:
    """All matches, the discards that did not apply, and the share of the reference already
    present; its fields (with those derived from them) are its part of the report."""

    reference_count: int
    matches: tuple[OverlapMatch, ...]
    unused_discards: tuple[Discard, ...]
    context: ContextRef
    verification: Verification | None
    problems: tuple[Problem, ...] = field(metadata=IN_MEMORY)
    present_ids: tuple[str, ...] = field(init=False)  # with a kept match, in reference order
    present: int = field(init=False)
    share: float = field(init=False)  # of the reference present in the context after discards

    def __post_init__(self) -> None:
        ids = tuple(dict.fromkeys(m.reference_id for m in self.kept))
        object.__setattr__(self, "present_ids", ids)
        object.__setattr__(self, "present", len(ids))
        object.__setattr__(self, "share", len(ids) / self.reference_count)

    @property
    def kept(self) -> tuple[OverlapMatch, ...]:
        """Matches that were not discarded."""
        return tuple(m for m in self.matches if m.discard_reason is None)

    @property
    def discarded(self) -> tuple[OverlapMatch, ...]:
        """Matches discarded by hand, each with its reason."""
        return tuple(m for m in self.matches if m.discard_reason is not None)

    @property
    def leaked(self) -> bool:
        """True when any reference answer remains in the context after discards."""
        return bool(self.present_ids)

    def sentence(self) -> str:
        """One line for reports."""
        return (
            f"{self.present} of {self.reference_count} reference answers present in "
            f"the context ({self.share:.0%}); {len(self.discarded)} match(es) discarded as chance"
        )


def check_overlap(
    reference: Sequence[ReferencePair], context: Context, discards: Sequence[Discard] = ()
) -> OverlapResult:
    """Match every reference answer against every context file and apply the discards."""
    if not reference:
        raise NeedlepointError("overlap: the reference is empty")
    known = {r.id for r in reference}
    reasons: dict[tuple[str, str, int], str] = {}
    for d in discards:
        if d.reference_id not in known:
            raise NeedlepointError(
                f"{d.source}:{d.source_line}: field reference_id: "
                f"'{d.reference_id}' is not in the reference"
            )
        reasons[(d.reference_id, d.file, d.line)] = d.reason
    answers = {r.id: r.answer for r in reference}
    order = {r.id: i for i, r in enumerate(reference)}
    index = AnswerIndex(answers)
    found: list[OverlapMatch] = []
    for f in context.files:
        for hit in index.search(f.text):
            for ref_id in hit.keys:
                reason = reasons.get((ref_id, f.path, hit.line))
                found.append(OverlapMatch(ref_id, hit.value, f.path, hit.line, hit.text, reason))
    found.sort(key=lambda m: (order[m.reference_id], m.file, m.line))
    used = {(m.reference_id, m.file, m.line) for m in found}
    unused = tuple(d for d in discards if (d.reference_id, d.file, d.line) not in used)
    return OverlapResult(
        len(reference), tuple(found), unused, context.ref, context.verification, context.problems
    )
