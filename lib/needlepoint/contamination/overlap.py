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
from needlepoint.contamination.inputs import Discard, ReferencePair, Run, iso_from_ns
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


# Timeline: context files written after a run that hold its results, and the reruns they poison.
#
# A file with modification time t is taken to exist at every instant from t on. So a file whose
# mtime is *after* a run's start and that contains that run's recorded values was written from
# the run: harmless to it. Every other run of the same battery that started *at or after* t could
# read it, and is a poisoned rerun. Equal timestamps therefore count against the run: a file
# stamped exactly at a run's start existed at that start (not an artifact of it), and a run that
# starts exactly when the file was written is poisoned by it.


@dataclass(frozen=True)
class Holding:
    """A context file that holds recorded values of a run, and where."""

    file: str
    mtime_ns: int = field(metadata=IN_MEMORY)
    run_id: str
    started_ns: int = field(metadata=IN_MEMORY)
    values: tuple[str, ...]
    lines: tuple[int, ...]
    mtime: str = field(init=False)  # the times as exact ISO 8601 UTC strings, for the report
    run_started: str = field(init=False)
    after_run: bool = field(init=False)  # written after the run started: it came from the run

    def __post_init__(self) -> None:
        object.__setattr__(self, "mtime", iso_from_ns(self.mtime_ns))
        object.__setattr__(self, "run_started", iso_from_ns(self.started_ns))
        object.__setattr__(self, "after_run", self.mtime_ns > self.started_ns)

    @property
    def minutes_after_start(self) -> float:
        """File mtime minus run start, in minutes (negative: the file is older)."""
        return (self.mtime_ns - self.started_ns) / 60e9


@dataclass(frozen=True)
class PoisonedRun:
    """A run that started while a file holding an earlier run's results was in its context."""

    run_id: str
    battery: str
    started_ns: int = field(metadata=IN_MEMORY)
    file: str
    file_mtime_ns: int = field(metadata=IN_MEMORY)
    source_runs: tuple[str, ...]
    started: str = field(init=False)  # the times as exact ISO 8601 UTC strings, for the report
    file_mtime: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "started", iso_from_ns(self.started_ns))
        object.__setattr__(self, "file_mtime", iso_from_ns(self.file_mtime_ns))


@dataclass(frozen=True)
class TimelineResult:
    """Files newer than the runs they describe, the reruns they poison, and older holdings;
    its fields (with the number of runs) are its part of the report."""

    run_list: tuple[Run, ...] = field(metadata=IN_MEMORY)
    holdings: tuple[Holding, ...]
    poisoned: tuple[PoisonedRun, ...]
    context: ContextRef
    problems: tuple[Problem, ...] = field(metadata=IN_MEMORY)
    verification: Verification | None = field(metadata=IN_MEMORY)
    runs: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "runs", len(self.run_list))

    @property
    def artifacts(self) -> tuple[Holding, ...]:
        """Holdings written after their run: each must leave the context before any rerun."""
        return tuple(h for h in self.holdings if h.after_run)

    @property
    def has_poisoned_rerun(self) -> bool:
        """True when at least one run was poisoned."""
        return bool(self.poisoned)

    def sentence(self) -> str:
        """One line for reports."""
        files = sorted({h.file for h in self.artifacts})
        return (
            f"{len(files)} context file(s) newer than a run and holding its results; "
            f"{len(self.poisoned)} poisoned rerun(s) among {self.runs} runs"
        )


def check_timeline(runs: Sequence[Run], context: Context) -> TimelineResult:
    """Find files that hold a run's values, and the same-battery runs started after them."""
    owners: dict[str, list[Run]] = {}
    for run in runs:
        for value in run.values:
            owners.setdefault(value, []).append(run)
    index = AnswerIndex({v: v for v in owners})
    holdings: list[Holding] = []
    for f in context.files:
        per_run: dict[str, tuple[Run, dict[str, None], dict[int, None]]] = {}
        for hit in index.search(f.text):
            for run in owners[hit.value]:
                _, values, lines = per_run.setdefault(run.run_id, (run, {}, {}))
                values[hit.value] = None
                lines[hit.line] = None
        for run, values, lines in per_run.values():
            holdings.append(
                Holding(f.path, f.mtime_ns, run.run_id, run.started_ns, tuple(values), tuple(lines))
            )
    holdings.sort(key=lambda h: (h.file, h.started_ns, h.run_id))
    sources: dict[tuple[str, str], list[str]] = {}
    by_id = {r.run_id: r for r in runs}
    for h in holdings:
        if not h.after_run:
            continue
        battery = by_id[h.run_id].battery
        for other in runs:
            if other.battery == battery and other.started_ns >= h.mtime_ns:
                sources.setdefault((other.run_id, h.file), []).append(h.run_id)
    mtimes = {f.path: f.mtime_ns for f in context.files}
    poisoned = [
        PoisonedRun(
            run_id, by_id[run_id].battery, by_id[run_id].started_ns, file, mtimes[file], tuple(src)
        )
        for (run_id, file), src in sources.items()
    ]
    poisoned.sort(key=lambda p: (p.started_ns, p.run_id, p.file))
    return TimelineResult(
        tuple(runs),
        tuple(holdings),
        tuple(poisoned),
        context.ref,
        context.problems,
        context.verification,
    )
