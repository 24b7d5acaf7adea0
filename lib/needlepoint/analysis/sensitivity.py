"""`needlepoint power` and the power notebook: the sensitivity table, its curve and its files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from needlepoint.analysis.figure import stable_figure
from needlepoint.analysis.power import PowerModel, PowerStudy, power_grid
from needlepoint.analysis.record import AnalysisParameters


def detectable_effect(table: Any, target: float = 0.8) -> dict[int, dict[str, float | None]]:
    """Smallest grid effect with power >= target per case count, and a linear interpolation."""
    out: dict[int, dict[str, float | None]] = {}
    for n, group in table.groupby("cases", sort=True):
        g = group.sort_values("effect")
        eff, pw = g["effect"].to_list(), g["power"].to_list()
        hit = next((i for i, p in enumerate(pw) if p >= target), None)
        if hit is None:
            out[int(n)] = {"grid": None, "interpolated": None}
        elif hit == 0:
            out[int(n)] = {"grid": eff[0], "interpolated": eff[0]}
        else:
            frac = (target - pw[hit - 1]) / (pw[hit] - pw[hit - 1])
            out[int(n)] = {
                "grid": eff[hit],
                "interpolated": eff[hit - 1] + frac * (eff[hit] - eff[hit - 1]),
            }
    return out


def model_lines(model: PowerModel, stop: int) -> list[str]:
    """The model in words: rates per similarity, the effects they allow, spread, failures."""
    hb, he, ha = model.high("B"), model.high("E"), model.high("A")
    own = model.own_effect
    lines = [
        f"model: P(correct) under low similarity B {model.acc_b:g}, M {model.acc_m:g}, "
        f"E {model.acc_e:g}, A {model.acc_a:g}; under high similarity B {hb:g}, E {he:g}, "
        f"A {ha:g}, and M {model.largest_effect:g} minus the added middle loss",
        f"these rates allow added middle losses from {max(0.0, model.smallest_effect):.4g} to "
        f"{model.largest_effect:.4g}"
        + ("" if own is None else f"; their own (high M {model.high_m:g}) is {own:.4g}"),
        f"between-case spread: SD {model.case_sd:g} on the logit scale (0: every case alike); "
        f"protocol-failure rate {model.failure_rate:g}; run stops after {stop} consecutive "
        "failures",
    ]
    return lines


def sensitivity_lines(
    model: PowerModel | None = None,
    study: PowerStudy | None = None,
    *,
    prepared: str | Path | None = None,
    out: str | Path | None = None,
) -> list[str]:
    """The `needlepoint power` output as lines; with ``out`` also power.csv and the curve.

    ``prepared`` takes the design and decision rule from a prepared folder instead of the
    reference protocol.
    """
    model = PowerModel() if model is None else model
    study = PowerStudy() if study is None else study
    protocol = None
    if prepared is not None:
        from needlepoint.design.prepared import load_prepared

        protocol = load_prepared(prepared).protocol
    if protocol is None:
        from needlepoint.design.protocol import reference_protocol

        protocol = reference_protocol()
    table = power_grid(model, study, protocol)
    a = AnalysisParameters.of(protocol)
    stop = model.stop_after
    if stop is None:
        stop = protocol["runner"]["max_consecutive_failures"]
    lines = [
        "Design sensitivity (seeded simulation of hypothetical models; not a model result)",
        *model_lines(model, stop),
        f"decision: difference >= {a.threshold:g} and {100 * a.confidence:g}% lower bound "
        f"> 0, at least {a.min_complete_cases} complete cases; exact bootstrap up to "
        f"{a.exact_bootstrap_max_cases} cases, else {a.bootstrap_resamples} resamples "
        f"(seed {a.bootstrap_seed})",
        f"{study.simulations} simulated runs per point, seed {study.seed}",
        "",
        "P(supported) ± its Monte Carlo standard error, by added middle loss (rows) and "
        "number of cases (columns):",
    ]
    wide = table.pivot(index="effect", columns="cases", values="power")
    se = table.pivot(index="effect", columns="cases", values="power_se")
    lines.append("effect  " + "  ".join(f"{n:>7} cases" for n in wide.columns))
    for effect, row in wide.iterrows():
        cells = (f"{p:6.3f} ± {e:.3f}" for p, e in zip(row, se.loc[effect], strict=True))
        lines.append(f"{effect:6.2f}  " + "  ".join(f"{c:>13}" for c in cells))
    lines.append("")
    for n, d in detectable_effect(table).items():
        if d["grid"] is None:
            lines.append(f"{n} cases: 80% power is not reached within the grid")
        else:
            lines.append(
                f"{n} cases: smallest added middle loss detected with >= 80% probability: "
                f"{d['grid']:.2f} on the grid (about {d['interpolated']:.3f} interpolated)"
            )
    if out is not None:
        from needlepoint.jsonio import write_bytes_atomic

        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(
            folder / "power.csv", table.to_csv(index=False, lineterminator="\n").encode()
        )
        power_curve(table, folder / "power_curve.png", threshold=float(a.threshold))
        lines.append(f"wrote {folder.name}/power.csv and {folder.name}/power_curve.png")
    return lines


def power_curve(
    table: Any, path: str | Path, target: float = 0.8, threshold: float | None = None
) -> Path:
    """P(decision = supported) against the added middle loss, one line per number of cases."""
    title = "Design sensitivity: probability that the decision is 'supported'"
    with stable_figure((7.0, 4.2), (0.8, 0.3, 0.5, 0.6), title, False, path) as fig:
        ax = fig.subplots()
        for n_cases, group in table.groupby("cases", sort=True):
            ax.plot(group["effect"], group["power"], marker="o", ms=3, label=f"{n_cases} cases")
        ax.axhline(target, color="grey", ls=":", lw=1, label=f"{target:.0%}")
        if threshold is not None:
            ax.axvline(threshold, color="#b2182b", ls="--", lw=1, label=f"threshold {threshold:g}")
        ax.set_xlabel("added middle loss under high similarity (true difference)")
        ax.set_ylabel("P(supported)")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=8)
    return Path(path)
