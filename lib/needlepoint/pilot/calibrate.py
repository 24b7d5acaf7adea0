"""`needlepoint calibrate`: choose lengths and a case count from a pilot, and write a new version.

The rules (docs/pilot.md) are fixed before the pilot is read:

1. A length qualifies when its end-position (B and E) accuracy lies inside the band, its
   protocol-failure rate ``f`` leaves complete pairs, ``(1 − f)^8 >= min_pair_complete`` (the
   probability that all eight requests of a case at that length are valid), and it has valid
   answers under M (low similarity) and A. The calibrated design takes every qualifying length.
2. The pilot's accuracies over those lengths, per similarity (B, E and A under each, M under
   low), and its failure rate feed ``PowerModel``; the design's runner stops after its
   consecutive-failure limit. An effect above the largest those rates allow (high-similarity M
   at 0) is refused with the reason: no case count can power it.
3. The recommended count is the smallest multiple of the number of orders, up to
   ``max_cases`` (and ``max_requests`` planned requests, when given), whose simulated power at
   ``effect`` reaches ``target_power`` while the mean number of complete cases is at least
   ``complete_margin`` × the analysis minimum.

The calibration record: the ``rationale`` of a calibrated protocol, and `calibrate --report`.

It says which pilot the version was calibrated on (by its journal fingerprint), what the pilot
measured per length, which rule chose the lengths, the power model fed with the pilot's
accuracies, the power table of the case-count search and the recommendation. docs/schema.md
states every field.

The pilot's rates as a power model, and the largest effect they allow (calibration rule 2).

The pilot's accuracies are taken per similarity, never as one end accuracy pooled over both:
pooling a ceiling under low similarity with a floor under high hides that the design cannot
show a large added middle loss at all.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import needlepoint
from needlepoint.analysis.inputs import AnalysisInput, from_run
from needlepoint.analysis.power import PowerModel, PowerStudy, power_grid
from needlepoint.design import protocol as protocol_mod
from needlepoint.design.prepared import load_prepared
from needlepoint.errors import NeedlepointError
from needlepoint.pilot.folder import read_design
from needlepoint.pilot.heldout import OnRecord, calibrated_seed
from needlepoint.pilot.options import (
    REQUESTS_PER_PAIR,
    CalibrationOptions,
    case_bound,
    check_effect,
    check_options,
    check_search,
)
from needlepoint.pilot.record import (
    PREPARED_DIR,
    RUN_DIR,
    DesignRef,
    HeldOutSeed,
    design_ref,
    read_pilot_record,
)
from needlepoint.pilot.stats import LengthCounts, length_counts, pooled
from needlepoint.schema import AddedLater, to_plain

CALIBRATION_FORMAT = "needlepoint-calibration"
CALIBRATION_VERSION = 2
CALIBRATION_KIND = "calibration"
# Verdicts: only "recommended" writes a protocol.
RECOMMENDED = "recommended"
NO_LENGTH = "no length qualifies"
ABOVE_ATTAINABLE = "effect above the largest attainable"
NOT_REACHED = "power not reached"


@dataclass(frozen=True)
class CalibrationRules(AddedLater):
    """The rules a calibration applied, fixed before it read the pilot (docs/pilot.md).

    ``band_per_similarity`` came later: true when each similarity arm's end accuracy had to be
    inside the band; absent in a record made before, whose band read both arms pooled.
    """

    ADDED_LATER = ("band_per_similarity",)

    band_low: float
    band_high: float
    min_pair_complete: float
    threshold: float
    effect: float
    target_power: float
    complete_margin: int
    max_cases: int
    max_requests: int | None
    simulations: int
    seed: int
    band_per_similarity: bool | None = None


@dataclass(frozen=True)
class PilotRef:
    """The pilot a calibration read."""

    journal_sha256: str
    prepared_fingerprint: str
    protocol_version: int
    materials_seed: int
    simulation: bool


@dataclass(frozen=True)
class LengthVerdict:
    """Whether one pilot length qualifies for the calibrated design, and why."""

    length: int
    pair_complete: float | None
    in_band: bool
    qualifies: bool
    reason: str


@dataclass(frozen=True)
class PowerRow:
    """One row of the case-count search: a power.csv row (``POWER_COLUMNS``)."""

    cases: int
    effect: float
    power: float
    power_se: float
    not_evaluable: float
    mean_complete_cases: float
    simulations: int

    @classmethod
    def of(cls, row: Any) -> PowerRow:
        """From one row of ``power_grid``'s table, as plain Python numbers."""
        return cls(
            int(row["cases"]),
            float(row["effect"]),
            float(row["power"]),
            float(row["power_se"]),
            float(row["not_evaluable"]),
            float(row["mean_complete_cases"]),
            int(row["simulations"]),
        )


@dataclass(frozen=True)
class CalibrationRecord:
    """Why a calibrated version has its lengths and case count, or why there is none."""

    kind: str
    format: str
    version: int
    package_version: str
    pilot: PilotRef
    design: DesignRef
    rules: CalibrationRules
    lengths: tuple[LengthCounts, ...]
    verdicts: tuple[LengthVerdict, ...]
    chosen_lengths: tuple[int, ...]
    power_model: PowerModel | None
    largest_effect: float | None
    power_table: tuple[PowerRow, ...]
    power_at_threshold: float | None
    recommended_cases: int | None
    protocol_version: int | None
    materials_seed: HeldOutSeed | None
    verdict: str
    reason: str


def pilot_model(
    inp: AnalysisInput, lengths: tuple[int, ...], design: dict[str, Any]
) -> PowerModel | str:
    """Rule 2: the power model of the pilot's per-similarity accuracies over the chosen lengths.

    Returns the reason instead when a condition has no valid answer over those lengths (the
    high-similarity middle is shown, not needed: the effect sets it).
    """
    p = pooled(inp.outcomes, lengths)
    acc = {k: v.estimate for k, v in p.items()}
    needed = ("B", "M", "E", "A", "high B", "high E", "high A", "failure")
    missing = [k for k in needed if acc[k] is None]
    if missing:
        return f"no valid {missing[0]} answer at lengths {', '.join(map(str, lengths))}"
    return PowerModel(
        acc_b=float(acc["B"] or 0),
        acc_m=float(acc["M"] or 0),
        acc_e=float(acc["E"] or 0),
        acc_a=float(acc["A"] or 0),
        failure_rate=float(acc["failure"] or 0),
        stop_after=int(design["runner"]["max_consecutive_failures"]),
        high_b=float(acc["high B"] or 0),
        high_m=acc["high M"],
        high_e=float(acc["high E"] or 0),
        high_a=float(acc["high A"] or 0),
    )


def unattainable(model: PowerModel, effect: float, lengths: tuple[int, ...]) -> str | None:
    """Why the pilot's rates cannot produce ``effect``; None when they can."""
    if effect <= model.largest_effect:
        return None
    return (
        f"the pilot's rates (lengths {', '.join(map(str, lengths))}) allow an added middle loss "
        f"of at most {model.largest_effect:.3f}, below the effect {effect:g}: with B "
        f"{model.acc_b:.3f}, M {model.acc_m:.3f}, E {model.acc_e:.3f} under low similarity and "
        f"B {model.high('B'):.3f}, E {model.high('E'):.3f} under high, even a middle that is "
        "always wrong under high similarity gives no more, so no case count can power it"
    )


@dataclass(frozen=True)
class Calibration:
    """A calibration's record and, when it recommends one, the new protocol."""

    record: CalibrationRecord
    protocol: dict[str, Any] | None


def band_misses(c: LengthCounts, o: CalibrationOptions) -> list[str]:
    """Each end accuracy outside the band, with its numbers: per similarity arm (the rule since
    issue 34), or both pooled (``band_per_similarity`` off, to re-derive older calibrations).

    Pooled, a low arm at the ceiling and a high arm near the floor average into the band: the
    regime the band exists to exclude, so each arm must be inside it on its own.
    """
    arms = (
        [("under low similarity ", c.end_low), ("under high similarity ", c.end_high)]
        if o.band_per_similarity
        else [("", c.end)]
    )
    out = []
    for where, p in arms:
        end = p.estimate
        counts = f" ({p.successes}/{p.trials})" if o.band_per_similarity else ""
        if end is None:
            out.append(f"no valid B or E answer {where}".rstrip())
        elif end < o.band_low:
            out.append(f"end accuracy {where}{end:.3f}{counts} is below the band (floor side)")
        elif end > o.band_high:
            out.append(f"end accuracy {where}{end:.3f}{counts} is above the band (ceiling side)")
    return out


def verdict_of(c: LengthCounts, o: CalibrationOptions) -> LengthVerdict:
    """Apply rule 1 to one length."""
    f = c.failures.estimate
    pair = None if f is None else (1 - f) ** REQUESTS_PER_PAIR
    end = c.end.estimate
    misses = band_misses(c, o)
    in_band = not misses
    ok = False
    if misses:
        band = f" [{o.band_low:g}, {o.band_high:g}]" if o.band_per_similarity else ""
        reason = "; ".join(misses) + (f" (band{band})" if band else "")
    elif pair is None or pair < o.min_pair_complete:
        shown = "unknown" if pair is None else f"{pair:.3f}"
        reason = f"failure rate leaves a pair complete with probability {shown} only"
    elif c.middle.trials == 0 or c.refusal.trials == 0:
        reason = "no valid M (low similarity) or A answer"
    else:
        ok = True
        which = (
            f"{c.end_low.estimate:.3f} (low) and {c.end_high.estimate:.3f} (high)"
            if o.band_per_similarity
            else f"{end:.3f}"
        )
        reason = f"end accuracy {which} in the band; a pair complete with probability {pair:.3f}"
    return LengthVerdict(c.length, pair, in_band, ok, reason)


def calibrated_protocol(
    design: dict[str, Any], lengths: tuple[int, ...], cases: int, seed: int, version: int
) -> dict[str, Any]:
    """The design with the chosen lengths and count, a materials seed, and a new version."""
    p = copy.deepcopy(design)
    p.update(version=version, lengths=list(lengths), cases=cases)
    p["seeds"] = dict(design["seeds"], materials=seed)
    for free in ("rationale", "materials_reuse"):  # the design's own, not the new version's
        p.pop(free, None)
    return p


def _search(
    model: PowerModel, o: CalibrationOptions, design: dict[str, Any], lengths: tuple[int, ...]
) -> tuple[list[PowerRow], int | None]:
    """Rule 3: the power table of every count tried, and the first count that meets it."""
    step = len(design["orders"])
    minimum = design["analysis"]["min_complete_cases"]
    rows: list[PowerRow] = []
    # The simulation reads the design's orders, runner and analysis and the chosen lengths; the
    # case count comes from the study, and the seed and version play no part.
    protocol = {**design, "lengths": list(lengths)}
    for cases in range(step, case_bound(o, lengths) + 1, step):
        study = PowerStudy(
            cases=(cases,), effects=(o.effect,), simulations=o.simulations, seed=o.seed
        )
        row = PowerRow.of(power_grid(model, study, protocol).iloc[0])
        rows.append(row)
        if row.power >= o.target_power and row.mean_complete_cases >= o.complete_margin * minimum:
            return rows, cases
    return rows, None


def threshold_power(model: PowerModel, o: CalibrationOptions, protocol: dict[str, Any]) -> float:
    """Power at an effect equal to the threshold, for the recommended design (shown, not used)."""
    threshold = float(protocol["analysis"]["threshold"])
    study = PowerStudy(
        cases=(protocol["cases"],), effects=(threshold,), simulations=o.simulations, seed=o.seed
    )
    return float(power_grid(model, study, protocol)["power"].iloc[0])


def load_pilot(pilot_dir: str | Path) -> tuple[Any, dict[str, Any], AnalysisInput]:
    """The pilot's record, its design and its validated rows (the run audited first)."""
    from needlepoint.run.audit import audit_run

    folder = Path(pilot_dir)
    record = read_pilot_record(folder)
    design = read_design(folder, record)
    audit = audit_run(folder / RUN_DIR)
    if not audit.ok:
        shown = "; ".join(audit.problems[:3])
        more = f"; and {len(audit.problems) - 3} more" if len(audit.problems) > 3 else ""
        raise NeedlepointError(
            f"{folder / RUN_DIR}: fails audit-run with {len(audit.problems)} problem(s): "
            f"{shown}{more}"
        )
    return record, design, from_run(folder / RUN_DIR, pilot=True)


def calibrate(
    pilot_dir: str | Path,
    options: CalibrationOptions | None = None,
    records: tuple[OnRecord, ...] = (),
) -> Calibration:
    """Read a pilot folder and apply the rules; the protocol is None unless one is recommended.

    ``records``: the designs already run under the evidence root; the new version's materials
    seed avoids them as it avoids the pilot (docs/pilot.md).
    """
    o = options or CalibrationOptions()
    check_options(o)
    record, design, inp = load_pilot(pilot_dir)
    if "depths" in design:
        # The power search simulates the B/M/E metric; a depth design's contrast needs its own.
        raise NeedlepointError(
            f"{pilot_dir}: a depth design's pilot (depths {design['depths']}) cannot be "
            "calibrated yet: the length rule and the power search model B, M and E only "
            "(its rows are in run/results.csv)"
        )
    check_effect(o, float(design["analysis"]["threshold"]))
    check_search(o, len(design["orders"]))
    version = o.version if o.version is not None else design["version"] + 2
    if version in (design["version"], record.protocol_version) or version < 1:
        raise NeedlepointError(
            f"--version {version}: must be a positive version other than the design's "
            f"(v{design['version']}) and the pilot's (v{record.protocol_version})"
        )
    counts = tuple(length_counts(inp.outcomes, n) for n in sorted(record.lengths))
    verdicts = tuple(verdict_of(c, o) for c in counts)
    chosen = tuple(v.length for v in verdicts if v.qualifies)
    rules = CalibrationRules(
        o.band_low, o.band_high, o.min_pair_complete, design["analysis"]["threshold"],
        o.effect, o.target_power, o.complete_margin, o.max_cases, o.max_requests,
        o.simulations, o.seed, band_per_similarity=True if o.band_per_similarity else None,
    )  # fmt: skip
    base = dict(
        kind=CALIBRATION_KIND,
        format=CALIBRATION_FORMAT,
        version=CALIBRATION_VERSION,
        package_version=needlepoint.__version__,
        pilot=PilotRef(
            inp.journal_sha256 or "",
            inp.fingerprint,
            record.protocol_version,
            record.materials_seed.seed,
            inp.simulation,
        ),
        design=design_ref(design),
        rules=rules,
        lengths=counts,
        verdicts=verdicts,
        chosen_lengths=chosen,
    )
    empty = dict(power_table=(), power_at_threshold=None, recommended_cases=None)
    none = dict(protocol_version=None, materials_seed=None)
    if not chosen:
        reason = "; ".join(f"{v.length}: {v.reason}" for v in verdicts)
        rec = CalibrationRecord(
            **base,
            power_model=None,
            largest_effect=None,
            **empty,
            **none,
            verdict=NO_LENGTH,
            reason=reason,
        )
        return Calibration(rec, None)
    model = pilot_model(inp, chosen, design)
    if isinstance(model, str):
        rec = CalibrationRecord(
            **base,
            power_model=None,
            largest_effect=None,
            **empty,
            **none,
            verdict=NO_LENGTH,
            reason=model,
        )
        return Calibration(rec, None)
    largest = dict(largest_effect=model.largest_effect)
    why = unattainable(model, o.effect, chosen)
    if why is not None:
        rec = CalibrationRecord(
            **base, power_model=model, **largest, **empty, **none,
            verdict=ABOVE_ATTAINABLE, reason=why,
        )  # fmt: skip
        return Calibration(rec, None)
    rows, cases = _search(model, o, design, chosen)
    if cases is None:
        bound = case_bound(o, chosen)
        budget = "" if o.max_requests is None else f" (--max-requests {o.max_requests})"
        best = max(rows, key=lambda r: r.power, default=None)
        reason = (
            f"no multiple of {len(design['orders'])} up to {bound} cases{budget} reaches "
            f"{o.target_power:.0%} power at effect {o.effect:g}"
            + ("" if best is None else f" (best {best.power:.3f} at {best.cases} cases)")
        )
        rec = CalibrationRecord(
            **base, power_model=model, **largest, power_table=tuple(rows),
            power_at_threshold=None,
            recommended_cases=None, **none, verdict=NOT_REACHED, reason=reason,
        )  # fmt: skip
        return Calibration(rec, None)
    pilot_protocol = load_prepared(Path(pilot_dir) / PREPARED_DIR).protocol

    def candidate(materials_seed: int) -> dict[str, Any]:
        # One function for every seed tried and for the one chosen: what was checked for
        # overlap is exactly what is written.
        return calibrated_protocol(design, chosen, cases, materials_seed, version)

    seed = calibrated_seed(design["seeds"]["materials"], pilot_protocol, candidate, records)
    protocol = candidate(seed.seed)
    reason = (
        f"lengths {', '.join(map(str, chosen))}: {cases} cases reach power "
        f"{rows[-1].power:.3f} at effect {o.effect:g}"
    )
    rec = CalibrationRecord(
        **base, power_model=model, **largest, power_table=tuple(rows),
        power_at_threshold=threshold_power(model, o, protocol), recommended_cases=cases,
        protocol_version=version, materials_seed=seed, verdict=RECOMMENDED, reason=reason,
    )  # fmt: skip
    label = "a SIMULATED pilot" if inp.simulation else "pilot"
    protocol["description"] = (
        f"{design['protocol_id']} v{version}: v{design['version']} calibrated on {label} "
        f"{rec.pilot.journal_sha256[:12]} (held-out materials): lengths "
        f"{', '.join(map(str, chosen))}, {cases} cases"
    )
    protocol["rationale"] = to_plain(rec)
    protocol_mod.validate(protocol, "calibrated protocol")
    return Calibration(rec, protocol)
