"""Completeness on hand-built runs: case order past S9, the reasons a reader gets, odd designs.

test_primary.py runs the rules on the reference set (eight cases, every block planned); these
cover what it cannot show: S10 sorting after S9, the exact wording of each reason, and a design
whose outcomes lack a similarity block altogether.
"""

from __future__ import annotations

from support.analysis import outcome

from needlepoint.analysis.inputs import AnalysisInput
from needlepoint.analysis.primary import natural_key, primary
from needlepoint.design.protocol import reference_protocol


def outcomes(cases: int, rule=lambda c, n, s, cond: "correct", sims=("low", "high")) -> tuple:
    rows, seq = [], 0
    for c in range(1, cases + 1):
        for length in (60, 240):
            for sim in sims:
                for cond in ("B", "M", "E", "A"):
                    seq += 1
                    status, _, kind = rule(f"S{c}", length, sim, cond).partition(":")
                    rows.append(
                        outcome(
                        seq=seq, block=seq, pair=seq, case=f"S{c}", length=length,
                        similarity=sim, condition=cond, order="B-M-A-E", status=status, kind=kind,
                    )
                    )  # fmt: skip
    return tuple(rows)


def analyse(rows: tuple):
    return primary(AnalysisInput(reference_protocol(), "f" * 64, rows, False, None, "test"))


def test_natural_key_sorts_numbers_by_value() -> None:
    labels = ["S10", "S2", "S1", "S9", "S11", "T1"]
    assert sorted(labels, key=natural_key) == ["S1", "S2", "S9", "S10", "S11", "T1"]
    assert natural_key("S10") == ("S", 10, "")


def test_cases_exploratory_rows_and_incomplete_cases_follow_case_numbers() -> None:
    def rule(c: str, n: int, s: str, cond: str) -> str:
        return (
            "unexecuted" if c in ("S2", "S10") and (n, s, cond) == (60, "low", "A") else "correct"
        )

    r = analyse(outcomes(11, rule))
    assert [c.case for c in r.primary.cases] == [
        "S1",
        "S3",
        "S4",
        "S5",
        "S6",
        "S7",
        "S8",
        "S9",
        "S11",
    ]
    assert [(x.case, x.length) for x in r.exploratory] == [
        ("S2", 60),
        ("S2", 240),
        ("S10", 60),
        ("S10", 240),
    ]
    assert [x.case for x in r.completeness.incomplete_cases] == ["S2", "S10"]


def test_each_reason_names_the_request_and_only_a_kind_when_there_is_one() -> None:
    def rule(c: str, n: int, s: str, cond: str) -> str:
        if (c, n, s, cond) == ("S1", 60, "low", "A"):
            return "unexecuted"
        if (c, n, s, cond) == ("S1", 60, "high", "M"):
            return "protocol_failure:indeterminate_timeout"
        if (c, n, s, cond) == ("S1", 60, "high", "E"):
            return "protocol_failure:role"
        return "correct"

    r = analyse(outcomes(3, rule))
    # seq numbers: S1, length 60: low B M E A = 1..4, high B M E A = 5..8
    pair = (
        "low block: seq 4 unexecuted; high block: seq 6 indeterminate (indeterminate_timeout), "
        "seq 7 protocol_failure (role)"
    )
    assert [(x.length, x.reason) for x in r.exploratory] == [
        (60, pair),
        (240, "pair complete, but the case has an incomplete length"),
    ]
    (case,) = r.completeness.incomplete_cases
    assert (case.case, case.reason) == ("S1", f"length 60 pair incomplete ({pair})")
    assert [e.excludes for e in r.exclusions] == [
        "case S1 (block S1/60/low)",
        *["case S1 (block S1/60/high)"] * 2,
    ]
    assert [(e.seq, e.category, e.kind) for e in r.exclusions] == [
        (4, "unexecuted", ""),
        (6, "indeterminate", "indeterminate_timeout"),
        (7, "protocol_failure", "role"),
    ]


def test_a_similarity_block_that_was_never_planned_makes_the_pair_incomplete() -> None:
    r = analyse(outcomes(2, sims=("low",)))
    assert r.primary.complete_cases == 0 and r.primary.planned_cases == 2
    assert [x.reason for x in r.exploratory] == ["high block not planned"] * 4
    assert [(x.loss_low, x.loss_high, x.difference) for x in r.exploratory] == [
        (0.0, None, None)
    ] * 4
    assert (r.completeness.blocks_complete, r.completeness.pairs_complete) == (4, 0)
