"""Where the effect is, and the diagnostics: each rule at its boundary.

Effects (Q1, B − M and E − M, accuracy by position) on the reference set; each diagnostic
table's rule at its own interface, on a handful of hand-made outcomes, every row compared whole
with the group, level and kind names a reader sees as literal text, so that a changed label, a
shifted cut or a dropped filter shows up as a different row; and near names before the target
against the frozen request text itself.
"""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
from support.analysis import analysis_params
from support.results import make_input, middle_loss

from needlepoint.analysis.effects import (
    NO_CODE,
    _row,
    _what_it_names,
    accuracy_rows,
    diagnostics,
    effect,
    effects,
    find,
    preceding_near_names,
    preceding_rows,
    wrong_kind_rows,
)
from needlepoint.analysis.inputs import (
    Outcome,
)
from needlepoint.analysis.primary import primary
from needlepoint.analysis.record import DiagnosticRow, PrecedingRow, WrongKindRow
from needlepoint.design.prepared import Prepared

# === effects ===


def test_the_middle_loss_difference_row_is_the_preregistered_one(prepared: Prepared) -> None:
    for spec in (None, middle_loss({"S1": ("high",), "S2": ("high", "low"), "S3/60": ("high",)})):
        inp = make_input(prepared, spec)
        pr = primary(inp).primary
        row = find(effects(inp.outcomes, analysis_params()).measures, "middle loss", "high − low")
        assert row.estimate_exact == pr.estimate_exact and row.cases == pr.complete_cases
        assert pr.interval is not None
        assert (row.lower_exact, row.upper_exact) == (
            pr.interval.lower_exact,
            pr.interval.upper_exact,
        )


def test_b_minus_m_and_e_minus_m_split_the_middle_loss(prepared: Prepared) -> None:
    spec = middle_loss({"S1": ("high",), "S4": ("low",)})
    b_or_e = [p.seq for p in prepared.plan if p.condition in ("B", "E")][::7]
    inp = make_input(prepared, lambda p: "error:absent_code" if p.seq in b_or_e else spec(p))
    rows = effects(inp.outcomes, analysis_params()).measures
    for sim in ("low", "high", "high − low"):
        for length in (None, 60, 240):
            b, e = find(rows, "B − M", sim, length), find(rows, "E − M", sim, length)
            ml = find(rows, "middle loss", sim, length)
            assert (
                Fraction(ml.estimate_exact)
                == (Fraction(b.estimate_exact) + Fraction(e.estimate_exact)) / 2
            )


def test_per_length_rows_only_with_several_lengths(prepared: Prepared) -> None:
    rows = effects(make_input(prepared).outcomes, analysis_params()).measures
    assert {r.length for r in rows} == {None, 60, 240}
    one = [o for o in make_input(prepared).outcomes if o.length == 60]
    assert {r.length for r in effects(one, analysis_params()).measures} == {None}


def test_an_estimate_from_one_case_an_interval_from_two() -> None:
    p = analysis_params()
    none = effect("accuracy", "low", 60, "B", [], 1, p)
    assert (none.cases, none.estimate, none.lower) == (0, None, None)
    one = effect("accuracy", "low", 60, "B", [1], 1, p)
    assert (one.estimate, one.lower, one.upper) == (1.0, None, None)
    two = effect("accuracy", "low", 60, "B", [1, 0], 1, p)
    assert (two.estimate_exact, two.lower_exact, two.upper_exact) == ("1/2", "0", "1")


def test_accuracy_by_position_counts_every_case_with_a_valid_answer(prepared: Prepared) -> None:
    first_m = next(p.seq for p in prepared.plan if (p.condition, p.similarity) == ("M", "low"))
    inp = make_input(prepared, {first_m: "failure:http_status"})
    cell = next(
        e
        for e in effects(inp.outcomes, analysis_params()).positions
        if (e.similarity, e.condition) == ("low", "M")
        and e.length == next(p.length for p in prepared.plan if p.seq == first_m)
    )
    assert (cell.cases, cell.estimate_exact) == (7, "1")  # 7 valid of 8, all correct


def test_accuracy_by_position_lists_only_the_conditions_that_ran(prepared: Prepared) -> None:
    # A design without the control condition A: no position row may claim a cell for it.
    inp = make_input(prepared, {})
    without_a = [o for o in inp.outcomes if o.condition != "A"]
    rows = effects(without_a, analysis_params()).positions
    assert {r.condition for r in rows} == {"B", "M", "E"}


# === diagnostics on the reference set ===


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


# === each diagnostic table at its own interface ===


NO_SESSIONS = "no sessions: a results table records none (analyse the run folder)"


def out(
    seq: int,
    block: int = 1,
    condition: str = "M",
    status: str = "correct",
    similarity: str = "high",
    length: int = 60,
    kind: str = "",
    near_kind: str | None = None,
) -> Outcome:
    return Outcome(seq, block, 1, "S1", length, similarity, condition, "B-M-A-E", status, kind,
                   None, None, None, None, None, None, near_kind=near_kind)  # fmt: skip


# _row


def test_a_row_counts_only_valid_answers_and_its_accuracy_is_their_share_correct() -> None:
    rows = [
        out(1, status="correct"),
        out(2, status="error"),
        out(3, status="error"),
        out(4, status="correct"),
        out(5, status="protocol_failure"),
        out(6, status="unexecuted"),
    ]
    assert _row("g", "lvl", rows) == DiagnosticRow("g", "lvl", 4, 2, 0.5)
    assert _row("g", "lvl", rows[:1]) == DiagnosticRow("g", "lvl", 1, 1, 1.0)
    assert _row("g", "lvl", rows[1:2]) == DiagnosticRow("g", "lvl", 1, 0, 0.0)


def test_a_row_without_a_valid_answer_has_no_accuracy() -> None:
    assert _row("g", "1", []) == DiagnosticRow("g", "1", 0, 0, None)
    failed = [out(1, status="protocol_failure"), out(2, status="unexecuted")]
    assert _row("g", "1", failed) == DiagnosticRow("g", "1", 0, 0, None)


# preceding_near_names


@pytest.mark.parametrize(
    ("length", "middle"),
    [(0, 0), (1, 0), (2, 3), (3, 2), (4, 3), (5, 2), (6, 3), (7, 3), (11, 3), (12, 3), (24, 3)],
)
def test_the_middle_counts_the_slots_floor_2k_plus_1_times_n_over_12_below_half(
    length: int, middle: int
) -> None:
    assert preceding_near_names("M", length) == middle


@pytest.mark.parametrize("length", [1, 2, 3, 12, 60])
def test_b_has_no_near_name_before_the_target_and_e_has_all_six(length: int) -> None:
    assert preceding_near_names("B", length) == 0
    assert preceding_near_names("E", length) == 6


@pytest.mark.parametrize("length", [-1, -12])
def test_a_negative_length_in_the_middle_is_refused(length: int) -> None:
    with pytest.raises(ValueError) as info:
        preceding_near_names("M", length)
    assert str(info.value) == f"length {length}: a background has at least 0 records"


# accuracy_rows


def test_position_in_block_follows_seq_order_within_each_block() -> None:
    # Given out of order: block 1 is seqs 1, 2, 3 (1st, 2nd, 3rd); block 2 is seqs 4, 5.
    outcomes = [
        out(3, block=1, status="error"),
        out(5, block=2, status="correct"),
        out(1, block=1, status="correct"),
        out(4, block=2, status="error"),
        out(2, block=1, status="correct"),
    ]
    rows = accuracy_rows(outcomes, None)
    assert rows[:3] == (
        DiagnosticRow("position in block", "1", 2, 1, 0.5),  # seqs 1 and 4
        DiagnosticRow("position in block", "2", 2, 2, 1.0),  # seqs 2 and 5
        DiagnosticRow("position in block", "3", 1, 0, 0.0),  # seq 3
    )


def test_position_rows_go_up_to_the_largest_block_and_count_only_b_m_and_e() -> None:
    outcomes = [
        out(1, block=1, condition="A", status="error"),
        out(2, block=1, condition="B"),
        out(3, block=2, condition="E"),
    ]
    rows = accuracy_rows(outcomes, None)
    assert [(r.group, r.level, r.valid) for r in rows if r.group == "position in block"] == [
        ("position in block", "1", 1),  # seq 1 is A: only seq 3 counts
        ("position in block", "2", 1),
    ]


def test_the_execution_halves_split_at_the_middle_seq_of_all_responses() -> None:
    # Six responses, seqs 10 to 15: the first half is up to seq 12 (A responses count for the
    # cut, not in the rows).
    outcomes = [
        out(10, condition="A"),
        out(11, status="error"),
        out(12),
        out(13),
        out(14, condition="A"),
        out(15, status="error"),
    ]
    rows = accuracy_rows(outcomes, None)
    assert rows[-2:] == (
        DiagnosticRow("execution half", "first", 2, 1, 0.5),
        DiagnosticRow("execution half", "second", 2, 1, 0.5),
    )


def test_an_odd_number_of_responses_leaves_the_larger_half_second() -> None:
    outcomes = [out(7), out(5, status="error"), out(6)]
    rows = accuracy_rows(outcomes, None)
    assert rows[-2:] == (
        DiagnosticRow("execution half", "first", 1, 0, 0.0),  # seq 5
        DiagnosticRow("execution half", "second", 2, 2, 1.0),  # seqs 6 and 7
    )


def test_one_response_is_all_in_the_second_half() -> None:
    # Half of one is none: nothing is cut off, not even seq 1.
    assert accuracy_rows([out(1)], None) == (
        DiagnosticRow("position in block", "1", 1, 1, 1.0),
        DiagnosticRow("execution half", "first", 0, 0, None),
        DiagnosticRow("execution half", "second", 1, 1, 1.0),
    )


def test_no_responses_give_only_two_empty_halves() -> None:
    assert accuracy_rows([], None) == (
        DiagnosticRow("execution half", "first", 0, 0, None),
        DiagnosticRow("execution half", "second", 0, 0, None),
    )
    assert accuracy_rows([], {1: 1}) == (
        DiagnosticRow("execution half", "first", 0, 0, None),
        DiagnosticRow("execution half", "second", 0, 0, None),
        DiagnosticRow("session", "1", 0, 0, None),
    )


def test_sessions_are_listed_in_order_and_a_seq_without_one_is_in_none() -> None:
    outcomes = [out(1, block=1), out(2, block=2, status="error"), out(3, block=3), out(4, block=4)]
    sessions = {3: 2, 1: 5, 2: 2}  # seq 4 has no session
    rows = accuracy_rows(outcomes, sessions)
    assert rows[3:] == (
        DiagnosticRow("session", "2", 2, 1, 0.5),  # seqs 2 and 3
        DiagnosticRow("session", "5", 1, 1, 1.0),  # seq 1
    )


def test_an_empty_session_map_gives_no_session_rows() -> None:
    rows = accuracy_rows([out(1), out(2)], {})
    assert [r.group for r in rows] == ["position in block", "position in block"] + [
        "execution half"
    ] * 2


def test_session_rows_count_only_b_m_and_e() -> None:
    outcomes = [out(1, condition="A", status="error"), out(2, condition="B")]
    rows = accuracy_rows(outcomes, {1: 1, 2: 1})
    assert rows[-1] == DiagnosticRow("session", "1", 1, 1, 1.0)


# _what_it_names and wrong_kind_rows


@pytest.mark.parametrize(
    ("kind", "near_kind", "named"),
    [
        ("near_distractor_code", "swap", "swap"),
        ("other_present_code", "qualifier", "qualifier"),  # the near name's kind comes first
        ("other_present_code", None, "another code of the request"),
        ("absent_code", None, "a code not in the request"),
        ("bad_format", None, "no code (unknown, extra text or bad format)"),
        ("false_unknown", None, "no code (unknown, extra text or bad format)"),
        ("", None, "no code (unknown, extra text or bad format)"),
    ],
)
def test_a_wrong_answer_is_named_by_its_near_kind_else_by_what_code_it_gives(
    kind: str, near_kind: str | None, named: str
) -> None:
    assert _what_it_names(out(1, status="error", kind=kind, near_kind=near_kind)) == named


def test_wrong_answers_are_counted_per_similarity_low_first_in_the_kinds_order() -> None:
    def wrong(seq: int, sim: str, kind: str, near: str | None = None, cond: str = "M") -> Outcome:
        return out(seq, condition=cond, status="error", similarity=sim, kind=kind, near_kind=near)

    outcomes = [
        wrong(1, "high", "bad_format"),
        wrong(2, "high", "absent_code"),
        wrong(3, "high", "other_present_code"),
        wrong(4, "high", "near_distractor_code", "qualifier"),
        wrong(5, "high", "near_distractor_code", "swap", cond="B"),
        wrong(6, "high", "near_distractor_code", "substitution", cond="E"),
        wrong(7, "high", "near_distractor_code", "substitution"),
        wrong(8, "high", "absent_code", cond="A"),  # A: not counted
        out(9, status="correct", similarity="high"),
        out(10, status="protocol_failure", similarity="high", kind="http_status"),
        wrong(11, "low", "near_distractor_code", "unrelated"),
        wrong(12, "low", "absent_code"),
        wrong(13, "low", "near_distractor_code", "unrelated"),
        wrong(14, "low", "absent_code"),
    ]
    assert wrong_kind_rows(outcomes) == (
        WrongKindRow("low", "unrelated", 2, 0.5),
        WrongKindRow("low", "a code not in the request", 2, 0.5),
        WrongKindRow("high", "substitution", 2, 2 / 7),
        WrongKindRow("high", "swap", 1, 1 / 7),
        WrongKindRow("high", "qualifier", 1, 1 / 7),
        WrongKindRow("high", "another code of the request", 1, 1 / 7),
        WrongKindRow("high", "a code not in the request", 1, 1 / 7),
        WrongKindRow("high", "no code (unknown, extra text or bad format)", 1, 1 / 7),
    )


def test_no_wrong_answer_gives_no_wrong_kind_row() -> None:
    assert wrong_kind_rows([]) == ()
    assert wrong_kind_rows([out(1), out(2, condition="A", status="error")]) == ()


def test_one_wrong_answer_is_the_whole_share() -> None:
    rows = wrong_kind_rows([out(1, status="error", similarity="low", kind="absent_code")])
    assert rows == (WrongKindRow("low", "a code not in the request", 1, 1.0),)


# preceding_rows


def test_preceding_rows_count_high_similarity_valid_and_wrong_answers_per_length() -> None:
    outcomes = [
        out(1, condition="M", length=12, status="error", kind="near_distractor_code",
            near_kind="swap"),
        out(2, condition="M", length=12, status="error", kind="absent_code"),
        out(3, condition="M", length=12, status="correct"),
        out(4, condition="M", length=12, status="protocol_failure"),  # not valid
        out(5, condition="M", length=12, similarity="low", status="error"),  # low: not counted
        out(6, condition="E", length=12, status="error", kind="bad_format"),
        out(7, condition="A", length=12, status="error"),  # A: no row
        out(8, condition="B", length=2, status="correct"),
    ]  # fmt: skip
    assert preceding_rows(outcomes) == (
        PrecedingRow(length=2, condition="B", preceding=0, valid=1, wrong=0, near=0),
        PrecedingRow(length=2, condition="M", preceding=3, valid=0, wrong=0, near=0),
        PrecedingRow(length=2, condition="E", preceding=6, valid=0, wrong=0, near=0),
        PrecedingRow(length=12, condition="B", preceding=0, valid=0, wrong=0, near=0),
        PrecedingRow(length=12, condition="M", preceding=3, valid=3, wrong=2, near=1),
        PrecedingRow(length=12, condition="E", preceding=6, valid=1, wrong=1, near=0),
    )


def test_preceding_rows_use_each_lengths_own_middle() -> None:
    rows = preceding_rows([out(1, condition="M", length=3), out(2, condition="M", length=5)])
    assert [(r.length, r.condition, r.preceding, r.valid) for r in rows if r.condition == "M"] == [
        (3, "M", 2, 1),
        (5, "M", 2, 1),
    ]


def test_no_outcomes_no_preceding_rows() -> None:
    assert preceding_rows([]) == ()


# diagnostics


def test_diagnostics_gathers_the_tables_and_notes_when_there_are_no_sessions() -> None:
    outcomes = [out(1, status="error", kind="absent_code"), out(2, block=2)]
    d = diagnostics(outcomes, None)
    assert d.accuracy == (
        DiagnosticRow("position in block", "1", 2, 1, 0.5),
        DiagnosticRow("execution half", "first", 1, 0, 0.0),
        DiagnosticRow("execution half", "second", 1, 1, 1.0),
    )
    assert d.wrong_kinds == (WrongKindRow("high", "a code not in the request", 1, 1.0),)
    assert d.preceding == (
        PrecedingRow(length=60, condition="B", preceding=0, valid=0, wrong=0, near=0),
        PrecedingRow(length=60, condition="M", preceding=3, valid=2, wrong=1, near=0),
        PrecedingRow(length=60, condition="E", preceding=6, valid=0, wrong=0, near=0),
    )
    assert d.notes == (NO_SESSIONS,)
    assert diagnostics(outcomes, {}).notes == (NO_SESSIONS,)


def test_diagnostics_with_sessions_has_no_note_and_a_session_row() -> None:
    d = diagnostics([out(1)], {1: 3})
    assert d.notes == ()
    assert d.accuracy[-1] == DiagnosticRow("session", "3", 1, 1, 1.0)
