"""Diagnostics and the run's context: each table's rule, and each source at its fallback.

Near names before the target are checked against the frozen request text itself; prompt sizes
come from token_counts.json only when it belongs to these materials, then from the endpoint's
usage, then from characters; the endpoint is named by its host alone.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.mutations import rechain
from support.results import make_input, make_prepared, make_rows

from needlepoint.analysis.context import (
    CHARACTERS,
    TOKENIZER,
    USAGE,
    length_sizes,
    run_context,
    sessions_by_seq,
)
from needlepoint.analysis.diagnostics import (
    NO_CODE,
    accuracy_rows,
    diagnostics,
    preceding_near_names,
    preceding_rows,
    wrong_kind_rows,
)
from needlepoint.design.prepared import Prepared, load_prepared

EVIDENCE = Path(__file__).resolve().parents[2] / "evidence" / "20261201-local-compare"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    return make_prepared(tmp_path_factory)


def _user_text(body: bytes) -> str:
    data = json.loads(body)
    return data["prompt"] if "prompt" in data else data["messages"][1]["content"]


def test_near_names_before_the_target_match_the_frozen_requests(prepared: Prepared) -> None:
    for p in prepared.plan:
        key = prepared.answer_key[p.seq]
        if p.similarity != "high" or p.condition == "A":
            continue
        text = _user_text(prepared.bodies[p.seq])
        records = text.split("\n")
        target = next(i for i, r in enumerate(records) if key["target_code"] in r)
        near = [i for i, r in enumerate(records) if any(n in r for n in key["near_names"])]
        assert len(near) == 6
        assert preceding_near_names(p.condition, p.length) == sum(i < target for i in near), p


@pytest.mark.parametrize(("length", "middle"), [(12, 3), (13, 3), (60, 3), (240, 3), (23, 3)])
def test_the_middle_has_half_the_slots_before_it(length: int, middle: int) -> None:
    assert preceding_near_names("M", length) == middle
    assert (preceding_near_names("B", length), preceding_near_names("E", length)) == (0, 6)


def test_accuracy_by_block_position_half_and_session(prepared: Prepared) -> None:
    first = {p.seq for p in prepared.plan if p.seq % 4 == 1}  # the first response of each block
    inp = make_input(prepared, lambda p: "error:bad_format" if p.seq in first else "correct")
    sessions = {p.seq: 1 if p.seq <= 40 else 2 for p in prepared.plan}
    rows = {(r.group, r.level): r for r in accuracy_rows(inp.outcomes, sessions)}
    assert rows[("position in block", "1")].correct == 0
    assert rows[("position in block", "2")].accuracy == 1.0
    assert [k for k in rows if k[0] == "position in block"] == [
        ("position in block", str(k)) for k in range(1, 5)
    ]
    # B, M and E only: 96 answer-present responses, 48 in each half of the 128 seqs.
    assert rows[("execution half", "first")].valid == 48
    assert rows[("execution half", "second")].valid == 48
    s1 = sum(1 for p in prepared.plan if p.seq <= 40 and p.condition != "A")
    assert rows[("session", "1")].valid == s1 and rows[("session", "2")].valid == 96 - s1
    none = diagnostics(inp.outcomes, None)
    assert not any(r.group == "session" for r in none.accuracy)
    assert none.notes == ("no sessions: a results table records none (analyse the run folder)",)


def test_wrong_answers_by_the_kind_of_near_name_they_give(prepared: Prepared) -> None:
    def spec(p) -> str:
        if p.condition == "M" and p.case == "S1":
            return "error:near_distractor_code"  # the code at slot 0
        if p.condition == "E" and p.case == "S2":
            return "error:bad_format"
        return "correct"

    inp = make_input(prepared, spec)
    rows = wrong_kind_rows(inp.outcomes)
    slot0 = {
        p.similarity: prepared.answer_key[p.seq]["near_kinds"][0]
        for p in prepared.plan
        if (p.case, p.condition) == ("S1", "M")
    }
    assert slot0["low"] == "unrelated"
    got = {(r.similarity, r.kind): (r.count, r.share) for r in rows}
    assert got[("low", "unrelated")] == (2, 0.5)
    assert got[("high", slot0["high"])] == (2, 0.5)
    assert got[("low", NO_CODE)] == (2, 0.5)
    high = {r.condition: r for r in preceding_rows(inp.outcomes) if r.length == 60}
    assert (high["M"].preceding, high["M"].wrong, high["M"].near) == (3, 1, 1)
    assert (high["E"].preceding, high["E"].wrong, high["E"].near) == (6, 1, 0)
    assert (high["B"].preceding, high["B"].valid) == (0, 8)


def test_the_gemma_run_context_comes_from_its_journal_and_tokenizer() -> None:
    run = EVIDENCE / "runs" / "gemma3"
    from needlepoint.analysis.inputs import from_run

    inp = from_run(run)
    assert inp.context is not None and inp.sessions is not None
    c = inp.context
    assert (c.endpoint_host, c.first_date, c.last_date, c.sessions) == (
        "127.0.0.1", "2026-12-01", "2026-12-01", 2
    )  # fmt: skip
    [size] = c.lengths
    assert (size.unit, size.source, size.requests) == ("tokens", TOKENIZER, 64)
    assert (size.minimum, size.median, size.maximum) == (309, 316.0, 322)
    assert inp.sessions[18] == 1 and inp.sessions[19] == 1 and inp.sessions[20] == 2


def test_sessions_follow_the_session_record_before_each_attempt() -> None:
    records = [
        {"type": "session", "session": 1},
        {"type": "attempt", "seq": 1},
        {"type": "outcome", "seq": 1},
        {"type": "session", "session": 2},
        {"type": "attempt", "seq": 2},
        {"type": "attempt", "seq": 1},  # never happens; the first attempt decides
    ]
    assert sessions_by_seq(records) == {1: 1, 2: 2}


def test_a_sessions_recorded_number_is_the_one_given_and_a_missing_one_counts_on() -> None:
    records = [
        {"type": "attempt", "seq": 9},  # before any session record: session 0
        {"type": "session", "session": 3},
        {"type": "attempt", "seq": 1},
        {"type": "attempt", "seq": "2"},  # not an integer seq: no session is claimed for it
        {"type": "session"},  # no number: the one after the last
        {"type": "attempt", "seq": 2},
    ]
    assert sessions_by_seq(records) == {9: 0, 1: 3, 2: 4}


def test_a_runs_sessions_are_the_numbers_its_journal_records(
    tmp_path: Path, prepared: Prepared
) -> None:
    # The runner numbers sessions 1, 2, ...; a journal may say otherwise, and the record wins.
    from needlepoint import cli
    from needlepoint.analysis.context import run_facts

    run_dir = tmp_path / "run"
    argv = ["run", str(prepared.root), "--allow", "4", "--run-dir", str(run_dir)]
    assert cli.main([*argv, "--simulate", "perfect", "--no-progress"]) == 0
    journal = run_dir / "journal.jsonl"
    lines = [json.loads(line) for line in journal.read_bytes().splitlines()]
    assert [r["session"] for r in lines if r["type"] == "session"] == [1]
    for r in lines:
        if r["type"] == "session":
            r["session"] = 7
    journal.write_text("".join(json.dumps(r) + "\n" for r in lines))
    rechain(journal)
    context, sessions = run_facts(run_dir, prepared, ())
    assert (context.sessions, sorted(sessions.items())) == (1, [(1, 7), (2, 7), (3, 7), (4, 7)])


def test_token_counts_of_other_materials_fall_back_to_usage(tmp_path: Path) -> None:
    folder = tmp_path / "gemma3"
    shutil.copytree(EVIDENCE / "prepared" / "gemma3", folder)
    prepared = load_prepared(folder)
    outcomes = make_input(prepared).outcomes  # usage: 900 + 10 × length prompt tokens
    assert length_sizes(prepared, outcomes)[0].source == TOKENIZER
    counts = json.loads((folder / "token_counts.json").read_text("utf-8"))
    for broken in (
        counts | {"prepared_fingerprint": "0" * 64},
        counts | {"requests": [*counts["requests"][:-1], {"seq": 64, "length": 13}]},
        counts | {"requests": "many"},
        [],
    ):
        (folder / "token_counts.json").write_text(json.dumps(broken), "utf-8")
        [size] = length_sizes(prepared, outcomes)
        assert (size.source, size.median) == (USAGE, 1020.0)
    (folder / "token_counts.json").write_bytes(b"\xff not json")
    assert length_sizes(prepared, outcomes)[0].source == USAGE


def test_without_any_token_count_the_prompt_characters_are_given(prepared: Prepared) -> None:
    rows = make_rows(prepared)
    for row in rows:
        row["prompt_tokens"] = "" if row["seq"] == "7" else row["prompt_tokens"]
    from needlepoint.analysis.inputs import validate_rows

    outcomes, _, _ = validate_rows(list(enumerate(rows, start=2)), prepared, "x.csv")
    sizes = length_sizes(prepared, outcomes)
    assert [s.unit for s in sizes] == ["tokens", "tokens"]  # one unknown still leaves usage
    for row in rows:
        row["prompt_tokens"] = ""
    outcomes, _, _ = validate_rows(list(enumerate(rows, start=2)), prepared, "x.csv")
    sizes = length_sizes(prepared, outcomes)
    assert [(s.length, s.unit, s.source, s.requests) for s in sizes] == [
        (60, "characters", CHARACTERS, 64),
        (240, "characters", CHARACTERS, 64),
    ]
    assert sizes[0].maximum < sizes[1].minimum


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://api.example.com:8443/v1?key=secret", "api.example.com"),
        ("http://127.0.0.1:35851/v1", "127.0.0.1"),
        (None, None),
    ],
)
def test_the_endpoint_is_named_by_its_host_alone(prepared: Prepared, url, host) -> None:
    c = run_context(prepared, make_input(prepared).outcomes, [], url)
    assert c.endpoint_host == host and c.sessions == 0 and c.first_date is None
