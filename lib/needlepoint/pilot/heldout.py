"""Held-out materials: a derived materials seed whose items share nothing with a design's.

The pilot's materials come from another seed than the design's, derived deterministically from
the design's seed. A candidate seed is used only when no item of one side is seen in the other:

- no target name of the pilot is a target name or a near name of the design;
- no target code of the pilot is any code of the design (target, background or placeholder);
- no target code of the design is any code of the pilot.

So no question the design asks, and no answer it expects, was asked or answered in the pilot.
Background names may recur by chance (the reference pools hold 19,200 names, and a large design
uses a quarter of them), but a background record is never asked about. Otherwise the next
candidate is tried, and every rejected one is recorded with the first overlap that ruled it
out. The same rule keeps a calibrated design disjoint from the pilot it was calibrated on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from needlepoint.design.materials import Case, generate_cases
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes
from needlepoint.pilot.record import HeldOutSeed, RejectedSeed

# Candidates tried before giving up; each costs one materials generation.
MAX_SEED_ATTEMPTS = 100
PILOT_PURPOSE = "needlepoint-pilot"
CALIBRATED_PURPOSE = "needlepoint-calibrated"
_DERIVED = (
    "(first 8 bytes of SHA-256 of the canonical JSON "
    '{{"attempt": k, "design_seed": S, "purpose": "{}"}}, big-endian) >> 1'
)
_DISJOINT = (
    "the first where no pilot target name is a design target or near name, no pilot target "
    "code is a design code, and no design target code is a pilot code"
)
PILOT_RULE = f"attempt k = 0, 1, ...: seed {_DERIVED.format(PILOT_PURPOSE)}; {_DISJOINT}"
CALIBRATED_RULE = (
    f"attempt 0: the design's own seed S; attempt k >= 1: "
    f"{_DERIVED.format(CALIBRATED_PURPOSE)}; {_DISJOINT}"
)


def derived_seed(design_seed: int, purpose: str, attempt: int) -> int:
    """Candidate ``attempt`` for ``purpose``: a non-negative 63-bit integer (a valid seed)."""
    data = canonical_bytes({"attempt": attempt, "design_seed": design_seed, "purpose": purpose})
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big") >> 1


@dataclass(frozen=True)
class Materials:
    """Where each asked-about name and each code of a generated design first occurs."""

    asked: dict[str, str]  # target names and near names
    codes: dict[str, str]  # every code: targets, backgrounds, placeholders
    targets: tuple[tuple[str, str, str], ...]  # (case label, target name, target code)


def index_materials(cases: tuple[Case, ...]) -> Materials:
    """The asked-about names and every code of a design, each with its first place."""
    asked: dict[str, str] = {}
    codes: dict[str, str] = {}
    for case in cases:
        asked.setdefault(case.target_name, f"the design's target name of case {case.label}")
        for near in case.near_names:
            asked.setdefault(near, f"a near name of the design's case {case.label}")
        codes.setdefault(case.target_code, f"the target code of case {case.label}")
        for bg in case.backgrounds:
            where = f"case {case.label} at length {bg.length}"
            for j, code in enumerate(bg.codes):
                codes.setdefault(code, f"the code of background record {j} of {where}")
            codes.setdefault(bg.placeholder_code, f"the placeholder code of {where}")
    targets = tuple((c.label, c.target_name, c.target_code) for c in cases)
    return Materials(asked, codes, targets)


def first_overlap(pilot: Materials, design: Materials) -> str | None:
    """The first item of one side seen in the other, as one phrase; None when disjoint."""
    for label, name, _ in pilot.targets:
        if name in design.asked:
            return f"{name}, the pilot's target name of case {label}, is {design.asked[name]}"
    for label, _, code in pilot.targets:
        if code in design.codes:
            return (
                f"{code}, the pilot's target code of case {label}, is {design.codes[code]} "
                "in the design"
            )
    for label, _, code in design.targets:
        if code in pilot.codes:
            return (
                f"{code}, the design's target code of case {label}, is {pilot.codes[code]} "
                "in the pilot"
            )
    return None


def choose_seed(
    candidates: Callable[[int], int],
    overlap_of: Callable[[int], str | None],
    what: str,
    rule: str,
) -> HeldOutSeed:
    """The first candidate seed without overlap; refuse with the last overlap if none is."""
    rejected: list[RejectedSeed] = []
    for attempt in range(MAX_SEED_ATTEMPTS):
        seed = candidates(attempt)
        overlap = overlap_of(seed)
        if overlap is None:
            return HeldOutSeed(seed, attempt, rule, tuple(rejected))
        rejected.append(RejectedSeed(attempt, seed, overlap))
    raise NeedlepointError(
        f"{what}: none of {MAX_SEED_ATTEMPTS} derived materials seeds is disjoint from the "
        f"design; the last overlaps: {rejected[-1].overlap} (use larger names pools)"
    )


def pilot_seed(design: dict[str, Any], pilot_of: Callable[[int], dict[str, Any]]) -> HeldOutSeed:
    """A held-out seed for a pilot: ``pilot_of(seed)`` is the pilot protocol with that seed."""
    materials = index_materials(generate_cases(design))
    base = design["seeds"]["materials"]
    return choose_seed(
        lambda k: derived_seed(base, PILOT_PURPOSE, k),
        lambda seed: first_overlap(index_materials(generate_cases(pilot_of(seed))), materials),
        "pilot",
        PILOT_RULE,
    )


def calibrated_seed(
    design_seed: int, pilot: dict[str, Any], calibrated_of: Callable[[int], dict[str, Any]]
) -> HeldOutSeed:
    """The calibrated design's seed: the design's own when disjoint from the pilot, else derived.

    Attempt 0 is the design's own seed; attempt k > 0 is ``derived_seed(S, calibrated, k)``.
    """
    pilot_materials = index_materials(generate_cases(pilot))

    def overlap(seed: int) -> str | None:
        return first_overlap(pilot_materials, index_materials(generate_cases(calibrated_of(seed))))

    return choose_seed(
        lambda k: design_seed if k == 0 else derived_seed(design_seed, CALIBRATED_PURPOSE, k),
        overlap,
        "calibrate",
        CALIBRATED_RULE,
    )
