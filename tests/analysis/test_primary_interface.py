"""primary's building blocks at their interface: natural order, completeness reasons, bounds."""

from __future__ import annotations

import pytest
from support.analysis import outcome as support_outcome
from support.results import make_input, make_prepared, middle_loss

from needlepoint.analysis.inputs import Outcome
from needlepoint.analysis.primary import completeness, natural_key, position_bounds, primary


def outcome(
    seq: int,
    case: str = "S1",
    length: int = 1000,
    similarity: str = "low",
    condition: str = "B",
    status: str = "correct",
    kind: str = "",
) -> Outcome:
    """One results row with only the fields the analysis reads set."""
    return support_outcome(
        seq=seq, block=0, pair=0, case=case, length=length, similarity=similarity,
        condition=condition, order="BME", status=status, kind=kind,
    )  # fmt: skip


def full_case(case: str, lengths: tuple[int, ...], start: int) -> list[Outcome]:
    """Every block of a case (each length, both similarities, B/M/E), all correct."""
    rows, seq = [], start
    for length in lengths:
        for sim in ("low", "high"):
            for cond in ("B", "M", "E"):
                rows.append(outcome(seq, case, length, sim, cond))
                seq += 1
    return rows


def test_natural_key_splits_digits_into_integers() -> None:
    """Labels split into text and integer runs, so S2 sorts before S10."""
    assert natural_key("S10") == ("S", 10, "")
    assert natural_key("a2b3") == ("a", 2, "b", 3, "")
    assert natural_key("x") == ("x",)
    assert sorted(["S10", "S2", "S1", "S9"], key=natural_key) == ["S1", "S2", "S9", "S10"]


def test_completeness_of_valid_blocks_lists_no_problems() -> None:
    """Right and wrong answers are both valid: every block, pair and case is complete."""
    rows = full_case("S10", (1000,), 1) + full_case("S2", (2000, 1000), 20)
    rows[0] = outcome(1, "S10", 1000, "low", "B", status="error")
    check = completeness(rows)
    assert check.complete_cases == ["S2", "S10"]
    assert len(check.block_problems) == 6
    assert all(p == [] for p in check.block_problems.values())
    assert check.pair_problems == {("S10", 1000): [], ("S2", 2000): [], ("S2", 1000): []}
    assert check.case_problems == {"S10": [], "S2": []}
    assert len(check.blocks[("S2", 2000, "high")]) == 3


def test_completeness_names_each_invalid_response_and_its_kind() -> None:
    """An invalid response is named by seq, category and kind, up to block, pair and case."""
    rows = full_case("S1", (2000, 1000), 1)
    rows[7] = outcome(8, "S1", 1000, "low", "M", status="protocol_failure", kind="timeout")
    rows[8] = outcome(9, "S1", 1000, "low", "E", status="unexecuted")
    rows[1] = outcome(2, "S1", 2000, "low", "M", status="protocol_failure", kind="indeterminate_x")
    rows[4] = outcome(5, "S1", 2000, "high", "M", status="unexecuted")
    check = completeness(rows)
    assert check.block_problems[("S1", 1000, "low")] == [
        "seq 8 protocol_failure (timeout)",
        "seq 9 unexecuted",
    ]
    assert check.block_problems[("S1", 1000, "high")] == []
    assert check.pair_problems[("S1", 1000)] == [
        "low block: seq 8 protocol_failure (timeout), seq 9 unexecuted"
    ]
    assert check.pair_problems[("S1", 2000)] == [
        "low block: seq 2 indeterminate (indeterminate_x)",
        "high block: seq 5 unexecuted",
    ]
    assert check.case_problems["S1"] == [
        "length 1000 pair incomplete (low block: seq 8 protocol_failure (timeout), seq 9 "
        "unexecuted)",
        "length 2000 pair incomplete (low block: seq 2 indeterminate (indeterminate_x); "
        "high block: seq 5 unexecuted)",
    ]
    assert check.complete_cases == []


def test_completeness_names_a_similarity_that_was_never_planned() -> None:
    """A pair with only one similarity block is incomplete: the other was not planned."""
    rows = [outcome(i + 1, "S3", 1000, "high", c) for i, c in enumerate("BME")]
    rows += [outcome(i + 4, "S3", 2000, "low", c) for i, c in enumerate("BME")]
    check = completeness(rows)
    assert check.pair_problems[("S3", 1000)] == ["low block not planned"]
    assert check.pair_problems[("S3", 2000)] == ["high block not planned"]
    assert check.case_problems["S3"] == [
        "length 1000 pair incomplete (low block not planned)",
        "length 2000 pair incomplete (high block not planned)",
    ]
    assert check.complete_cases == []


def by_sim(low: dict[str, str], high: dict[str, str]) -> dict[str, list[Outcome]]:
    """Outcomes per similarity from a status string per position ('c' correct, 'e' error)."""
    status = {"c": "correct", "e": "error"}
    out: dict[str, list[Outcome]] = {}
    seq = 1
    for sim, cells in (("low", low), ("high", high)):
        out[sim] = []
        for cond, marks in cells.items():
            for m in marks:
                out[sim].append(outcome(seq, similarity=sim, condition=cond, status=status[m]))
                seq += 1
    return out


def caveat(bounded: str, scope: str = "") -> list[str]:
    """The position-bounds caveat as it reads with the given list of bounded cells."""
    return [
        f"Position at floor or ceiling: {bounded}. A rate at 0 or 1 cannot move further that "
        "way, so a middle loss or a difference that involves it is bounded by the task, not "
        f"measured{scope}."
    ]


def test_position_bounds_names_every_floor_and_ceiling() -> None:
    """Each position at 0/n or n/n is named with its similarity, count and which bound."""
    cells = by_sim({"B": "cc", "M": "ee", "E": "ce"}, {"B": "ce", "M": "c", "E": "ee"})
    assert position_bounds(cells, False, " (scope)") == caveat(
        "B under low similarity 2/2 (ceiling); M under low similarity 0/2 (floor); "
        "M under high similarity 1/1 (ceiling); E under high similarity 0/2 (floor)",
        " (scope)",
    )


def test_position_bounds_with_floor_leaves_end_floors_to_the_floor_caveat() -> None:
    """With the floor caveat stated, B and E at zero are left out, M at zero is kept."""
    cells = by_sim({"B": "ee", "M": "ee", "E": "e"}, {"B": "e", "M": "cc", "E": "ee"})
    assert position_bounds(cells, True) == caveat(
        "M under low similarity 0/2 (floor); M under high similarity 2/2 (ceiling)"
    )


def test_position_bounds_is_empty_when_no_position_is_bounded() -> None:
    """Mixed rates everywhere, or no rows for a position, give no caveat."""
    cells = by_sim({"B": "ce", "M": "ec"}, {"E": "cce"})
    assert position_bounds(cells, False) == []
    assert position_bounds({"low": [], "high": []}, True) == []


def test_pair_values_are_halved_twice_losses(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each length's losses and difference are B + E - 2M halved: 1 per lost middle."""
    prepared = make_prepared(tmp_path_factory)
    spec = middle_loss({"S1/60": ("low", "high"), "S1/240": ("high",)})
    result = primary(make_input(prepared, spec))
    s1 = next(c for c in result.primary.cases if c.case == "S1").lengths
    assert [(x.length, x.loss_low, x.loss_high, x.difference) for x in s1] == [
        (60, 1.0, 1.0, 0.0),
        (240, 0.0, 1.0, 1.0),
    ]
