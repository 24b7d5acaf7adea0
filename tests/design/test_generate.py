"""The generator's own output: material rules (the audit checks them independently) and the
execution order, pinned: balanced, reconstructible, and stable across releases.
"""

from __future__ import annotations

import re
from collections import Counter

from needlepoint.design import audit
from needlepoint.design.audit import classify_near, shares_word
from needlepoint.design.generate import (
    NEAR_KINDS,
    RequestBuilder,
    execution_plan,
    generate_cases,
    near_slots,
    shuffled_cases,
)
from needlepoint.design.protocol import reference_protocol

CASES = generate_cases(reference_protocol())


def test_near_slot_positions() -> None:
    assert near_slots(60) == (5, 15, 25, 35, 45, 55)
    assert near_slots(240) == (20, 60, 100, 140, 180, 220)
    assert len(set(near_slots(12))) == 6


def test_every_name_is_eight_characters_and_codes_match() -> None:
    code = re.compile(r"[A-Z]{2}-[0-9]{4}")
    for case in CASES:
        names = [case.target_name, *case.near_names]
        codes = [case.target_code]
        for bg in case.backgrounds:
            names += [*bg.names, bg.placeholder_name]
            codes += [*bg.codes, bg.placeholder_code]
        assert all(len(n) == 8 and n.endswith("项目") for n in names)
        assert all(code.fullmatch(c) for c in codes)


def test_codes_never_repeat_across_the_set() -> None:
    codes = []
    for case in CASES:
        codes.append(case.target_code)
        for bg in case.backgrounds:
            codes += [*bg.codes, bg.placeholder_code]
    assert len(codes) == len(set(codes))


def test_two_near_names_of_each_kind_and_kinds_are_real() -> None:
    for case in CASES:
        assert Counter(case.near_kinds) == {"substitution": 2, "swap": 2, "qualifier": 2}
        for name, kind in zip(case.near_names, case.near_kinds, strict=True):
            assert classify_near(name, case.target_name) == kind


def test_near_kinds_names_every_kind_the_generator_draws_and_the_audit_checks() -> None:
    # The audit keeps its own copy on purpose (it checks the generator independently), so the
    # two lists must be shown to agree: a kind added or renamed in one alone would go unchecked.
    drawn = Counter(kind for case in CASES for kind in case.near_kinds)
    assert drawn == {kind: 2 * len(CASES) for kind in NEAR_KINDS}
    assert audit.NEAR_KINDS == NEAR_KINDS


def test_unrelated_names_share_no_word_with_the_target() -> None:
    for case in CASES:
        for bg in case.backgrounds:
            for name in (*bg.names, bg.placeholder_name):
                assert not shares_word(name, case.target_name, "项目")
                assert classify_near(name, case.target_name) is None


def test_conditions_place_target_and_placeholder() -> None:
    p = reference_protocol()
    builder = RequestBuilder(p)
    case = CASES[0]
    bg = case.backgrounds[0]
    target_line = f"名称：{case.target_name}，交接编码：{case.target_code}"
    for cond, index in (("B", 0), ("M", 30), ("E", 60)):
        req = builder.build(case, bg, "low", cond)
        records = req.body["messages"][1]["content"].split("\n")[1:62]
        assert records.index(target_line) == index
        assert req.expected == case.target_code
    absent = builder.build(case, bg, "high", "A")
    content = absent.body["messages"][1]["content"]
    assert case.target_code not in content and absent.expected == "UNKNOWN"
    assert content.count(case.target_name) == 1  # only in the question
    assert sorted(absent.body) == ["max_tokens", "messages", "model", "temperature"]


def test_low_and_high_differ_only_in_slot_names() -> None:
    builder = RequestBuilder(reference_protocol())
    case = CASES[2]
    for bg in case.backgrounds:
        low = builder.lines(case, bg, "low")
        high = builder.lines(case, bg, "high")
        differ = [i for i, (a, b) in enumerate(zip(low, high, strict=True)) if a != b]
        assert differ == list(bg.slots)
        assert all(low[i][-7:] == high[i][-7:] for i in differ)


def test_a_drawn_target_takes_its_name_in_the_form_every_other_draw_checks() -> None:
    # `taken` is shared with unrelated() and near names, which hold plain concatenations: a
    # target recorded in any other form could be drawn again as an unrelated name.
    from needlepoint.design.generate import _Drawer

    drawer = _Drawer(reference_protocol())
    taken: set[str] = set()
    words = drawer.target(taken)
    assert taken == {"".join(words) + drawer.suffix}
    assert "".join(words) + drawer.suffix in drawer.by_index


def test_shuffled_cases_are_pinned() -> None:
    # Changing this sequence changes the frozen reference set: it needs a new protocol version.
    assert shuffled_cases(reference_protocol()) == [3, 1, 2, 7, 0, 6, 5, 4]


def test_plan_shape_and_balance() -> None:
    plan = execution_plan(reference_protocol())
    assert [s.seq for s in plan] == list(range(1, 129))
    assert len({s.block for s in plan}) == 32 and len({s.pair for s in plan}) == 16
    cells = Counter((s.case_index, s.length, s.similarity, s.condition) for s in plan)
    assert len(cells) == 128 and set(cells.values()) == {1}
    strata = Counter((s.length, s.similarity, s.order) for s in plan[::4])
    assert set(strata.values()) == {2} and len(strata) == 16


def test_blocks_follow_their_order_and_pairs_alternate() -> None:
    plan = execution_plan(reference_protocol())
    blocks = [plan[i : i + 4] for i in range(0, 128, 4)]
    for block in blocks:
        assert [s.condition for s in block] == block[0].order.split("-")
    for n, i in enumerate(range(0, 32, 2)):
        a, b = blocks[i][0], blocks[i + 1][0]
        assert a.pair == b.pair == n + 1 and a.case_index == b.case_index
        assert a.order != b.order
    firsts = [blocks[i][0].similarity for i in range(0, 32, 2)]
    # two lengths per case: low-first for even shuffled positions, high-first for odd ones
    assert firsts == ["low", "low", "high", "high"] * 4


def test_first_blocks_pinned() -> None:
    plan = execution_plan(reference_protocol())
    head = [(s.seq, s.case_index, s.length, s.similarity, s.condition) for s in plan[:8]]
    assert head == [
        (1, 3, 60, "low", "B"),
        (2, 3, 60, "low", "M"),
        (3, 3, 60, "low", "A"),
        (4, 3, 60, "low", "E"),
        (5, 3, 60, "high", "E"),
        (6, 3, 60, "high", "A"),
        (7, 3, 60, "high", "M"),
        (8, 3, 60, "high", "B"),
    ]
