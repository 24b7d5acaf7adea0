"""Canary and positive control: tell knowing from reading by the tool-call count.

Closed facts exist only inside the workspace. Asked from a clean room, they must score 0, or
the questions are guessable and the canary is dead. Asked from inside, an exact answer with
zero tool calls means the fact was already in the context. Without a recorded tool-call count
there is no detector at all, which is itself a finding.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from needlepoint.contamination.inputs import CONDITIONS, MAX_INPUT_BYTES, ResultRow
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import parse_json
from needlepoint.safeio import read_limited
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


# Tool calls counted from the transcripts agents already write, in place of a hand-made column.
#
# ``--transcripts [RUN_ID=]KIND:PATH`` names one agent's transcript; KIND is
#
# - ``claude-code``: a session file ``~/.claude/projects/<project>/<session>.jsonl`` or the project
#   folder. Its ``tool_use`` blocks sit in assistant lines, and one message id recurs across
#   several lines (and a resumed session repeats whole lines), so distinct ``tool_use.id`` values
#   are counted, never lines. Subagent transcripts are separate files (``<session>/subagents/
#   *.jsonl``, or ``agent-*.jsonl`` beside the sessions); their calls count for the turn whose
#   time span holds them. ``/clear`` ends a turn; the next question may be in a new file.
# - ``codex``: a ``rollout-*.jsonl`` file or a folder of them. ``function_call``,
#   ``custom_tool_call``, ``local_shell_call`` and ``web_search_call`` payloads are counted,
#   deduplicated by ``call_id``. The AGENTS.md text Codex injected is kept, to be hashed against
#   the frozen context manifest.
# - ``inspect``: an inspect_ai log; one sample is one turn and its ``ToolEvent`` ids its calls
#   (read by inspect's own reader, which the command line passes in).
#
# A turn starts at a user question and runs to the next question (or ``/clear``). Each results
# row is matched to the one turn whose question holds the row's ``question`` (or, without one, its
# ``question_id``), within the transcripts of its run (those named ``RUN_ID=``, else those named
# without a run). A transcript that cannot be read whole, or a row that matches no turn or
# several, is a problem: the row's count becomes unknown, which the canary reports as a finding.
# A transcript never passes by being unreadable.

KINDS = ("claude-code", "codex", "inspect")
MAX_FILES = 10_000  # transcript files read under one folder
_CODEX_CALLS = ("function_call", "custom_tool_call", "local_shell_call", "web_search_call")
_CLEAR = "<command-name>/clear</command-name>"
# Claude Code wraps slash commands and their output in these; they are not questions.
_COMMAND_TAGS = ("<command-name>", "<command-message>", "<local-command-stdout>")
# What Codex injects as user messages before the first question: not questions.
_CODEX_INJECTED = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")
_AGENTS = (
    re.compile(
        r"# AGENTS\.md instructions for [^\n]*\n\n<INSTRUCTIONS>\n(.*)\n</INSTRUCTIONS>", re.S
    ),
    re.compile(r"<user_instructions>\n*(.*?)\n*</user_instructions>", re.S),
)


@dataclass(frozen=True)
class Turn:
    """One question and what the agent did until the next: its distinct tool-call ids."""

    question: str
    start: float | None  # epoch seconds of the question
    tool_calls: frozenset[str]
    where: str  # file:line of the question


@dataclass(frozen=True)
class Transcript:
    """One ``--transcripts`` argument read: its turns, what could not be read, AGENTS.md texts."""

    kind: str
    path: str
    run_id: str | None
    turns: tuple[Turn, ...]
    problems: tuple[str, ...]
    agents_md: tuple[str, ...] = ()

    @classmethod
    def gathered(
        cls,
        kind: str,
        path: Path,
        run_id: str | None,
        turns: list[dict[str, Any]],
        problems: list[str],
        agents_md: Sequence[str] = (),
    ) -> Transcript:
        """A transcript from the turns (``_turn``) a reader gathered, frozen."""
        frozen = (Turn(t["question"], t["start"], frozenset(t["calls"]), t["where"]) for t in turns)
        return cls(kind, str(path), run_id, tuple(frozen), tuple(problems), tuple(agents_md))


def parse_spec(spec: str) -> tuple[str | None, str, str]:
    """``[RUN_ID=]KIND:PATH`` as (run id or None, kind, path); one line when malformed."""
    named = "=" in spec.split(":", 1)[0]
    run, _, rest = spec.partition("=") if named else ("", "", spec)
    kind, sep, path = rest.partition(":")
    if not sep or kind not in KINDS or not path or (named and not run):
        raise NeedlepointError(
            f"--transcripts {spec[:80]!r}: expected [RUN_ID=]KIND:PATH with KIND one of "
            f"{', '.join(KINDS)}"
        )
    return (run or None), kind, path


def _turn(question: str, line: dict[str, Any], where: str) -> dict[str, Any]:
    """A user question opening a turn: its text, its time, the tool calls it gathers, its line."""
    return {
        "question": question,
        "start": _time(line.get("timestamp")),
        "calls": set(),
        "where": where,
    }


def _time(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _lines(path: Path, problems: list[str]) -> list[tuple[int, dict[str, Any]]]:
    """A JSONL transcript's objects; the first line that is not one is a problem (unread)."""
    try:
        data = read_limited(path, MAX_INPUT_BYTES, follow=True, pipes=True)
        text = data.decode("utf-8")
    except FileNotFoundError:
        problems.append(f"{path}: file not found")
        return []
    except UnicodeDecodeError:
        problems.append(f"{path}: not UTF-8")
        return []
    except (OSError, NeedlepointError) as exc:
        problems.append(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})")
        return []
    out = []
    for n, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            # The project's one JSON reader: NaN, a repeated key or nesting past its bound is
            # a damaged line too, and damage fails closed (the rows it counted lose their count).
            value = parse_json(line, str(path), n)
        except NeedlepointError:
            problems.append(f"{path}:{n}: not a JSON object (a cut or damaged line)")
            return out
        if not isinstance(value, dict):
            problems.append(f"{path}:{n}: not a JSON object")
            return out
        out.append((n, value))
    return out


def _files(root: Path, pattern: str, problems: list[str]) -> list[Path]:
    if not root.exists():
        problems.append(f"{root}: not found")
        return []
    if root.is_file():
        return [root]
    found = sorted(p for p in root.rglob(pattern) if p.is_file())
    if len(found) > MAX_FILES:
        problems.append(f"{root}: more than {MAX_FILES} transcript files")
        return []
    if not found:
        problems.append(f"{root}: no {pattern} transcript in this folder")
    return found


# --- Claude Code ---------------------------------------------------------------------------------


def _text(content: Any) -> str | None:
    """A user message's question text, or None when it carries tool results only."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return None
        texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        joined = "\n".join(t for t in texts if isinstance(t, str))
        return joined or None
    return None


def _tool_ids(message: Any) -> list[str]:
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [
        str(b["id"])
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("id"), str)
    ]


def _claude_files(path: Path, problems: list[str]) -> tuple[list[Path], list[Path]]:
    files = _files(path, "*.jsonl", problems)
    main = [f for f in files if "subagents" not in f.parts and not f.name.startswith("agent-")]
    subs = [f for f in files if f not in main]
    if path.is_file():
        folder = path.with_suffix("") / "subagents"
        subs = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    return main, subs


def read_claude_code(path: Path, run_id: str | None) -> Transcript:
    """Turns of a Claude Code session (or project folder), subagents included."""
    problems: list[str] = []
    main, subs = _claude_files(path, problems)
    sessions = []
    for f in main:
        lines = _lines(f, problems)
        first = next((_time(v.get("timestamp")) for _, v in lines if v.get("timestamp")), None)
        sessions.append((first or 0.0, str(f), f, lines))
    turns: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    seen_questions: set[str] = set()
    for _, _, f, lines in sorted(sessions, key=lambda s: s[:2]):
        current = None  # a new file (after /clear, or another session) starts afresh
        for n, v in lines:
            if v.get("isSidechain") is True:
                continue
            message = v.get("message")
            if v.get("type") == "user" and isinstance(message, dict) and not v.get("isMeta"):
                text = _text(message.get("content"))
                if text is None:
                    continue
                if _CLEAR in text:
                    current = None
                    continue
                if any(tag in text for tag in _COMMAND_TAGS):
                    continue
                uuid = str(v.get("uuid", f"{f}:{n}"))
                if uuid in seen_questions:  # a repeated line of a resumed session
                    continue
                seen_questions.add(uuid)
                current = _turn(text, v, f"{f.name}:{n}")
                turns.append(current)
            elif v.get("type") == "assistant" and current is not None:
                current["calls"].update(_tool_ids(message))
    _attribute_subagents(subs, turns, problems)
    return Transcript.gathered("claude-code", path, run_id, turns, problems)


def _attribute_subagents(
    subs: Sequence[Path], turns: list[dict[str, Any]], problems: list[str]
) -> None:
    """Each subagent's tool calls count for the main turn whose span holds their time."""
    starts = [(t["start"], i) for i, t in enumerate(turns) if t["start"] is not None]
    for f in subs:
        for n, v in _lines(f, problems):
            ids = _tool_ids(v.get("message")) if v.get("type") == "assistant" else []
            if not ids:
                continue
            when = _time(v.get("timestamp"))
            owner = [i for start, i in starts if when is not None and start <= when]
            if not owner:
                problems.append(f"{f.name}:{n}: a subagent's tool call outside every turn")
                continue
            turns[owner[-1]]["calls"].update(ids)


# --- Codex ---------------------------------------------------------------------------------------


def _payload(v: dict[str, Any]) -> dict[str, Any] | None:
    if v.get("type") == "response_item" and isinstance(v.get("payload"), dict):
        return v["payload"]
    if v.get("type") in ("message", *_CODEX_CALLS):  # rollouts before the envelope
        return v
    return None


def read_codex(path: Path, run_id: str | None) -> Transcript:
    """Turns of Codex rollouts, and the AGENTS.md text they injected."""
    problems: list[str] = []
    turns: list[dict[str, Any]] = []
    agents: list[str] = []
    for f in _files(path, "rollout-*.jsonl", problems):
        current: dict[str, Any] | None = None
        for n, v in _lines(f, problems):
            p = _payload(v)
            if p is None:
                continue
            if p.get("type") == "message" and p.get("role") == "user":
                parts = p.get("content") if isinstance(p.get("content"), list) else []
                text = "\n".join(
                    str(c.get("text"))
                    for c in parts
                    if isinstance(c, dict) and isinstance(c.get("text"), str)
                )
                if text.lstrip().startswith(_CODEX_INJECTED):
                    agents += [m.group(1) for rx in _AGENTS for m in rx.finditer(text)]
                    continue
                current = _turn(text, v, f"{f.name}:{n}")
                turns.append(current)
            elif p.get("type") in _CODEX_CALLS and current is not None:
                key = p.get("call_id") or p.get("id") or f"{f.name}:{n}"
                current["calls"].add(str(key))
    return Transcript.gathered("codex", path, run_id, turns, problems, agents)


# --- reading and matching ------------------------------------------------------------------------

InspectReader = Callable[[Path], Iterable[tuple[str, frozenset[str], str]]]


def read_transcript(spec: str, inspect_reader: InspectReader | None = None) -> Transcript:
    """Read one ``--transcripts`` argument; what cannot be read is in ``problems``."""
    run_id, kind, raw = parse_spec(spec)
    path = Path(raw)
    if kind == "claude-code":
        return read_claude_code(path, run_id)
    if kind == "codex":
        return read_codex(path, run_id)
    if inspect_reader is None:
        raise NeedlepointError("--transcripts inspect: needs inspect_ai (the inspect extra)")
    try:
        turns = tuple(Turn(q, None, calls, where) for q, calls, where in inspect_reader(path))
    except NeedlepointError as exc:
        return Transcript("inspect", raw, run_id, (), (str(exc),))
    return Transcript("inspect", raw, run_id, turns, ())


def apply_transcripts(
    rows: Sequence[ResultRow], transcripts: Sequence[Transcript]
) -> tuple[tuple[ResultRow, ...], tuple[str, ...]]:
    """Rows with ``tool_calls`` counted from their run's transcripts, and every problem met."""
    problems = [p for t in transcripts for p in t.problems]
    out = []
    for row in rows:
        mine = [t for t in transcripts if t.run_id == row.run_id]
        mine = mine or [t for t in transcripts if t.run_id is None]
        if not mine:
            problems.append(f"{row.run_id}/{row.question_id}: no transcript names this run")
            out.append(replace(row, tool_calls=None))
            continue
        if any(t.problems for t in mine):
            out.append(replace(row, tool_calls=None))  # read in part only: never a clean count
            continue
        needle = row.question or row.question_id
        found = [turn for t in mine for turn in t.turns if needle in turn.question]
        if len(found) != 1:
            where = ", ".join(turn.where for turn in found[:3])
            problems.append(
                f"{row.run_id}/{row.question_id}: {len(found)} turns ask this question"
                + (f" ({where})" if where else "")
            )
            out.append(replace(row, tool_calls=None))
            continue
        out.append(replace(row, tool_calls=len(found[0].tool_calls)))
    return tuple(out), tuple(problems)


def agents_md_problems(
    transcripts: Sequence[Transcript], frozen: Sequence[tuple[str, str]]
) -> tuple[str, ...]:
    """Codex's injected AGENTS.md text hashed against the frozen context's AGENTS.md files
    (``frozen``: (path, sha256) pairs of the manifest)."""
    hashes = {sha for path, sha in frozen if os.path.basename(path) == "AGENTS.md"}
    out = []
    for t in transcripts:
        for text in t.agents_md:
            mine = {hashlib.sha256(v.encode("utf-8")).hexdigest() for v in (text, text + "\n")}
            if not hashes:
                out.append(f"{t.path}: Codex injected AGENTS.md text; the frozen context has none")
            elif not mine & hashes:
                digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
                out.append(
                    f"{t.path}: the AGENTS.md text Codex injected (sha256 {digest[:12]}) is not "
                    "the frozen context's AGENTS.md"
                )
    return tuple(out)
