"""The execution order is pinned: balanced, reconstructible, and stable across releases."""

from __future__ import annotations

from collections import Counter

from needlepoint.design.order import execution_plan, shuffled_cases
from needlepoint.design.protocol import reference_protocol


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
