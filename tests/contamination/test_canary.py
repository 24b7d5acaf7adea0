"""Canary and positive control: dead canary, zero-tool-call leaks, and the missing detector."""

from __future__ import annotations

from pathlib import Path

from support.contamination import result, results

from needlepoint.contamination.canary import check_canary
from needlepoint.contamination.inputs import read_results


def canary(tmp_path: Path, rows: list[dict]):
    return check_canary(read_results(results(tmp_path / "r.jsonl", rows)))


def test_clean_room_scoring_zero_and_tool_use_inside_is_clean(tmp_path: Path) -> None:
    c = canary(
        tmp_path,
        [
            result(run_id="cr", condition="clean-room", answer="UNKNOWN", tool_calls=0),
            result(run_id="cr", condition="clean-room", question_id="q2", answer=None),
            result(run_id="in", tool_calls=3),
        ],
    )
    assert not c.dead_canary and not c.leaked and c.has_detector and c.has_clean_room
    assert [(s.condition, s.questions, s.exact, s.tool_calls) for s in c.summary] == [
        ("clean-room", 2, 0, 1),
        ("inside", 1, 1, 3),
    ]


def test_clean_room_exact_answer_is_a_dead_canary(tmp_path: Path) -> None:
    c = canary(tmp_path, [result(run_id="cr", condition="clean-room", tool_calls=0)])
    assert [r.run_id for r in c.dead_canary] == ["cr"]


def test_exact_closed_answer_with_zero_tool_calls_is_a_leak(tmp_path: Path) -> None:
    c = canary(
        tmp_path,
        [
            result(question_id="q1", tool_calls=0),
            result(question_id="q2", tool_calls=0, answer=" 975\n"),  # Java trim removes these
            result(question_id="q3", tool_calls=0, answer="975 km"),  # not exact
            result(question_id="q4", tool_calls=0, closed=False),  # open fact: may be known
            result(question_id="q5", tool_calls=0, answer="\u00a0975"),  # NBSP is not trimmed
        ],
    )
    assert [r.question_id for r in c.leaks] == ["q1", "q2"]
    assert c.leaked and not c.dead_canary


def test_missing_tool_calls_means_no_detector(tmp_path: Path) -> None:
    c = canary(tmp_path, [result(tool_calls=...), result(question_id="q2", tool_calls=None)])
    assert not c.has_detector
    assert [r.line for r in c.missing_tool_calls] == [1, 2]
    assert c.summary[1].tool_calls is None
    assert not c.leaked  # without the count the leak cannot even be seen


def test_no_clean_room_rows_is_noted(tmp_path: Path) -> None:
    c = canary(tmp_path, [result()])
    assert not c.has_clean_room
