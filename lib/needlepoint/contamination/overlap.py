"""Reference vs memory: which reference answers already sit, verbatim, in the automatic context.

Each answer is matched exactly and line by line against every context file (see `matching`).
A match can be discarded by hand as chance, but only with a written reason; the share that
remains is the part of the reference that measured reading, not knowing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from needlepoint.contamination.context import Context, Verification
from needlepoint.contamination.formats import Discard, ReferencePair
from needlepoint.contamination.matching import AnswerIndex
from needlepoint.contamination.select import Problem
from needlepoint.errors import NeedlepointError


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
    """All matches, the discards that did and did not apply, and the share already present."""

    reference_count: int
    matches: tuple[OverlapMatch, ...]
    unused_discards: tuple[Discard, ...]
    context_source: str
    context_files: int
    problems: tuple[Problem, ...]
    verification: Verification | None

    @property
    def kept(self) -> tuple[OverlapMatch, ...]:
        """Matches that were not discarded."""
        return tuple(m for m in self.matches if m.discard_reason is None)

    @property
    def discarded(self) -> tuple[OverlapMatch, ...]:
        """Matches discarded by hand, each with its reason."""
        return tuple(m for m in self.matches if m.discard_reason is not None)

    @property
    def present_ids(self) -> tuple[str, ...]:
        """Reference ids with at least one kept match, in reference order."""
        return tuple(dict.fromkeys(m.reference_id for m in self.kept))

    @property
    def share(self) -> float:
        """Fraction of the reference present in the context after discards."""
        return len(self.present_ids) / self.reference_count

    @property
    def leaked(self) -> bool:
        """True when any reference answer remains in the context after discards."""
        return bool(self.present_ids)

    def sentence(self) -> str:
        """One line for reports."""
        return (
            f"{len(self.present_ids)} of {self.reference_count} reference answers present in "
            f"the context ({self.share:.0%}); {len(self.discarded)} match(es) discarded as chance"
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary with every match and discard."""
        return {
            "reference_count": self.reference_count,
            "present": len(self.present_ids),
            "present_ids": list(self.present_ids),
            "share": self.share,
            "matches": [
                {
                    "reference_id": m.reference_id,
                    "answer": m.answer,
                    "file": m.file,
                    "line": m.line,
                    "text": m.text,
                    "discard_reason": m.discard_reason,
                }
                for m in self.matches
            ],
            "unused_discards": [
                {
                    "reference_id": d.reference_id,
                    "file": d.file,
                    "line": d.file_line,
                    "reason": d.reason,
                }
                for d in self.unused_discards
            ],
            "context": {"source": self.context_source, "files": self.context_files},
            "verification": None
            if self.verification is None
            else {
                "verified": self.verification.verified,
                "manifest_sha256": self.verification.manifest_sha256,
                "changes": [
                    {"path": c.path, "kind": c.kind, "detail": c.detail}
                    for c in self.verification.changes
                ],
            },
        }


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
                f"{d.source}:{d.line}: field 'reference_id': "
                f"'{d.reference_id}' is not in the reference"
            )
        reasons[(d.reference_id, d.file, d.file_line)] = d.reason
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
    unused = tuple(d for d in discards if (d.reference_id, d.file, d.file_line) not in used)
    return OverlapResult(
        len(reference),
        tuple(found),
        unused,
        context.source,
        len(context.files),
        context.problems,
        context.verification,
    )
