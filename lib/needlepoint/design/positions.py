"""Where things sit in a request: the target's depth, the near-name slots and the block orders.

v1 knows three answer-present conditions (B, M, E) and six near-name slots fixed at
``floor((2k+1)·N/12)``. A newer protocol version may declare instead

- ``depths``: fractions 0..1 (at most three decimals); each becomes a condition ``D<depth>``
  whose target record goes before background record ``floor(permille · N / 1000)``;
- ``near_placement``: ``fixed`` (v1's slots), ``per-case`` (six distinct slots per case and
  length drawn from ``JavaRandom(seeds.placement)``) or ``around-target`` (the six near names at
  the declared ``near_offsets`` around the target, where the background has room).

The condition orders of every design are the rows of a Williams square over the protocol's
conditions in protocol order (for B, M, E, A exactly v1's four orders). PROTOCOL.md states each
rule in words; the audit re-implements them from there and imports nothing from this module.
"""

from __future__ import annotations

from typing import Any

from needlepoint.rand import JavaRandom

ABSENT = "A"
FIXED, PER_CASE, AROUND = "fixed", "per-case", "around-target"
PLACEMENTS = (FIXED, PER_CASE, AROUND)
NEAR_COUNT = 6


def permille(depth: float | int) -> int:
    """A depth fraction in thousandths (the schema allows at most three decimals)."""
    return round(depth * 1000)


def depth_label(depth: float | int) -> str:
    """The condition label of a depth: ``D0``, ``D0.25``, ``D0.5``, ``D1``."""
    p = permille(depth)
    if p in (0, 1000):
        return f"D{p // 1000}"
    return "D0." + f"{p:03d}".rstrip("0")


def depth_conditions(depths: list[float | int]) -> list[str]:
    """The conditions of a depth design: one per depth in protocol order, then A."""
    return [*(depth_label(d) for d in depths), ABSENT]


def williams_orders(conditions: list[str]) -> list[str]:
    """The rows of a Williams square over ``conditions`` (protocol order), joined by ``-``.

    Row 0 takes the condition indices 0, 1, n−1, 2, n−2, …; row r adds r to each index
    modulo n. For an odd n the n reversed rows follow, so that every condition precedes every
    other equally often. For B, M, E, A this gives v1's four orders exactly.
    """
    n = len(conditions)
    first, low, high = [0], 1, n - 1
    while len(first) < n:
        first.append(low)
        low += 1
        if len(first) < n:
            first.append(high)
            high -= 1
    rows = [[(i + r) % n for i in first] for r in range(n)]
    if n % 2:
        rows += [row[::-1] for row in rows]
    return ["-".join(conditions[i] for i in row) for row in rows]


def insertion_index(protocol: dict[str, Any], condition: str, length: int) -> int:
    """The index among a request's records of the target (or A's placeholder) record.

    B: 0, M: N//2, E: N, A: N//2; a depth condition: floor(permille · N / 1000).
    """
    fixed = {"B": 0, "M": length // 2, "E": length, ABSENT: length // 2}
    if condition in fixed:
        return fixed[condition]
    for depth in protocol.get("depths", []):
        if depth_label(depth) == condition:
            return permille(depth) * length // 1000
    raise ValueError(f"unknown condition {condition!r}")


def placement(protocol: dict[str, Any]) -> str:
    """The protocol's near-name placement (``fixed`` when it declares none)."""
    return str(protocol.get("near_placement", FIXED))


def fixed_slots(length: int) -> tuple[int, ...]:
    """Background indices floor((2k+1)·N/12): spread evenly, six whatever the length."""
    return tuple((2 * k + 1) * length // (2 * NEAR_COUNT) for k in range(NEAR_COUNT))


def per_case_slots(protocol: dict[str, Any]) -> list[list[tuple[int, ...]]]:
    """``[case][length index]`` → six distinct slots, ascending, from ``seeds.placement``.

    One JavaRandom stream for the whole design, cases in generation order, lengths in protocol
    order; each slot is ``nextInt(N)``, drawn again while it repeats one already drawn.
    """
    rng = JavaRandom(protocol["seeds"]["placement"])
    out = []
    for _ in range(protocol["cases"]):
        per_length = []
        for n in protocol["lengths"]:
            chosen: list[int] = []
            while len(chosen) < NEAR_COUNT:
                s = rng.nextInt(n)
                if s not in chosen:
                    chosen.append(s)
            per_length.append(tuple(sorted(chosen)))
        out.append(per_length)
    return out


def around_slots(
    offsets: list[int], inserted: int, length: int
) -> tuple[tuple[int | None, ...], tuple[int, ...]]:
    """Near name k at ``offsets[k]`` records from the target: its background index, or None.

    Offset −1 is the record just before the target (background index ``inserted − 1``), +1 the
    one just after (``inserted``). Returns the slot per near name and the offsets that found no
    room inside the background.
    """
    slots: list[int | None] = []
    unplaced = []
    for off in offsets:
        index = inserted + off if off < 0 else inserted + off - 1
        if 0 <= index < length:
            slots.append(index)
        else:
            slots.append(None)
            unplaced.append(off)
    return tuple(slots), tuple(unplaced)


def near_before(slots: tuple[int | None, ...], inserted: int) -> int:
    """How many placed near-name slots lie before the target record."""
    return sum(1 for s in slots if s is not None and s < inserted)


def has_options(protocol: dict[str, Any]) -> bool:
    """Whether the protocol declares any of the depth or placement options (never v1 or v2)."""
    return "depths" in protocol or "near_placement" in protocol
