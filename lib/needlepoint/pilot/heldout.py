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
from dataclasses import dataclass, replace
from typing import Any

from needlepoint.design.generate import Case, generate_cases
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
# Added to the calibrated rule when designs on record were given (the study record's runs).
_RECORD = (
    "; and, for every design run under the evidence root{skip}, no target name of the {side} is "
    "a target or near name of it, no target code of the {side} is a code of it, no target code "
    "of it is a code of the {side}, and no request of the {side} is byte for byte one of its "
    "requests"
)
RECORD_RULE = _RECORD.format(side="calibrated version", skip="")
# Added to the pilot's rule when designs on record were given. A pilot with the candidate's own
# design fingerprint is a model variant's pilot of the same design at the same lengths and
# cases: it shares the materials by design (docs/pilot.md), so it is not compared.
PILOT_RECORD_RULE = _RECORD.format(
    side="pilot", skip=" other than a pilot with the candidate pilot's own design fingerprint"
)


def derived_seed(design_seed: int, purpose: str, attempt: int) -> int:
    """Candidate ``attempt`` for ``purpose``: a non-negative 63-bit integer (a valid seed)."""
    data = canonical_bytes({"attempt": attempt, "design_seed": design_seed, "purpose": purpose})
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big") >> 1


@dataclass(frozen=True)
class Materials:
    """Where each asked-about name and each code of a generated design first occurs.

    ``owner`` names the side in every phrase: "the design", "the pilot", or a run on record.
    """

    asked: dict[str, str]  # target names and near names
    codes: dict[str, str]  # every code: targets, backgrounds, placeholders
    targets: tuple[tuple[str, str, str], ...]  # (case label, target name, target code)
    owner: str = "the design"


def index_materials(cases: tuple[Case, ...], owner: str = "the design") -> Materials:
    """The asked-about names and every code of a design, each with its first place."""
    asked: dict[str, str] = {}
    codes: dict[str, str] = {}
    for case in cases:
        asked.setdefault(case.target_name, f"{owner}'s target name of case {case.label}")
        for near in case.near_names:
            asked.setdefault(near, f"a near name of {owner}'s case {case.label}")
        codes.setdefault(case.target_code, f"the target code of case {case.label}")
        for bg in case.backgrounds:
            where = f"case {case.label} at length {bg.length}"
            for j, code in enumerate(bg.codes):
                codes.setdefault(code, f"the code of background record {j} of {where}")
            codes.setdefault(bg.placeholder_code, f"the placeholder code of {where}")
    targets = tuple((c.label, c.target_name, c.target_code) for c in cases)
    return Materials(asked, codes, targets, owner)


def first_overlap(pilot: Materials, design: Materials) -> str | None:
    """The first item of one side seen in the other, as one phrase; None when disjoint.

    The checks, in this order: a target name of ``pilot`` that is a target or near name of
    ``design``; a target code of ``pilot`` that is any code of ``design``; a target code of
    ``design`` that is any code of ``pilot``. Each side is named by its ``owner``.
    """
    a, b = pilot.owner, design.owner
    for label, name, _ in pilot.targets:
        if name in design.asked:
            return f"{name}, {a}'s target name of case {label}, is {design.asked[name]}"
    for label, _, code in pilot.targets:
        if code in design.codes:
            return f"{code}, {a}'s target code of case {label}, is {design.codes[code]} in {b}"
    for label, _, code in design.targets:
        if code in pilot.codes:
            return f"{code}, {b}'s target code of case {label}, is {pilot.codes[code]} in {a}"
    return None


@dataclass(frozen=True)
class OnRecord:
    """A design already run under the evidence root: what it asked and its request bytes.

    The study record builds these (``needlepoint.study.scan``); a calibrated version must share
    nothing with any of them, by the overlap rule above plus identical request bytes.
    """

    materials: Materials
    requests: frozenset[str]
    design_fingerprint: str | None = None


def record_overlap(
    new: Materials, requests: frozenset[str], records: tuple[OnRecord, ...]
) -> str | None:
    """The first thing ``new`` shares with a design on record, as one phrase; None if nothing."""
    for record in records:
        found = first_overlap(new, record.materials)
        if found is not None:
            return found
        same = requests & record.requests
        if same:
            return (
                f"{len(same)} of {new.owner}'s requests are byte for byte requests of "
                f"{record.materials.owner}"
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


def pilot_seed(
    design: dict[str, Any],
    pilot_of: Callable[[int], dict[str, Any]],
    records: tuple[OnRecord, ...] = (),
) -> HeldOutSeed:
    """A held-out seed for a pilot: ``pilot_of(seed)`` is the pilot protocol with that seed.

    With ``records`` (designs run under the evidence root) the pilot also asks nothing any of
    them asked, so a new pilot is fresh against everything on record, not only its design.
    """
    from needlepoint.design.protocol import design_fingerprint

    materials = index_materials(generate_cases(design))
    base = design["seeds"]["materials"]

    def overlap(seed: int) -> str | None:
        protocol = pilot_of(seed)
        mine = index_materials(generate_cases(protocol), "the pilot")
        found = first_overlap(mine, materials)
        if found is None and records:
            own = design_fingerprint(protocol)
            others = tuple(r for r in records if r.design_fingerprint != own)
            found = record_overlap(mine, request_hashes(protocol), others)
        return found

    return choose_seed(
        lambda k: derived_seed(base, PILOT_PURPOSE, k),
        overlap,
        "pilot",
        PILOT_RULE + (PILOT_RECORD_RULE if records else ""),
    )


def request_hashes(protocol: dict[str, Any]) -> frozenset[str]:
    """The SHA-256 of every request body a protocol generates (plan.csv's last column)."""
    from needlepoint.design.generate import generate

    lines = generate(protocol)["plan.csv"].decode("utf-8").splitlines()[1:]
    return frozenset(line.rsplit(",", 1)[1] for line in lines)


def calibrated_seed(
    design_seed: int,
    pilot: dict[str, Any],
    calibrated_of: Callable[[int], dict[str, Any]],
    records: tuple[OnRecord, ...] = (),
) -> HeldOutSeed:
    """The calibrated design's seed: the design's own when disjoint from the pilot (and from
    every design on record), else the first derived candidate that is.

    Attempt 0 is the design's own seed; attempt k > 0 is ``derived_seed(S, calibrated, k)``.
    Against the pilot the calibrated version plays "the design"; against a design on record it
    is "the calibrated version", and its requests must not be theirs byte for byte either.
    """
    pilot_materials = index_materials(generate_cases(pilot), "the pilot")

    def overlap(seed: int) -> str | None:
        protocol = calibrated_of(seed)
        mine = index_materials(generate_cases(protocol))
        found = first_overlap(pilot_materials, mine)
        if found is None and records:
            named = replace(mine, owner="the calibrated version")
            found = record_overlap(named, request_hashes(protocol), records)
        return found

    return choose_seed(
        lambda k: design_seed if k == 0 else derived_seed(design_seed, CALIBRATED_PURPOSE, k),
        overlap,
        "calibrate",
        CALIBRATED_RULE + (RECORD_RULE if records else ""),
    )
