"""Tool calls counted from real-shaped Claude Code and Codex transcripts (support.transcripts):
distinct ids, never lines; subagents counted; /clear splits; AGENTS.md hashed against the frozen
context; an unreadable transcript is a finding, never a pass."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support import transcripts as tx
from support.fuzz import SMALL, run_cli

from needlepoint.contamination.canary import (
    apply_transcripts,
    parse_spec,
    read_transcript,
)
from needlepoint.contamination.fixture import build_synthetic_workspace
from needlepoint.contamination.inputs import read_results
from needlepoint.design.prepared import load_prepared, prepare
from needlepoint.errors import NeedlepointError


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, object]:
    """The contamination fixture with an AGENTS.md in its workspace, frozen, and transcripts."""
    f = build_synthetic_workspace(tmp_path / "c")
    agents = f.workspace / "AGENTS.md"
    agents.write_text(tx.AGENTS_MD, encoding="utf-8")
    os.utime(agents, ns=(1741600000 * 10**9, 1741600000 * 10**9))
    context = tmp_path / "context.json"
    code, _, err = run_cli(
        [
            *["contamination", "manifest", "--root", str(f.workspace), "--out", str(context)],
            *["--include", "CLAUDE.md", "--include", "AGENTS.md", "--include", "memory/**"],
            *["--include", "notes/**"],
        ]
    )
    assert code == 0, err
    results = tx.results(tmp_path / "results.jsonl")
    specs = tx.transcripts(tmp_path / "t")
    return {"f": f, "context": context, "results": results, "specs": specs, "root": tmp_path}


def test_distinct_calls_subagents_and_clear(inputs: dict) -> None:
    rows = read_results(inputs["results"])
    assert all(r.tool_calls is None for r in rows)  # no hand-made column at all
    read = [read_transcript(s) for s in inputs["specs"]]
    assert [t.problems for t in read] == [(), (), ()]
    counted, problems = apply_transcripts(rows, read)
    assert problems == ()
    assert {(r.run_id, r.question_id): r.tool_calls for r in counted} == tx.EXPECTED_CALLS
    inside = read[1]
    # /clear ended the first file's last turn; C3 was asked in the second file.
    assert [t.where.split(":")[0] for t in inside.turns] == [
        "in-session-a.jsonl",
        "in-session-a.jsonl",
        "in-session-b.jsonl",
    ]
    lines = (inputs["root"] / "t/claude/inside/in-session-a.jsonl").read_text().splitlines()
    uses = sum('"tool_use"' in line for line in lines)
    assert uses == 3  # a line counter would say 3 for C2, the distinct ids say 2


def test_the_canary_finds_the_planted_leak_from_transcripts(inputs: dict) -> None:
    argv = ["contamination", "canary", "--results", str(inputs["results"])]
    code, out, _ = run_cli(argv)
    assert code == 1 and "6 row(s) without tool_calls" in out  # no detector without them
    code, out, err = run_cli(argv + [f"--transcripts={s}" for s in inputs["specs"]])
    assert code == 1, err
    assert "leak: " in out and "in-1/C1-distance" in out
    assert "without tool_calls" not in out and "in-2/C1" not in out.split("leak")[1]
    assert "tool calls counted from transcripts (0 problem(s))" in out


def test_report_gate_with_transcripts_and_agents_md(inputs: dict) -> None:
    f, out = inputs["f"], inputs["root"] / "report"
    argv = [
        *["contamination", "report", "--reference", str(f.reference), "--runs", str(f.runs)],
        *["--results", str(inputs["results"]), "--context", str(inputs["context"])],
        *["--discard", str(f.discards), "--out", str(out)],
        *[f"--transcripts={s}" for s in inputs["specs"]],
    ]
    code, _, err = run_cli(argv)
    assert code == 1, err
    report = json.loads((out / "contamination.json").read_text(encoding="utf-8"))
    kinds = [(x["check"], x["kind"]) for x in report["gate"]["findings"]]
    assert ("canary", "leak") in kinds
    assert ("canary", "no-tool-calls") not in kinds and ("canary", "transcript") not in kinds
    assert any("tool_calls_source: transcript" in n for n in report["gate"]["notices"])

    # The rollout saw another AGENTS.md than the frozen one: a finding.
    tx.codex_inside(inputs["root"] / "t" / "codex", "# Agent instructions\n\nBe brief.\n")
    code, _, err = run_cli(argv)
    report = json.loads((out / "contamination.json").read_text(encoding="utf-8"))
    drift = [x["message"] for x in report["gate"]["findings"] if x["kind"] == "transcript"]
    assert code == 1 and len(drift) == 1 and "not the frozen context's AGENTS.md" in drift[0]


@pytest.mark.parametrize("damage", ["cut", "not-utf8", "missing", "nan", "repeated-key", "deep"])
def test_an_unreadable_transcript_is_a_finding_not_a_pass(inputs: dict, damage: str) -> None:
    path = inputs["root"] / "t/claude/inside/in-session-a.jsonl"
    data = path.read_bytes()
    if damage == "cut":
        path.write_bytes(data[: len(data) // 2] + b"\n" + data[len(data) // 2 :][:10])
    elif damage == "not-utf8":
        path.write_bytes(data + b"\xff\xfe\n")
    elif damage in ("nan", "repeated-key", "deep"):  # not JSON, or past the reader's bounds
        line = {"nan": b'{"type": NaN}', "repeated-key": b'{"type": "a", "type": "b"}'}
        path.write_bytes(
            line.get(damage, b'{"x": ' + b"[" * 300 + b"]" * 300 + b"}") + b"\n" + data
        )
    else:
        path.unlink()
        (path.parent / "in-session-b.jsonl").unlink()
        for sub in (path.parent / "in-session-b" / "subagents").iterdir():
            sub.unlink()
    argv = ["contamination", "canary", "--results", str(inputs["results"])]
    code, out, _ = run_cli(argv + [f"--transcripts={s}" for s in inputs["specs"]])
    assert code == 1 and "transcript: " in out
    # The leak's row lost its count: it is no longer a pass, it is "no detector".
    assert "without tool_calls" in out


def test_a_question_asked_twice_is_ambiguous(inputs: dict) -> None:
    specs = [s.split("=", 1)[1] for s in inputs["specs"]][:2]  # no run ids: both apply to all
    rows = read_results(inputs["results"])
    counted, problems = apply_transcripts(rows, [read_transcript(s) for s in specs])
    assert any("2 turns ask this question" in p for p in problems)
    assert all(r.tool_calls is None for r in counted if r.question_id == "C1-distance")


@pytest.mark.parametrize("spec", ["claude:x", "codex", "=codex:x", "codex:", "in-1=vim:x"])
def test_a_malformed_spec_is_one_line(spec: str) -> None:
    with pytest.raises(NeedlepointError, match="expected \\[RUN_ID=\\]KIND:PATH"):
        parse_spec(spec)


def test_spec_forms() -> None:
    assert parse_spec("codex:/a/b") == (None, "codex", "/a/b")
    assert parse_spec("in-1=claude-code:C:/x=y") == ("in-1", "claude-code", "C:/x=y")


def test_an_inspect_log_counts_tool_events_per_sample(tmp_path: Path) -> None:
    """A real inspect log (tests/data/inspect): its samples called no tool, so an exact
    closed answer there is a leak; a question no sample asks is a problem."""
    log = Path(__file__).resolve().parents[1] / "data" / "inspect" / "small-design.eval"
    (tmp_path / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    p = load_prepared(prepare(tmp_path / "p", tmp_path / "small.json"))
    asked = json.loads(p.bodies[1])["messages"][-1]["content"]  # one sample's whole question
    rows = [
        {"format": "contamination-results/1", "run_id": "insp", "condition": "inside",
         "question_id": "Q1", "question": asked, "closed": True,
         "expected": "ZG-4613", "answer": "ZG-4613"},
        {"format": "contamination-results/1", "run_id": "insp", "condition": "inside",
         "question_id": "Q3", "question": "黄沙东港配套项目的交接编码是什么", "closed": True,
         "expected": "ZG-4613", "answer": "ZG-4613"},
        {"format": "contamination-results/1", "run_id": "insp", "condition": "inside",
         "question_id": "Q2", "question": "not asked anywhere", "closed": True,
         "expected": "X", "answer": "Y"},
    ]  # fmt: skip
    results = tmp_path / "r.jsonl"
    results.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    argv = ["contamination", "canary", "--results", str(results), f"--transcripts=inspect:{log}"]
    code, out, err = run_cli(argv)
    assert code == 1, err
    assert "insp/Q2: 0 turns ask this question" in out, out
    assert "insp/Q3: 8 turns ask this question" in out, out  # ambiguous: no count, no pass
    assert "leak: " in out and "insp/Q1" in out.split("leak: ")[1]  # no ToolEvent: 0 calls
