"""The execution order against PROTOCOL.md's six steps, for designs other than the reference.

test_order.py pins the reference plan; here hypothesis varies the seed, the number of orders,
cases and lengths, and compares ``execution_plan`` with the steps of PROTOCOL.md
("Execution order") transcribed one by one, using only ``Collections.shuffle``.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from needlepoint.design.java_random import JavaRandom, shuffle
from needlepoint.design.order import Slot, execution_plan, shuffled_cases

ORDERS = ["-".join(p) for p in itertools.permutations("BMAE")]


def protocol_md_plan(p: dict) -> list[tuple]:
    """PROTOCOL.md, "Execution order", steps 1-6."""
    c, k = p["cases"], len(p["orders"])
    cases = list(range(c))
    shuffle(cases, JavaRandom(p["seeds"]["order"]))  # 1. the shuffled case list
    plan, block, pair = [], 0, 0
    for i, case in enumerate(cases):  # 2. the i-th shuffled case
        for li, length in enumerate(p["lengths"]):  # 3. one pair per length
            pair += 1
            sims = ["low", "high"] if i % 2 == 0 else ["high", "low"]  # 4.
            for sim in sims:
                block += 1
                si = p["similarities"].index(sim)
                order = p["orders"][(i + li + si * (k // 2)) % k]  # 5.
                for cond in order.split("-"):  # 6. seq numbers every request in turn
                    plan.append((len(plan) + 1, block, pair, case, length, sim, cond, order))
    return plan


@st.composite
def designs(draw: st.DrawFn) -> dict:
    orders = draw(st.lists(st.sampled_from(ORDERS), min_size=1, max_size=5, unique=True))
    return {
        "cases": len(orders) * draw(st.integers(1, 3)),
        "orders": orders,
        "similarities": ["low", "high"],
        "lengths": draw(st.lists(st.integers(1, 500), min_size=1, max_size=3, unique=True)),
        "seeds": {"order": draw(st.integers(-(2**63), 2**63 - 1))},
    }


@settings(derandomize=True, max_examples=120, deadline=None)
@given(designs())
def test_execution_plan_follows_protocol_md(p: dict) -> None:
    plan = execution_plan(p)
    assert all(isinstance(s, Slot) for s in plan)
    got = [
        (s.seq, s.block, s.pair, s.case_index, s.length, s.similarity, s.condition, s.order)
        for s in plan
    ]
    assert got == protocol_md_plan(p)


@settings(derandomize=True, max_examples=100, deadline=None)
@given(designs())
def test_each_order_appears_equally_often_per_stratum(p: dict) -> None:
    plan = execution_plan(p)
    k = len(p["orders"])
    for length in p["lengths"]:
        for sim in ("low", "high"):
            blocks = {(s.block, s.order) for s in plan if (s.length, s.similarity) == (length, sim)}
            counts = [sum(o == order for _, o in blocks) for order in p["orders"]]
            assert counts == [p["cases"] // k] * k
    if k >= 2:  # the two blocks of a pair never share an order
        for pair in {s.pair for s in plan}:
            assert len({s.order for s in plan if s.pair == pair}) == 2


def test_shuffled_cases_is_collections_shuffle_of_the_case_indices() -> None:
    p = {"cases": 12, "seeds": {"order": 5}}
    cases = list(range(12))
    shuffle(cases, JavaRandom(5))
    assert shuffled_cases(p) == cases and sorted(cases) == list(range(12))
