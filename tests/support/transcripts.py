"""Realistic synthetic agent transcripts for the canary: Claude Code and Codex, with a planted leak.

Three runs ask closed facts of the contamination fixture (support.contamination's workspace):

- ``cr-1``, the clean room, in Claude Code: two questions, answered wrongly, with tool calls.
- ``in-1``, inside, in Claude Code (the leak is planted here):
  - C1 is answered exactly with **zero** tool calls: the fact sat in the automatic context;
  - C2 uses two tools; one assistant message (``msg_C2``) is split over several lines, and a
    resumed session repeated one line whole, so counting lines would say 4;
  - ``/clear`` ends the first session file; C3 is asked in a second file, and answered after
    one ``Task`` call whose subagent (``<session>/subagents/agent-*.jsonl``) used two tools: 3.
- ``in-2``, inside, in Codex: C1 after a ``function_call`` and a ``local_shell_call`` (the same
  call journalled twice); Codex injected the workspace's AGENTS.md before the first question.

``results.jsonl`` has no ``tool_calls`` at all: the transcripts are the only detector.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

WORKSPACE = "/home/agent/workspace"
AGENTS_MD = "# Agent instructions\n\nAnswer with the value only, or UNKNOWN.\n"
QUESTIONS = {
    "C1-distance": "How far is Ostrovets from Belozersk by rail, in km?",
    "C2-binder-pages": "How many pages does the methods binder have?",
    "C3-runner-cores": "How many cores does the build runner have?",
}
# run, condition, question id, expected, answer
RESULTS = (
    ("cr-1", "clean-room", "C1-distance", "975", "UNKNOWN"),
    ("cr-1", "clean-room", "C2-binder-pages", "412", "380"),
    ("in-1", "inside", "C1-distance", "975", "975"),
    ("in-1", "inside", "C2-binder-pages", "412", " 412\n"),
    ("in-1", "inside", "C3-runner-cores", "48", "48"),
    ("in-2", "inside", "C1-distance", "975", "975"),
)
# What the transcripts must give, row by row (C1 of in-1 is the planted leak).
EXPECTED_CALLS = {
    ("cr-1", "C1-distance"): 1,
    ("cr-1", "C2-binder-pages"): 1,
    ("in-1", "C1-distance"): 0,
    ("in-1", "C2-binder-pages"): 2,
    ("in-1", "C3-runner-cores"): 3,
    ("in-2", "C1-distance"): 2,
}


def _jsonl(path: Path, lines: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(v, ensure_ascii=False) + "\n" for v in lines), "utf-8")


class _Claude:
    """Lines of one Claude Code session, with the envelope every line carries."""

    def __init__(self, session: str, minute: int) -> None:
        self.session, self.minute, self.n, self.lines = session, minute, 0, []

    def _base(self, kind: str, sidechain: bool = False) -> dict[str, Any]:
        self.n += 1
        return {
            "parentUuid": f"{self.session}-{self.n - 1}" if self.n > 1 else None,
            "isSidechain": sidechain,
            "userType": "external",
            "cwd": "/home/agent/workspace",
            "sessionId": self.session,
            "version": "2.0.14",
            "gitBranch": "main",
            "type": kind,
            "uuid": f"{self.session}-{self.n}",
            "timestamp": f"2025-03-14T10:{self.minute:02d}:{self.n:02d}.000Z",
        }

    def user(self, content: Any, **extra: Any) -> dict[str, Any]:
        line = self._base("user") | {"message": {"role": "user", "content": content}} | extra
        self.lines.append(line)
        return line

    def assistant(self, msg_id: str, block: dict[str, Any], sidechain: bool = False) -> None:
        line = self._base("assistant", sidechain)
        line["message"] = {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [block],
            "stop_reason": None,
            "usage": {"input_tokens": 12, "output_tokens": 3},
        }
        line["requestId"] = f"req_{msg_id}"
        self.lines.append(line)

    def tool(self, msg_id: str, tool_id: str, name: str = "Read") -> None:
        self.assistant(msg_id, {"type": "tool_use", "id": tool_id, "name": name, "input": {}})
        self.user([{"type": "tool_result", "tool_use_id": tool_id, "content": "..."}])

    def text(self, msg_id: str, text: str) -> None:
        self.assistant(msg_id, {"type": "text", "text": text})


def claude_clean_room(folder: Path) -> Path:
    s = _Claude("cr-session", 5)
    s.user(QUESTIONS["C1-distance"])
    s.tool("msg_cr1", "toolu_cr_1", "WebSearch")
    s.text("msg_cr1b", "UNKNOWN")
    s.user(QUESTIONS["C2-binder-pages"])
    s.tool("msg_cr2", "toolu_cr_2", "WebSearch")
    s.text("msg_cr2b", "380")
    path = folder / "cr-session.jsonl"
    _jsonl(path, s.lines)
    return path


def claude_inside(folder: Path) -> Path:
    """The inside run's project folder: two session files (split by /clear) and a subagent."""
    first = _Claude("in-session-a", 20)
    first.lines.append({"type": "summary", "summary": "Canary questions", "leafUuid": "x"})
    first.user("<command-name>/model</command-name>\n<command-message>model</command-message>")
    first.user(QUESTIONS["C1-distance"])
    first.text("msg_C1", "975")  # the leak: no tool at all
    first.user(QUESTIONS["C2-binder-pages"])
    first.text("msg_C2", "Let me look that up.")
    first.tool("msg_C2", "toolu_C2_read")  # the same message id on several lines
    first.lines.append(dict(first.lines[-2]))  # a resumed session repeats a line whole
    first.tool("msg_C2", "toolu_C2_grep", "Grep")
    first.text("msg_C2b", "412")
    first.user("<command-name>/clear</command-name>\n<command-message>clear</command-message>")
    _jsonl(folder / "in-session-a.jsonl", first.lines)

    second = _Claude("in-session-b", 40)
    second.user([{"type": "text", "text": QUESTIONS["C3-runner-cores"]}])
    second.tool("msg_C3", "toolu_C3_task", "Task")
    second.text("msg_C3b", "48")
    _jsonl(folder / "in-session-b.jsonl", second.lines)

    agent = _Claude("in-session-b", 40)
    agent.n = 1  # the subagent works between the Task call and the answer
    agent.user("Find the number of build runner cores in notes/.", isSidechain=True)
    agent.assistant("msg_sub1", {"type": "tool_use", "id": "toolu_sub_1", "name": "Glob"}, True)
    agent.assistant("msg_sub2", {"type": "tool_use", "id": "toolu_sub_2", "name": "Read"}, True)
    agent.assistant("msg_sub2", {"type": "tool_use", "id": "toolu_sub_2", "name": "Read"}, True)
    _jsonl(folder / "in-session-b" / "subagents" / "agent-a1b2c3.jsonl", agent.lines)
    return folder


def codex_inside(folder: Path, agents_md: str = AGENTS_MD) -> Path:
    def item(minute: int, payload: dict[str, Any]) -> dict[str, Any]:
        stamp = f"2025-03-14T11:{minute:02d}:00.000Z"
        return {"timestamp": stamp, "type": "response_item", "payload": payload}

    def user(text: str) -> dict[str, Any]:
        return {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        }

    injected = (
        "# AGENTS.md instructions for /home/agent/workspace\n\n<INSTRUCTIONS>\n"
        + agents_md.rstrip("\n")
        + "\n</INSTRUCTIONS>"
    )
    shell = {"type": "local_shell_call", "call_id": "call_sh", "status": "completed"}
    lines = [
        {
            "timestamp": "2025-03-14T11:00:00.000Z",
            "type": "session_meta",
            "payload": {"id": "0199-rollout", "cwd": WORKSPACE, "cli_version": "0.46.0"},
        },
        item(1, user(injected)),
        item(1, user(f"<environment_context>\n  <cwd>{WORKSPACE}</cwd>\n</environment_context>")),
        {"timestamp": "2025-03-14T11:02:00.000Z", "type": "event_msg",
         "payload": {"type": "user_message", "message": QUESTIONS["C1-distance"]}},
        item(2, user(QUESTIONS["C1-distance"])),
        item(3, {"type": "function_call", "name": "shell", "arguments": "{}",
                 "call_id": "call_fn"}),
        item(3, {"type": "function_call_output", "call_id": "call_fn", "output": "..."}),
        item(4, shell | {"action": {"type": "exec", "command": ["rg", "Belozersk"]}}),
        item(4, shell | {"action": {"type": "exec", "command": ["rg", "Belozersk"]}}),
        item(5, {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "975"}]}),
    ]  # fmt: skip
    path = folder / "sessions" / "2025" / "03" / "14" / "rollout-2025-03-14T11-00-00-0199.jsonl"
    _jsonl(path, lines)
    return folder / "sessions"


def results(path: Path) -> Path:
    rows = [
        {"format": "contamination-results/1", "run_id": run, "condition": cond,
         "question_id": q, "question": QUESTIONS[q], "closed": True, "expected": exp,
         "answer": ans}
        for run, cond, q, exp, ans in RESULTS
    ]  # fmt: skip
    _jsonl(path, rows)
    return path


def transcripts(root: Path) -> list[str]:
    """Write all three runs' transcripts under ``root``; the --transcripts arguments."""
    cr = claude_clean_room(root / "claude" / "clean-room")
    inside = claude_inside(root / "claude" / "inside")
    codex = codex_inside(root / "codex")
    return [f"cr-1=claude-code:{cr}", f"in-1=claude-code:{inside}", f"in-2=codex:{codex}"]
