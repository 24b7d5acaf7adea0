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
from needlepoint.pilot import calibration_record as cr
from needlepoint.pilot.calibration_limits import (
    REQUESTS_PER_PAIR,
    CalibrationOptions,
    case_bound,
    check_effect,
    check_options,
    check_search,
)
from needlepoint.pilot.folder import read_design
from needlepoint.pilot.heldout import OnRecord, calibrated_seed
from needlepoint.pilot.rates import pilot_model, unattainable
from needlepoint.pilot.record import PREPARED_DIR, RUN_DIR, design_ref, read_pilot_record
from needlepoint.pilot.stats import LengthCounts, length_counts
from needlepoint.schema import to_plain


@dataclass(frozen=True)
class Calibration:
    """A calibration's record and, when it recommends one, the new protocol."""

    record: cr.CalibrationRecord
    protocol: dict[str, Any] | None


def verdict_of(c: LengthCounts, o: CalibrationOptions) -> cr.LengthVerdict:
    """Apply rule 1 to one length."""
    f = c.failures.estimate
    pair = None if f is None else (1 - f) ** REQUESTS_PER_PAIR
    end = c.end.estimate
    in_band = end is not None and o.band_low <= end <= o.band_high
    ok = False
    if end is None:
        reason = "no valid B or E answer"
    elif end < o.band_low:
        reason = f"end accuracy {end:.3f} is below the band (floor side)"
    elif end > o.band_high:
        reason = f"end accuracy {end:.3f} is above the band (ceiling side)"
    elif pair is None or pair < o.min_pair_complete:
        shown = "unknown" if pair is None else f"{pair:.3f}"
        reason = f"failure rate leaves a pair complete with probability {shown} only"
    elif c.middle.trials == 0 or c.refusal.trials == 0:
        reason = "no valid M (low similarity) or A answer"
    else:
        ok = True
        reason = f"end accuracy {end:.3f} in the band; a pair complete with probability {pair:.3f}"
    return cr.LengthVerdict(c.length, pair, in_band, ok, reason)


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
) -> tuple[list[cr.PowerRow], int | None]:
    """Rule 3: the power table of every count tried, and the first count that meets it."""
    step = len(design["orders"])
    minimum = design["analysis"]["min_complete_cases"]
    rows: list[cr.PowerRow] = []
    # The simulation reads the design's orders, runner and analysis and the chosen lengths; the
    # case count comes from the study, and the seed and version play no part.
    protocol = {**design, "lengths": list(lengths)}
    for cases in range(step, case_bound(o, lengths) + 1, step):
        study = PowerStudy(
            cases=(cases,), effects=(o.effect,), simulations=o.simulations, seed=o.seed
        )
        row = cr.PowerRow.of(power_grid(model, study, protocol).iloc[0])
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
    rules = cr.CalibrationRules(
        o.band_low, o.band_high, o.min_pair_complete, design["analysis"]["threshold"],
        o.effect, o.target_power, o.complete_margin, o.max_cases, o.max_requests,
        o.simulations, o.seed,
    )  # fmt: skip
    base = dict(
        kind=cr.CALIBRATION_KIND,
        format=cr.CALIBRATION_FORMAT,
        version=cr.CALIBRATION_VERSION,
        package_version=needlepoint.__version__,
        pilot=cr.PilotRef(
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
        rec = cr.CalibrationRecord(
            **base,
            power_model=None,
            largest_effect=None,
            **empty,
            **none,
            verdict=cr.NO_LENGTH,
            reason=reason,
        )
        return Calibration(rec, None)
    model = pilot_model(inp, chosen, design)
    if isinstance(model, str):
        rec = cr.CalibrationRecord(
            **base,
            power_model=None,
            largest_effect=None,
            **empty,
            **none,
            verdict=cr.NO_LENGTH,
            reason=model,
        )
        return Calibration(rec, None)
    largest = dict(largest_effect=model.largest_effect)
    why = unattainable(model, o.effect, chosen)
    if why is not None:
        rec = cr.CalibrationRecord(
            **base, power_model=model, **largest, **empty, **none,
            verdict=cr.ABOVE_ATTAINABLE, reason=why,
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
        rec = cr.CalibrationRecord(
            **base, power_model=model, **largest, power_table=tuple(rows),
            power_at_threshold=None,
            recommended_cases=None, **none, verdict=cr.NOT_REACHED, reason=reason,
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
    rec = cr.CalibrationRecord(
        **base, power_model=model, **largest, power_table=tuple(rows),
        power_at_threshold=threshold_power(model, o, protocol), recommended_cases=cases,
        protocol_version=version, materials_seed=seed, verdict=cr.RECOMMENDED, reason=reason,
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
