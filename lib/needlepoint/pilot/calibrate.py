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
   ``complete_margin`` × the analysis minimum. When none does and a descriptive count was
   declared (``descriptive_cases``), the version is written at that count and labelled
   descriptive: underpowered for the preregistered decision, with its power shown.

A depth design (``depths``) is calibrated by the same rules: its ends are the first and last
depth, its middle the interior depths, a case has ``2 × conditions`` requests per length, and the
power model is ``analysis.depth.power.DepthPowerModel``, whose effect is the expected value of
the design's preregistered contrast.

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
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import needlepoint
from needlepoint.analysis.depth import contrast_weights
from needlepoint.analysis.depth.power import DepthPowerModel, depth_model, depth_power_grid
from needlepoint.analysis.inputs import AnalysisInput, Outcome, from_run
from needlepoint.analysis.power import PowerModel, PowerStudy, power_grid
from needlepoint.analysis.secondary import clopper_pearson
from needlepoint.design import protocol as protocol_mod
from needlepoint.design.prepared import load_prepared
from needlepoint.errors import NeedlepointError
from needlepoint.pilot.folder import OnRecord, calibrated_seed, read_design
from needlepoint.pilot.record import (
    PREPARED_DIR,
    REQUESTS_PER_PAIR,
    RUN_DIR,
    CalibrationOptions,
    DesignRef,
    HeldOutSeed,
    case_bound,
    check_descriptive,
    check_effect,
    check_options,
    check_search,
    design_ref,
    read_pilot_record,
)
from needlepoint.schema import AddedLater, to_plain

CALIBRATION_FORMAT = "needlepoint-calibration"
CALIBRATION_VERSION = 2
CALIBRATION_KIND = "calibration"
# Verdicts: only "recommended" writes a protocol.
RECOMMENDED = "recommended"
NO_LENGTH = "no length qualifies"
ABOVE_ATTAINABLE = "effect above the largest attainable"
NOT_REACHED = "power not reached"
DESCRIPTIVE = "descriptive: power not reached"
WRITES_PROTOCOL = (RECOMMENDED, DESCRIPTIVE)


@dataclass(frozen=True)
class CalibrationRules(AddedLater):
    """The rules a calibration applied, fixed before it read the pilot (docs/pilot.md).

    ``band_per_similarity`` came later: true when each similarity arm's end accuracy had to be
    inside the band; absent in a record made before, whose band read both arms pooled.
    ``descriptive_cases`` came later too: the count written when power is not reached.
    """

    ADDED_LATER = ("band_per_similarity", "descriptive_cases")

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
    descriptive_cases: int | None = None


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
class CalibrationRecord(AddedLater):
    """Why a calibrated version has its lengths and case count, or why there is none.

    ``depth_model`` came later: a depth design's power model (``power_model`` is then None).
    """

    ADDED_LATER = ("depth_model",)

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
    depth_model: DepthPowerModel | None = None

    @property
    def model(self) -> PowerModel | DepthPowerModel | None:
        """The power model the search used, whichever kind of design."""
        return self.power_model if self.depth_model is None else self.depth_model


def pilot_model(
    inp: AnalysisInput, lengths: tuple[int, ...], design: dict[str, Any]
) -> PowerModel | DepthPowerModel | str:
    """Rule 2: the power model of the pilot's per-similarity accuracies over the chosen lengths.

    Returns the reason instead when a condition has no valid answer over those lengths (the
    high-similarity middle is shown, not needed: the effect sets it).
    """
    if "depths" in design:
        return pilot_depth_model(inp, lengths, design)
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


def pilot_depth_model(
    inp: AnalysisInput, lengths: tuple[int, ...], design: dict[str, Any]
) -> DepthPowerModel | str:
    """Rule 2 for a depth design: every condition's accuracy per similarity over the chosen
    lengths (a lowered depth's high rate is shown, not needed: the effect sets it)."""
    conditions = Roles.of(design).conditions
    p = pooled(inp.outcomes, lengths, conditions)
    low = {c: p[c].estimate for c in conditions}
    high = {c: p["high " + c].estimate for c in conditions}
    shown = ", ".join(map(str, lengths))
    for c in conditions:
        if low[c] is None:
            return f"no valid {c} answer under low similarity at lengths {shown}"
    depths = [float(d) for d in design["depths"]]
    weights = [*contrast_weights(design["analysis"]["contrast"], depths), 0.0]  # A: weight 0
    for c, w in zip(conditions, weights, strict=True):
        if w >= 0 and high[c] is None:
            return f"no valid {c} answer under high similarity at lengths {shown}"
    failure = float(p["failure"].estimate or 0)
    return depth_model(design, {c: float(v or 0) for c, v in low.items()}, high, failure)


def unattainable(
    model: PowerModel | DepthPowerModel, effect: float, lengths: tuple[int, ...]
) -> str | None:
    """Why the pilot's rates cannot produce ``effect``; None when they can."""
    if effect <= model.largest_effect:
        return None
    if isinstance(model, DepthPowerModel):
        rates = "; ".join(
            f"{c} {lo:.3f} (low) {'—' if hi is None else f'{hi:.3f}'} (high)"
            for c, lo, hi in zip(model.conditions, model.low, model.high, strict=True)
        )
        return (
            f"the pilot's rates (lengths {', '.join(map(str, lengths))}) allow a contrast of at "
            f"most {model.largest_effect:.3f}, below the effect {effect:g} ({rates}): even "
            "interior depths that are always wrong under high similarity give no more, so no "
            "case count can power it"
        )
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


def verdict_of(
    c: LengthCounts, o: CalibrationOptions, per_pair: int = REQUESTS_PER_PAIR
) -> LengthVerdict:
    """Apply rule 1 to one length (``per_pair``: a case's requests at one length)."""
    f = c.failures.estimate
    pair = None if f is None else (1 - f) ** per_pair
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
        reason = "no valid middle (low similarity) or A answer"
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


def requests_per_pair(design: dict[str, Any]) -> int:
    """A case's requests at one length: both similarity blocks of every condition."""
    return 2 * len(Roles.of(design).conditions)


def power_rows(
    model: PowerModel | DepthPowerModel, study: PowerStudy, protocol: dict[str, Any]
) -> Any:
    """The power table of either kind of design (``analysis.power.POWER_COLUMNS``)."""
    if isinstance(model, DepthPowerModel):
        return depth_power_grid(model, study, protocol)
    return power_grid(model, study, protocol)


def _search(
    model: PowerModel | DepthPowerModel,
    o: CalibrationOptions,
    design: dict[str, Any],
    lengths: tuple[int, ...],
) -> tuple[list[PowerRow], int | None]:
    """Rule 3: the power table of every count tried, and the first count that meets it."""
    step = len(design["orders"])
    minimum = design["analysis"]["min_complete_cases"]
    rows: list[PowerRow] = []
    # The simulation reads the design's orders, runner and analysis and the chosen lengths; the
    # case count comes from the study, and the seed and version play no part.
    protocol = {**design, "lengths": list(lengths)}
    for cases in range(step, case_bound(o, lengths, requests_per_pair(design)) + 1, step):
        row = power_at(model, o, protocol, cases)
        rows.append(row)
        if row.power >= o.target_power and row.mean_complete_cases >= o.complete_margin * minimum:
            return rows, cases
    return rows, None


def power_at(
    model: PowerModel | DepthPowerModel,
    o: CalibrationOptions,
    protocol: dict[str, Any],
    cases: int,
    effect: float | None = None,
) -> PowerRow:
    """One row of the search: power at ``cases`` and the effect (the calibration's own)."""
    study = PowerStudy(
        cases=(cases,),
        effects=(o.effect if effect is None else effect,),
        simulations=o.simulations,
        seed=o.seed,
    )
    return PowerRow.of(power_rows(model, study, protocol).iloc[0])


def threshold_power(
    model: PowerModel | DepthPowerModel, o: CalibrationOptions, protocol: dict[str, Any]
) -> float:
    """Power at an effect equal to the threshold, for the recommended design (shown, not used)."""
    threshold = float(protocol["analysis"]["threshold"])
    return power_at(model, o, protocol, int(protocol["cases"]), threshold).power


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
    check_effect(o, float(design["analysis"]["threshold"]))
    check_search(o, len(design["orders"]))
    version = o.version if o.version is not None else design["version"] + 2
    if version in (design["version"], record.protocol_version) or version < 1:
        raise NeedlepointError(
            f"--version {version}: must be a positive version other than the design's "
            f"(v{design['version']}) and the pilot's (v{record.protocol_version})"
        )
    roles, per_pair = Roles.of(design), requests_per_pair(design)
    counts = tuple(length_counts(inp.outcomes, n, roles) for n in sorted(record.lengths))
    verdicts = tuple(verdict_of(c, o, per_pair) for c in counts)
    chosen = tuple(v.length for v in verdicts if v.qualifies)
    rules = CalibrationRules(
        o.band_low, o.band_high, o.min_pair_complete, design["analysis"]["threshold"],
        o.effect, o.target_power, o.complete_margin, o.max_cases, o.max_requests,
        o.simulations, o.seed, band_per_similarity=True if o.band_per_similarity else None,
        descriptive_cases=o.descriptive_cases,
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
    # No length in the band, or no model fits the chosen lengths: nothing to search.
    model = pilot_model(inp, chosen, design) if chosen else None
    if model is None or isinstance(model, str):
        reason = (
            model if model is not None else "; ".join(f"{v.length}: {v.reason}" for v in verdicts)
        )
        rec = CalibrationRecord(
            **base, power_model=None, largest_effect=None, **empty, **none,
            verdict=NO_LENGTH, reason=reason,
        )  # fmt: skip
        return Calibration(rec, None)
    models: dict[str, Any] = (
        dict(power_model=None, depth_model=model)
        if isinstance(model, DepthPowerModel)
        else dict(power_model=model)
    )
    largest = dict(largest_effect=model.largest_effect)
    why = unattainable(model, o.effect, chosen)
    if why is not None:
        rec = CalibrationRecord(
            **base, **models, **largest, **empty, **none,
            verdict=ABOVE_ATTAINABLE, reason=why,
        )  # fmt: skip
        return Calibration(rec, None)
    bound = case_bound(o, chosen, per_pair)
    check_descriptive(o, len(design["orders"]), bound)
    rows, cases = _search(model, o, design, chosen)
    verdict = RECOMMENDED
    if cases is None:
        budget = "" if o.max_requests is None else f" (--max-requests {o.max_requests})"
        best = max(rows, key=lambda r: r.power, default=None)
        reason = (
            f"no multiple of {len(design['orders'])} up to {bound} cases{budget} reaches "
            f"{o.target_power:.0%} power at effect {o.effect:g}"
            + ("" if best is None else f" (best {best.power:.3f} at {best.cases} cases)")
        )
        if o.descriptive_cases is None:
            rec = CalibrationRecord(
                **base, **models, **largest, power_table=tuple(rows),
                power_at_threshold=None,
                recommended_cases=None, **none, verdict=NOT_REACHED, reason=reason,
            )  # fmt: skip
            return Calibration(rec, None)
        cases = o.descriptive_cases
        at = next(r for r in rows if r.cases == cases)  # the search tried every count to bound
        verdict = DESCRIPTIVE
        reason += (
            f"; the declared descriptive count, {cases} cases, has power {at.power:.3f} at "
            f"effect {o.effect:g}: its decision is reported, underpowered"
        )
    else:
        reason = (
            f"lengths {', '.join(map(str, chosen))}: {cases} cases reach power "
            f"{rows[-1].power:.3f} at effect {o.effect:g}"
        )
    pilot_protocol = load_prepared(Path(pilot_dir) / PREPARED_DIR).protocol
    n_cases = cases

    def candidate(materials_seed: int) -> dict[str, Any]:
        # One function for every seed tried and for the one chosen: what was checked for
        # overlap is exactly what is written.
        return calibrated_protocol(design, chosen, n_cases, materials_seed, version)

    seed = calibrated_seed(design["seeds"]["materials"], pilot_protocol, candidate, records)
    protocol = candidate(seed.seed)
    rec = CalibrationRecord(
        **base, **models, **largest, power_table=tuple(rows),
        power_at_threshold=threshold_power(model, o, protocol), recommended_cases=cases,
        protocol_version=version, materials_seed=seed, verdict=verdict, reason=reason,
    )  # fmt: skip
    label = "a SIMULATED pilot" if inp.simulation else "pilot"
    kind = "descriptive, underpowered: " if verdict == DESCRIPTIVE else ""
    protocol["description"] = (
        f"{design['protocol_id']} v{version}: v{design['version']} calibrated on {label} "
        f"{rec.pilot.journal_sha256[:12]} (held-out materials): {kind}lengths "
        f"{', '.join(map(str, chosen))}, {cases} cases"
    )
    protocol["rationale"] = to_plain(rec)
    protocol_mod.validate(protocol, "calibrated protocol")
    return Calibration(rec, protocol)


# The pilot's numbers per background length, each with an exact binomial interval.
#
# Accuracies count protocol-valid responses only (a failure is never a wrong answer); the failure
# rate counts protocol failures, indeterminate ones included, among the requests that were sent.
# Every proportion carries its Clopper–Pearson interval: the exact binomial interval, from the
# beta distribution's quantiles.
#
# The ends and the middle are roles (``Roles``): B and E against M in the reference design, and in
# a depth design the first and last depth against the interior depths.


@dataclass(frozen=True)
class Proportion:
    """``successes`` of ``trials``, the estimate and its 95% Clopper–Pearson interval."""

    successes: int
    trials: int
    estimate: float | None
    lower: float | None
    upper: float | None

    @classmethod
    def of(cls, successes: int, trials: int) -> Proportion:
        interval = clopper_pearson(successes, trials)
        if interval is None:
            return cls(successes, trials, None, None, None)
        return cls(successes, trials, successes / trials, interval[0], interval[1])

    def text(self) -> str:
        """``27/32 0.844 [0.672, 0.947]``, or ``0/0 —`` without a trial."""
        if self.estimate is None or self.lower is None or self.upper is None:
            return f"{self.successes}/{self.trials} —"
        return (
            f"{self.successes}/{self.trials} {self.estimate:.3f} "
            f"[{self.lower:.3f}, {self.upper:.3f}]"
        )


class Roles(NamedTuple):
    """Which conditions are the ends and which the middle of a design's position curve (in
    memory only, never written)."""

    ends: tuple[str, ...] = ("B", "E")
    middle: tuple[str, ...] = ("M",)
    conditions: tuple[str, ...] = ("B", "M", "E", "A")

    @classmethod
    def of(cls, protocol: dict[str, Any]) -> Roles:
        """The reference roles, or a depth design's: first and last depth, the interior."""
        if "depths" not in protocol:
            return cls()
        conditions = tuple(str(c) for c in protocol["conditions"])
        present = tuple(c for c in conditions if c != "A")
        return cls((present[0], present[-1]), present[1:-1], conditions)


@dataclass(frozen=True)
class LengthCounts:
    """What the pilot measured at one background length (both similarities pooled).

    ``end`` is B and E (a depth design: its first and last depth), ``middle`` M (the interior
    depths).
    """

    length: int
    end: Proportion  # the ends: correct among valid (the band rule reads this one)
    end_low: Proportion  # the ends under low similarity
    end_high: Proportion  # the ends under high similarity
    middle: Proportion  # the middle under low similarity: the power model's baseline
    middle_high: Proportion  # the middle under high similarity: shown, never used to calibrate
    refusal: Proportion  # A: UNKNOWN among valid
    failures: Proportion  # protocol failures among the requests sent
    unexecuted: int
    failure_kinds: dict[str, int]
    error_kinds: dict[str, int]


def _accuracy(rows: Iterable[Outcome]) -> Proportion:
    valid = [r for r in rows if r.valid]
    return Proportion.of(sum(r.status == "correct" for r in valid), len(valid))


def length_counts(
    outcomes: Iterable[Outcome], length: int, roles: Roles | None = None
) -> LengthCounts:
    """The pilot's proportions at one length."""
    r = roles or Roles()
    rows = [o for o in outcomes if o.length == length]
    sent = [o for o in rows if o.status != "unexecuted"]
    failed = [o for o in sent if o.status == "protocol_failure"]
    return LengthCounts(
        length=length,
        end=_accuracy(o for o in rows if o.condition in r.ends),
        end_low=_accuracy(o for o in rows if o.condition in r.ends and o.similarity == "low"),
        end_high=_accuracy(o for o in rows if o.condition in r.ends and o.similarity == "high"),
        middle=_accuracy(o for o in rows if o.condition in r.middle and o.similarity == "low"),
        middle_high=_accuracy(
            o for o in rows if o.condition in r.middle and o.similarity == "high"
        ),
        refusal=_accuracy(o for o in rows if o.condition == "A"),
        failures=Proportion.of(len(failed), len(sent)),
        unexecuted=len(rows) - len(sent),
        failure_kinds=dict(sorted(Counter(o.kind for o in failed).items())),
        error_kinds=dict(sorted(Counter(o.kind for o in rows if o.status == "error").items())),
    )


def pooled(
    outcomes: Iterable[Outcome],
    lengths: Iterable[int],
    conditions: tuple[str, ...] = ("B", "M", "E", "A"),
) -> dict[str, Proportion]:
    """Each condition's accuracy per similarity and the failure rate over several lengths.

    These are the power model's inputs for a design of those lengths: ``B``, ``M``, ``E``, ``A``
    under low similarity, ``high B`` … ``high A`` under high (``high M`` is shown, not used).
    Never an end accuracy pooled over similarities: that pools a ceiling with a floor.
    """
    chosen = set(lengths)
    rows = [o for o in outcomes if o.length in chosen]
    sent = [o for o in rows if o.status != "unexecuted"]
    out = {}
    for sim, prefix in (("low", ""), ("high", "high ")):
        for c in conditions:
            cell = (o for o in rows if o.condition == c and o.similarity == sim)
            out[prefix + c] = _accuracy(cell)
    out["failure"] = Proportion.of(sum(o.status == "protocol_failure" for o in sent), len(sent))
    return out
