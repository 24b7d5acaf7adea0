"""The pilot notebook's figures: accuracy by length against the band, and the power curve.

Both are stable PNGs (``analysis.figures.stable_figure``): the same calibration always gives the
same bytes, and a simulated pilot carries the simulation banner in the title.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from needlepoint.analysis.figures import stable_figure
from needlepoint.pilot import calibration_record as cr
from needlepoint.pilot.calibrate import REQUESTS_PER_PAIR

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
    from needlepoint.analysis.power import PowerStudy, power_grid
    from needlepoint.pilot.calibrate import calibrated_protocol

    if rec.power_model is None or not rec.chosen_lengths:
        raise ValueError("this calibration has no power model")
    protocol = calibrated_protocol(design, rec.chosen_lengths, max(cases), 0, rec.design.version)
    r = rec.rules
    study = PowerStudy(cases=cases, effects=effects, simulations=r.simulations, seed=r.seed)
    return power_grid(rec.power_model, study, protocol)


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
