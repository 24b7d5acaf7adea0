"""Canary and positive control: tell knowing from reading by the tool-call count.

Closed facts exist only inside the workspace. Asked from a clean room, they must score 0, or
the questions are guessable and the canary is dead. Asked from inside, an exact answer with
zero tool calls means the fact was already in the context. Without a recorded tool-call count
there is no detector at all, which is itself a finding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from needlepoint.contamination.inputs import CONDITIONS, ResultRow
from needlepoint.schema import IN_MEMORY

_TRIMMED = "".join(chr(c) for c in range(0x21))


def is_exact(row: ResultRow) -> bool:
    """The answer equals the expected value after Java ``String.trim()`` (U+0000..U+0020)."""
    return row.answer is not None and row.answer.strip(_TRIMMED) == row.expected


@dataclass(frozen=True)
class ConditionSummary:
    """Closed-fact questions of one condition: how many, how many exact, tool calls in total."""

    condition: str
    questions: int
    exact: int
    tool_calls: int | None


@dataclass(frozen=True)
class CanaryResult:
    """Dead-canary rows, leak rows, rows without a tool-call count, and the per-condition table;
    its fields are its part of the report (each flagged row as read, without ``closed``)."""

    rows: int
    summary: tuple[ConditionSummary, ...]
    dead_canary: tuple[ResultRow, ...]  # the clean room answered these closed facts exactly
    leaks: tuple[ResultRow, ...]
    missing_tool_calls: tuple[ResultRow, ...]
    # "results" (the tool_calls column) or "transcript" (--transcripts counted them). Both are
    # kept out of the report's canary part (whose bytes the committed evidence pins): the gate
    # says "tool_calls_source: transcript" as a notice, and each problem is a finding there.
    tool_calls_source: str = field(default="results", metadata=IN_MEMORY)
    # Transcripts that could not be read whole, rows matched to no turn or several, AGENTS.md
    # text that is not the frozen one: each a finding, never a clean pass.
    transcript_problems: tuple[str, ...] = field(default=(), metadata=IN_MEMORY)

    @property
    def leaked(self) -> bool:
        """True when an inside run answered a closed fact exactly with zero tool calls."""
        return bool(self.leaks)

    @property
    def has_detector(self) -> bool:
        """True when every row records its tool-call count."""
        return not self.missing_tool_calls

    @property
    def has_clean_room(self) -> bool:
        """True when some closed fact was asked from the clean room at all."""
        return any(s.condition == "clean-room" and s.questions for s in self.summary)

    def sentence(self) -> str:
        """One line for reports."""
        parts = [f"{s.exact} of {s.questions} exact from {s.condition}" for s in self.summary]
        parts.append(f"{len(self.leaks)} exact closed answer(s) with zero tool calls")
        if self.missing_tool_calls:
            parts.append(f"{len(self.missing_tool_calls)} row(s) without tool_calls")
        if self.tool_calls_source == "transcript":
            parts.append(
                f"tool calls counted from transcripts ({len(self.transcript_problems)} problem(s))"
            )
        return "; ".join(parts)


def check_canary(
    results: Sequence[ResultRow],
    *,
    tool_calls_source: str = "results",
    transcript_problems: Sequence[str] = (),
) -> CanaryResult:
    """Classify every closed-fact row; rows of open facts only feed the tool-call check."""
    summary = []
    for condition in CONDITIONS:
        closed = [r for r in results if r.closed and r.condition == condition]
        calls = [r.tool_calls for r in closed]
        total = None if any(c is None for c in calls) else sum(c for c in calls if c is not None)
        summary.append(ConditionSummary(condition, len(closed), sum(map(is_exact, closed)), total))
    dead = tuple(r for r in results if r.closed and r.condition == "clean-room" and is_exact(r))
    leaks = tuple(
        r
        for r in results
        if r.closed and r.condition == "inside" and is_exact(r) and r.tool_calls == 0
    )
    missing = tuple(r for r in results if r.tool_calls is None)
    return CanaryResult(
        len(results),
        tuple(summary),
        dead,
        leaks,
        missing,
        tool_calls_source,
        tuple(transcript_problems),
    )
