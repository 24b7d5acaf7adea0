"""What `calibrate` prints and the pilot notebook shows: the per-length table and the verdict.

Only the record is read, so the lines are the same wherever the calibration ran: no paths, no
durations.
"""

from __future__ import annotations

from typing import Any

from needlepoint.pilot import calibration_record as cr
from needlepoint.pilot.heldout import RECORD_RULE

SIMULATED = "SIMULATED pilot - not a model result"


def _head(rec: cr.CalibrationRecord) -> list[str]:
    r, d = rec.rules, rec.design
    label = f"{SIMULATED}: " if rec.pilot.simulation else ""
    return [
        f"{label}calibration of {d.protocol_id} v{d.version} from the pilot (protocol "
        f"v{rec.pilot.protocol_version}, materials seed {rec.pilot.materials_seed}, journal "
        f"{rec.pilot.journal_sha256[:16]})",
        f"rules: end (B+E) accuracy in [{r.band_low:g}, {r.band_high:g}]; a case's 8 requests "
        f"at a length all valid with probability >= {r.min_pair_complete:g}; "
        f"{r.target_power:.0%} power at added middle loss {r.effect:g}",
    ]


def table_rows(rec: cr.CalibrationRecord) -> list[dict[str, Any]]:
    """One row per pilot length: counts, estimates and 95% Clopper–Pearson intervals."""
    rows = []
    for c, v in zip(rec.lengths, rec.verdicts, strict=True):
        row: dict[str, Any] = {"length": c.length}
        for name in ("end", "end_low", "end_high", "middle", "middle_high", "refusal", "failures"):
            p = getattr(c, name)
            row[name] = f"{p.successes}/{p.trials}"
            row[f"{name}_rate"] = p.estimate
            row[f"{name}_ci"] = None if p.lower is None else f"[{p.lower:.3f}, {p.upper:.3f}]"
        row["unexecuted"] = c.unexecuted
        row["pair_complete"] = v.pair_complete
        row["qualifies"] = v.qualifies
        row["reason"] = v.reason
        row["failure_kinds"] = ", ".join(f"{k} {n}" for k, n in c.failure_kinds.items())
        row["error_kinds"] = ", ".join(f"{k} {n}" for k, n in c.error_kinds.items())
        rows.append(row)
    return rows


def table(rec: cr.CalibrationRecord) -> Any:
    """The pilot table as a pandas DataFrame, for the notebook."""
    import pandas as pd

    return pd.DataFrame(table_rows(rec))


def calibration_lines(rec: cr.CalibrationRecord) -> list[str]:
    """The calibration as printed lines: table, power model, search and recommendation."""
    return [
        *_head(rec),
        *_length_lines(rec),
        *_model_lines(rec),
        *_search_lines(rec),
        *_recommendation_lines(rec),
    ]


def notebook_lines(rec: cr.CalibrationRecord) -> list[str]:
    """What the notebook prints: the lines of ``calibration_lines`` that no table shows (the
    per-length table is ``table``, the case-count search ``power_frame``)."""
    lines = [*_head(rec), *_model_lines(rec), *_recommendation_lines(rec)]
    # printed, not rendered: a path in backticks (a rejected seed's overlap) shows them bare
    return [line.replace("`", "") for line in lines]


def power_frame(rec: cr.CalibrationRecord) -> Any:
    """The case-count search as a table: cases, power at the chosen effect, its Monte Carlo
    standard error, and whether it reaches the target power."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "cases": r.cases,
                f"power at {rec.rules.effect:g}": round(r.power, 3),
                "± (s.e.)": round(r.power_se, 3),
                f"reaches {rec.rules.target_power:.0%}": r.power >= rec.rules.target_power,
            }
            for r in rec.power_table
        ]
    )


def _length_lines(rec: cr.CalibrationRecord) -> list[str]:
    lines = []
    for c, v in zip(rec.lengths, rec.verdicts, strict=True):
        lines.append(
            f"length {c.length}: end {c.end.text()} (low {c.end_low.text()}, high "
            f"{c.end_high.text()}); middle (low) {c.middle.text()}; "
            f"middle (high, not used) {c.middle_high.text()}; refusal {c.refusal.text()}; "
            f"failures {c.failures.text()}"
            + (
                f" ({', '.join(f'{k} {n}' for k, n in c.failure_kinds.items())})"
                if c.failure_kinds
                else ""
            )
            + (f", {c.unexecuted} unexecuted" if c.unexecuted else "")
        )
        lines.append(f"  -> {'QUALIFIES' if v.qualifies else 'excluded'}: {v.reason}")
    return lines


def _model_lines(rec: cr.CalibrationRecord) -> list[str]:
    m = rec.power_model
    if m is None:
        return []
    high_m = "—" if m.high_m is None else f"{m.high_m:.3f}"
    return [
        f"power model (pilot, lengths {', '.join(map(str, rec.chosen_lengths))}): low "
        f"similarity B {m.acc_b:.3f}, M {m.acc_m:.3f}, E {m.acc_e:.3f}, A {m.acc_a:.3f}; "
        f"high similarity B {m.high('B'):.3f}, E {m.high('E'):.3f}, A {m.high('A'):.3f} "
        f"(M {high_m}: shown, the effect sets it); failure rate {m.failure_rate:.3f}, run "
        f"stops after {m.stop_after} consecutive failures",
        f"largest added middle loss these rates allow: {m.largest_effect:.3f} (the pilot's "
        f"own: {'—' if m.own_effect is None else f'{m.own_effect:.3f}'})",
    ]


def _search_lines(rec: cr.CalibrationRecord) -> list[str]:
    if not rec.power_table:
        return []
    shown = ", ".join(f"{r.cases}: {r.power:.3f} ± {r.power_se:.3f}" for r in rec.power_table)
    return [
        f"power at {rec.rules.effect:g} by case count ({rec.rules.simulations} simulated "
        f"runs each, seed {rec.rules.seed}): {shown}"
    ]


def _recommendation_lines(rec: cr.CalibrationRecord) -> list[str]:
    if rec.verdict != cr.RECOMMENDED or rec.materials_seed is None:
        return [f"NO PROTOCOL WRITTEN: {rec.verdict}: {rec.reason}"]
    s = rec.materials_seed
    origin = "the design's own" if s.attempt == 0 else f"derived, attempt {s.attempt}"
    also = " and from every design on record" if s.rule.endswith(RECORD_RULE) else ""
    return [
        f"recommended: v{rec.protocol_version} with lengths "
        f"{', '.join(map(str, rec.chosen_lengths))} and {rec.recommended_cases} cases "
        f"({rec.reason}); at the threshold itself power is {rec.power_at_threshold:.3f}",
        f"materials seed {s.seed} ({origin}; disjoint from the pilot's materials{also})",
        *[f"  seed attempt {r.attempt} rejected: {r.overlap}" for r in s.rejected],
    ]
