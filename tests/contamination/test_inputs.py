"""Input formats: every bad file gives one error naming file, line and field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.contamination import discards, reference, result, results, runs, write_csv

from needlepoint.contamination.inputs import (
    iso_from_ns,
    parse_instant,
    read_discards,
    read_reference,
    read_results,
    read_runs,
)
from needlepoint.errors import NeedlepointError

REF_HEADER = ("format", "id", "question", "answer")
REF = "contamination-reference/1"


def error(fn, path: Path) -> str:
    with pytest.raises(NeedlepointError) as exc:
        fn(path)
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_reference_reads_pairs_with_their_lines(tmp_path: Path) -> None:
    pairs = read_reference(reference(tmp_path / "r.csv", {"R1": "975", "R2": "OM-3642"}))
    assert [(p.id, p.answer, p.line) for p in pairs] == [("R1", "975", 2), ("R2", "OM-3642", 3)]


def test_reference_accepts_bom_quoted_fields_and_extra_columns(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_bytes(
        b"\xef\xbb\xbfformat,id,question,answer,note\n"
        + f'{REF},R1,"Where, exactly?","Lower Vetluga yard",x\n'.encode()
    )
    (pair,) = read_reference(path)
    assert (pair.question, pair.answer) == ("Where, exactly?", "Lower Vetluga yard")


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([("contamination-reference/2", "R1", "q", "a")], r"r\.csv:2: field format: .* not one"),
        ([(REF, "R1", "q", "")], r"r\.csv:2: field answer: must not be empty"),
        ([(REF, "R1", "q", " 975")], r"r\.csv:2: field answer: leading or trailing"),
        ([(REF, "", "q", "a")], r"r\.csv:2: field id: must not be empty"),
        ([(REF, "R1", "", "a")], r"r\.csv:2: field question: must not be empty"),
        ([(REF, "R1", "q", "a"), (REF, "R1", "q", "b")], r"r\.csv:3: field id: 'R1' already"),
        ([(REF, "R1", "q")], r"r\.csv:2: expected 4 fields, found 3"),
        ([], r"r\.csv:2: no reference pairs"),
    ],
)
def test_reference_row_errors(tmp_path: Path, rows, expected: str) -> None:
    assert re.search(
        expected, error(read_reference, write_csv(tmp_path / "r.csv", REF_HEADER, rows))
    )


def test_reference_blank_lines_are_skipped_and_lines_still_counted(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text(f"format,id,question,answer\n\n{REF},R1,q,a\n\n{REF},R2,q,\n")
    assert re.search(r"r\.csv:5: field answer: must not be empty", error(read_reference, path))


def test_reference_answer_spanning_lines_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text(f'format,id,question,answer\n{REF},R1,q,"97\n5"\n')
    assert re.search(r"r\.csv:2: field answer: spans lines", error(read_reference, path))


def test_header_and_file_level_errors(tmp_path: Path) -> None:
    assert error(read_reference, tmp_path / "missing.csv").endswith("missing.csv: file not found")
    assert "is a directory" in error(read_reference, tmp_path)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert re.search(r"empty\.csv:1: empty file", error(read_reference, empty))
    short = write_csv(tmp_path / "short.csv", ("id", "question", "answer"), [("R1", "q", "a")])
    assert re.search(r"short\.csv:1: header lacks column\(s\) format", error(read_reference, short))
    quoted = tmp_path / "quoted.csv"
    quoted.write_text(f'format,id,question,answer\n{REF},R1,q,"a"b\n')
    assert re.search(r"quoted\.csv:2: malformed CSV", error(read_reference, quoted))


def test_wrong_encoding_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin.csv"
    path.write_bytes(
        f"format,id,question,answer\n{REF},R1,q,a\n{REF},R2,q,".encode() + b"caf\xe9\n"
    )
    message = error(read_reference, path)
    assert re.search(r"latin\.csv:3: not UTF-8 \(invalid continuation byte at byte \d+\)", message)


def test_discards_need_a_written_reason(tmp_path: Path) -> None:
    ok = read_discards(
        discards(tmp_path / "d.csv", [("R8", "notes/a.md", 3, "a year, not the fact")])
    )
    assert [(d.reference_id, d.file, d.line, d.reason) for d in ok] == [
        ("R8", "notes/a.md", 3, "a year, not the fact")
    ]
    for reason in ("", "   "):
        path = discards(tmp_path / "d.csv", [("R8", "notes/a.md", 3, reason)])
        assert re.search(
            r"d\.csv:2: field reason: a discard needs a written reason",
            error(read_discards, path),
        )


@pytest.mark.parametrize("line", ["0", "-1", "3.0", "x", "٣"])
def test_discard_line_must_be_a_line_number(tmp_path: Path, line: str) -> None:
    path = write_csv(
        tmp_path / "d.csv",
        ("format", "reference_id", "file", "line", "reason"),
        [("contamination-discards/1", "R8", "a.md", line, "chance")],
    )
    assert re.search(r"d\.csv:2: field line: expected a line number", error(read_discards, path))


def test_runs_group_values_and_sort_by_start(tmp_path: Path) -> None:
    path = runs(
        tmp_path / "runs.csv",
        [
            ("r2", "b", "2025-03-14T14:10:00+03:00", "x"),
            ("r1", "b", "2025-03-14T11:15:00Z", "13/20"),
            ("r1", "b", "2025-03-14T11:15:00Z", "SR-7720"),
            ("r1", "b", "2025-03-14T11:15:00Z", ""),
        ],
    )
    r2_3h_earlier, r1 = read_runs(path)
    assert (r2_3h_earlier.run_id, r1.run_id) == ("r2", "r1")  # 14:10+03:00 is 11:10Z
    assert r1.values == ("13/20", "SR-7720")
    assert r1.started_ns == parse_instant("2025-03-14T11:15:00Z")


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([("r1", "b", "2025-03-14T11:15:00", "x")], r":2: field started_at: .*UTC offset"),
        ([("r1", "b", "yesterday", "x")], r":2: field started_at: not an ISO 8601"),
        ([("r1", "b", "2025-03-14T11:15:00Z", "x"), ("r1", "c", "2025-03-14T11:15:00Z", "y")],
         r":3: field battery: differs from line 2"),
        ([("r1", "b", "2025-03-14T11:15:00Z", "x"), ("r1", "b", "2025-03-14T11:16:00Z", "y")],
         r":3: field started_at: differs from line 2"),
        ([("", "b", "2025-03-14T11:15:00Z", "x")], r":2: field run_id: must not be empty"),
    ],
)  # fmt: skip
def test_runs_errors(tmp_path: Path, rows, expected: str) -> None:
    assert re.search(expected, error(read_runs, runs(tmp_path / "runs.csv", rows)))


def test_results_keep_missing_tool_calls_as_none(tmp_path: Path) -> None:
    path = results(
        tmp_path / "r.jsonl",
        [
            result(),
            result(question_id="q2", tool_calls=None),
            result(question_id="q3", tool_calls=...),
        ],
    )
    assert [r.tool_calls for r in read_results(path)] == [1, None, None]


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (result(tool_calls="3"), r":1: field tool_calls: expected an integer, found a string"),
        (result(tool_calls=-1), r":1: field tool_calls: -1 is below the minimum 0"),
        (result(tool_calls=True), r":1: field tool_calls: expected an integer, found a boolean"),
        (result(tool_calls=1.0), r":1: field tool_calls: expected an integer, found a number"),
        (result(closed="yes"), r":1: field closed: expected true or false"),
        (result(condition="outside"), r":1: field condition: 'outside' is not one of 'clean-room'"),
        (result(format="contamination-results/0"), r":1: field format: .* is not one of"),
        (result(format=...), r":1: field format: missing"),
        (result(answer=975), r":1: field answer: expected a string, found a number"),
        (result(expected=""), r":1: field expected: must not be empty"),
        (result(run_id=...), r":1: field run_id: missing"),
    ],
)
def test_results_errors(tmp_path: Path, row, expected: str) -> None:
    assert re.search(expected, error(read_results, results(tmp_path / "r.jsonl", [row])))


def test_results_file_level_errors(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"format": "contamination-results/1"\n')
    assert re.search(r"r\.jsonl:1: broken JSON", error(read_results, path))
    path.write_text("[1, 2]\n")
    not_an_object = r"r\.jsonl:1: field document: expected an object, found a list"
    assert re.search(not_an_object, error(read_results, path))
    path.write_bytes(b'{"a": "\xff"}\n')
    assert re.search(r"r\.jsonl:1: not UTF-8", error(read_results, path))
    results(path, [result(), result()])
    assert re.search(r"r\.jsonl:2: field question_id: repeats line 1", error(read_results, path))
    path.write_text("")
    assert re.search(r"r\.jsonl:1: no result rows", error(read_results, path))


def test_iso_round_trip_keeps_nanoseconds() -> None:
    assert iso_from_ns(parse_instant("2025-03-14T12:08:00Z")) == "2025-03-14T12:08:00Z"
    assert iso_from_ns(parse_instant("2025-03-14T12:08:00+01:00")) == "2025-03-14T11:08:00Z"
    assert iso_from_ns(1_741_954_080_000_000_001) == "2025-03-14T12:08:00.000000001Z"


def test_results_jsonl_accepts_a_leading_bom(tmp_path: Path) -> None:
    path = results(tmp_path / "r.jsonl", [result(), result(question_id="q2")])
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert [r.line for r in read_results(path)] == [1, 2]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"format": NaN}', r"r\.jsonl:1: not JSON"),
        ("[" * 5000 + "]" * 5000, r"r\.jsonl:1: JSON nested"),
        ('\n{"a": 1}', r"r\.jsonl:1: empty line"),
    ],
)
def test_results_jsonl_hostile_lines_are_one_line(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(text, encoding="utf-8")
    assert re.search(expected, error(read_results, path))
