"""The execution order: blocks, pairs and condition orders, reconstructible from one seed.

PROTOCOL.md states the same algorithm in words; the audit re-implements it from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from needlepoint.design.java_random import JavaRandom, shuffle


@dataclass(frozen=True)
class Slot:
    """One planned request in execution order."""

    seq: int
    block: int
    pair: int
    case_index: int  # 0-based generation index; the label is S{case_index + 1}
    length: int
    similarity: str
    condition: str
    order: str


def shuffled_cases(protocol: dict[str, Any]) -> list[int]:
    """Case indices 0..C-1 shuffled with Collections.shuffle(list, new Random(seeds.order))."""
    cases = list(range(protocol["cases"]))
    shuffle(cases, JavaRandom(protocol["seeds"]["order"]))
    return cases


def execution_plan(protocol: dict[str, Any]) -> tuple[Slot, ...]:
    """Every request of the design, in the order it is sent.

    For the i-th shuffled case, each length in protocol order forms a pair. Low comes first when
    i is even, high when i is odd. A block's condition order is
    ``orders[(i + length_index + similarity_index * len(orders) // 2) % len(orders)]``, so each
    order appears equally often in every length × similarity stratum and the two blocks of a
    pair never share an order.
    """
    orders = protocol["orders"]
    sims = protocol["similarities"]
    slots: list[Slot] = []
    block = pair = 0
    for i, case_index in enumerate(shuffled_cases(protocol)):
        for li, length in enumerate(protocol["lengths"]):
            pair += 1
            for sim in sims if i % 2 == 0 else sims[::-1]:
                block += 1
                si = sims.index(sim)
                order = orders[(i + li + si * len(orders) // 2) % len(orders)]
                for condition in order.split("-"):
                    slots.append(
                        Slot(len(slots) + 1, block, pair, case_index, length, sim, condition, order)
                    )
    return tuple(slots)
