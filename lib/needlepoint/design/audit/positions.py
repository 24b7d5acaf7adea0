"""The audit's own reading of PROTOCOL.md, "Depth designs and near-name placement".

Where the target of each condition goes, which slots the near names take under each placement,
the depth labels and the Williams-square orders: re-implemented from the document's words, and
importing nothing from the generator (``design.positions``), so that a mistake there is caught
here rather than repeated.
"""

from __future__ import annotations

from typing import Any

from needlepoint.rand import JavaRandom


def williams(conditions: list[str]) -> list[str]:
    """PROTOCOL.md, "Condition orders": row 0 is 0, 1, n−1, 2, n−2, …; row r adds r (mod n);
    an odd n appends the n rows reversed."""
    n = len(conditions)
    first = [0]
    for i in range(1, n):
        first.append((i + 1) // 2 if i % 2 else n - i // 2)
    rows = [[(x + r) % n for x in first] for r in range(n)]
    rows += [row[::-1] for row in rows] if n % 2 else []
    return ["-".join(conditions[x] for x in row) for row in rows]


def insertion(protocol: dict[str, Any], condition: str, n: int) -> int:
    """Index of the target (A: placeholder) record among the N + 1 records; −1 if unknown."""
    at = {"A": n // 2}
    if "depths" in protocol:
        for cond, depth in zip(protocol["conditions"], protocol["depths"], strict=False):
            at[cond] = round(depth * 1000) * n // 1000
    else:
        at |= {"B": 0, "M": n // 2, "E": n}
    return at.get(condition, -1)


def drawn_slots(protocol: dict[str, Any]) -> dict[tuple[str, int], list[int]]:
    """PROTOCOL.md, "Near-name placement", per-case: (case label, N) → six ascending slots."""
    rng, out = JavaRandom(protocol["seeds"]["placement"]), {}
    for i in range(protocol["cases"]):
        for n in protocol["lengths"]:
            chosen: list[int] = []
            while len(chosen) < 6:
                draw = rng.nextInt(n)
                if draw not in chosen:
                    chosen.append(draw)
            out[(f"S{i + 1}", n)] = sorted(chosen)
    return out


def around(offsets: list[int], at: int, n: int) -> list[int | None]:
    """Background index of the record ``offset`` records from the target; None without room."""
    slots: list[int | None] = []
    for off in offsets:
        index = at + off if off < 0 else at + off - 1
        slots.append(index if 0 <= index < n else None)
    return slots
