"""What a calibration leaves: its files, the lines `calibrate` prints, and the pilot figures.

What `calibrate` prints and the pilot notebook shows: the per-length table and the verdict.

Only the record is read, so the lines are the same wherever the calibration ran: no paths, no
durations.

The calibration's files: the new protocol version and the calibration record.

Neither is ever overwritten: a calibrated version is a frozen decision. Writing the very same
bytes again is allowed (a notebook re-executed in its folder); different bytes are refused.

The pilot notebook's figures: accuracy by length against the band, and the power curve.

Both are stable PNGs (``analysis.figures.stable_figure``): the same calibration always gives the
same bytes, and a simulated pilot carries the simulation banner in the title.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from needlepoint.analysis.figures import stable_figure
from needlepoint.design.protocol import protocol_bytes
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import write_bytes_atomic
from needlepoint.pilot import calibrate as cr
from needlepoint.pilot.calibrate import (
    CALIBRATION_FORMAT,
    CALIBRATION_VERSION,
    REQUESTS_PER_PAIR,
    CalibrationRecord,
)
from needlepoint.pilot.folder import RECORD_RULE
from needlepoint.pilot.record import read_versioned, record_bytes


def _write_once(path: Path, data: bytes) -> Path:
    if path.is_dir() or (path.exists() and path.read_bytes() != data):
        raise NeedlepointError(f"{path}: exists; a calibration never overwrites a file")
    if not path.parent.is_dir():
        raise NeedlepointError(f"{path.parent}: no such folder")
    if not path.exists():
        write_bytes_atomic(path, data)
    return path


def write_protocol(protocol: dict[str, Any], out: str | Path) -> Path:
    """Write the calibrated protocol as a protocol file, ready for `needlepoint prepare`."""
    return _write_once(Path(out), protocol_bytes(protocol))


def write_report(record: CalibrationRecord, out: str | Path) -> Path:
    """Write the calibration record on its own (also when no protocol is recommended)."""
    return _write_once(Path(out), record_bytes(record))


def read_report(path: str | Path) -> CalibrationRecord:
    """Read a calibration record file, refusing another format or version."""
    return read_versioned(Path(path), CalibrationRecord, CALIBRATION_FORMAT, CALIBRATION_VERSION)


def check_new(out: str | Path) -> Path:
    """Refuse an output file that exists already or whose folder does not: before any work."""
    path = Path(out)
    if path.exists():
        raise NeedlepointError(f"{path}: exists; a calibration never overwrites a file")
    if not path.parent.is_dir():
        raise NeedlepointError(f"{path.parent}: no such folder")
    return path


SIMULATED = "SIMULATED pilot - not a model result"


def _head(rec: cr.CalibrationRecord) -> list[str]:
    r, d = rec.rules, rec.design
    label = f"{SIMULATED}: " if rec.pilot.simulation else ""
    if d.depths is not None:
        n = 2 * (len(d.depths) + 1)  # every depth and A, under both similarities
        ends, effect = "end (first and last depth)", "contrast (high − low similarity)"
    else:
        n, ends, effect = REQUESTS_PER_PAIR, "end (B+E)", "added middle loss"
    return [
        f"{label}calibration of {d.protocol_id} v{d.version} from the pilot (protocol "
        f"v{rec.pilot.protocol_version}, materials seed {rec.pilot.materials_seed}, journal "
        f"{rec.pilot.journal_sha256[:16]})",
        f"rules: {ends} accuracy in [{r.band_low:g}, {r.band_high:g}]; a case's {n} requests "
        f"at a length all valid with probability >= {r.min_pair_complete:g}; "
        f"{r.target_power:.0%} power at {effect} {r.effect:g}",
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


def _depth_model_lines(rec: cr.CalibrationRecord) -> list[str]:
    m = rec.depth_model
    if m is None:
        return []
    weights = [*m.weights, 0.0]
    low = ", ".join(f"{c} {v:.3f}" for c, v in zip(m.conditions, m.low, strict=True))
    shown = " (shown, the effect sets it)"
    high = ", ".join(
        f"{c} {'—' if v is None else f'{v:.3f}'}" + (shown if w < 0 else "")
        for c, v, w in zip(m.conditions, m.high, weights, strict=True)
    )
    own = "—" if m.own_effect is None else f"{m.own_effect:.3f}"
    return [
        f"power model (pilot, lengths {', '.join(map(str, rec.chosen_lengths))}): low "
        f"similarity {low}; high similarity {high}; failure rate {m.failure_rate:.3f}, run "
        f"stops after {m.stop_after} consecutive failures",
        f"largest contrast these rates allow: {m.largest_effect:.3f} (the pilot's own: {own})",
    ]


def _model_lines(rec: cr.CalibrationRecord) -> list[str]:
    m = rec.power_model
    if m is None:
        return _depth_model_lines(rec)
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
    if rec.verdict not in cr.WRITES_PROTOCOL or rec.materials_seed is None:
        return [f"NO PROTOCOL WRITTEN: {rec.verdict}: {rec.reason}"]
    s = rec.materials_seed
    origin = "the design's own" if s.attempt == 0 else f"derived, attempt {s.attempt}"
    also = " and from every design on record" if s.rule.endswith(RECORD_RULE) else ""
    head = "recommended" if rec.verdict == cr.RECOMMENDED else "DESCRIPTIVE (power not reached)"
    return [
        f"{head}: v{rec.protocol_version} with lengths "
        f"{', '.join(map(str, rec.chosen_lengths))} and {rec.recommended_cases} cases "
        f"({rec.reason}); at the threshold itself power is {rec.power_at_threshold:.3f}",
        f"materials seed {s.seed} ({origin}; disjoint from the pilot's materials{also})",
        *[f"  seed attempt {r.attempt} rejected: {r.overlap}" for r in s.rejected],
    ]


_SERIES = (
    ("end", "end (B and E)", "#2166ac", "o"),
    ("end_low", "end, low similarity", "#92c5de", "v"),
    ("end_high", "end, high similarity", "#053061", "D"),
    ("middle", "middle (M, low similarity)", "#b2182b", "s"),
    ("refusal", "refusal (A)", "#4d9221", "^"),
)


def _errorbars(
    ax: Any, xs: list[float], props: list[Any], color: str, marker: str, label: str
) -> None:
    known = [(x, p) for x, p in zip(xs, props, strict=True) if p.estimate is not None]
    if not known:
        return
    ax.errorbar(
        [x for x, _ in known],
        [p.estimate for _, p in known],
        yerr=[
            [p.estimate - p.lower for _, p in known],
            [p.upper - p.estimate for _, p in known],
        ],
        color=color,
        marker=marker,
        ms=5,
        capsize=3,
        lw=1.2,
        label=label,
    )


def accuracy_by_length(rec: cr.CalibrationRecord, path: str | Path) -> Path:
    """Accuracy by background length with 95% Clopper–Pearson intervals, the band and failures."""
    title = "Pilot: accuracy by length with 95% exact intervals"
    lengths = [c.length for c in rec.lengths]
    xs = list(range(len(lengths)))
    # The bottom margin holds two-line ticks (length, chosen or excluded) and the axis label.
    with stable_figure((7.5, 5.5), (0.8, 2.3, 0.5, 0.95), title, rec.pilot.simulation, path) as fig:
        top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
        r = rec.rules
        top.axhspan(r.band_low, r.band_high, color="#fee08b", alpha=0.5, label="band (end)")
        for k, (name, label, color, marker) in enumerate(_SERIES):
            shifted = [x + 0.07 * (k - (len(_SERIES) - 1) / 2) for x in xs]
            _errorbars(top, shifted, [getattr(c, name) for c in rec.lengths], color, marker, label)
        top.set_ylim(-0.03, 1.03)
        top.set_ylabel("accuracy (correct / valid)")
        top.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        _errorbars(bottom, xs, [c.failures for c in rec.lengths], "#762a83", "D", "failure rate")
        limit = 1 - r.min_pair_complete ** (1 / REQUESTS_PER_PAIR)
        bottom.axhline(limit, color="#762a83", ls=":", lw=1, label=f"limit {limit:.3f}")
        bottom.set_ylim(-0.03, 1.03)
        bottom.set_ylabel("failures / sent")
        bottom.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ticks = [
            f"{n}\n{'chosen' if v.qualifies else 'excluded'}"
            for n, v in zip(lengths, rec.verdicts, strict=True)
        ]
        bottom.set_xticks(xs, ticks)
        bottom.set_xlabel("background length (records)")
    return Path(path)


def power_table(
    rec: cr.CalibrationRecord,
    design: dict[str, Any],
    cases: tuple[int, ...],
    effects: tuple[float, ...],
) -> Any:
    """Power by added middle loss under the pilot's accuracies, at the chosen lengths.

    ``design`` gives the orders, runner and decision rule (the pilot's design.json or the
    calibrated protocol). The seed and simulations are the search's, so the power at the
    calibration's effect for a count it tried is exactly the one in its power table.
    """
    from needlepoint.analysis.power import PowerStudy
    from needlepoint.pilot.calibrate import calibrated_protocol, power_rows

    if rec.model is None or not rec.chosen_lengths:
        raise ValueError("this calibration has no power model")
    protocol = calibrated_protocol(design, rec.chosen_lengths, max(cases), 0, rec.design.version)
    r = rec.rules
    study = PowerStudy(cases=cases, effects=effects, simulations=r.simulations, seed=r.seed)
    return power_rows(rec.model, study, protocol)


def power_curve(table: Any, rec: cr.CalibrationRecord, path: str | Path) -> Path:
    """P(supported) against the added middle loss under the pilot's accuracies, by case count.

    Marks the target power, the design's threshold and the calibration's effect; the
    recommended count is drawn heavier.
    """
    title = "Power under the pilot's accuracies: P(decision = supported)"
    r = rec.rules
    with stable_figure((7.5, 4.4), (0.8, 2.3, 0.5, 0.6), title, rec.pilot.simulation, path) as fig:
        ax = fig.subplots()
        for n_cases, group in table.groupby("cases", sort=True):
            heavy = n_cases == rec.recommended_cases
            ax.plot(
                group["effect"],
                group["power"],
                marker="o",
                ms=3,
                lw=2.2 if heavy else 1.0,
                label=f"{n_cases} cases" + (" (recommended)" if heavy else ""),
            )
        ax.axhline(r.target_power, color="grey", ls=":", lw=1, label=f"{r.target_power:.0%}")
        ax.axvline(r.threshold, color="#b2182b", ls="--", lw=1, label=f"threshold {r.threshold:g}")
        ax.axvline(r.effect, color="#1a9850", ls="-.", lw=1, label=f"effect {r.effect:g}")
        if rec.largest_effect is not None:
            ax.axvline(
                rec.largest_effect, color="black", ls=":", lw=1.2,
                label=f"largest attainable {rec.largest_effect:.3g}",
            )  # fmt: skip
        ax.set_xlabel("added middle loss under high similarity (true difference)")
        ax.set_ylabel("P(supported)")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return Path(path)
