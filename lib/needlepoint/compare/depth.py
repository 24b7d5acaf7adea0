"""Runs of one depth design side by side, each analysed alone (never pooled).

``needlepoint compare`` routes runs of a depth design here after the usual refusals
(``document.load_runs``: one design fingerprint, each run once, simulated beside live only when
allowed). Each run gets its own depth analysis in ``--out/runs/<k>/`` exactly as ``analyze``
writes it; ``comparison.md`` sets their decisions, end contrasts and near-name coefficients side
by side, and ``comparison_depth.png`` draws every run's accuracy against depth.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from needlepoint.analysis.depth import SIMILARITIES, DepthAnalysis, Interval, analyze_depth
from needlepoint.analysis.depth.report import write_depth
from needlepoint.analysis.figures import add_note, stable_figure
from needlepoint.analysis.primary import SIMULATION_BANNER
from needlepoint.compare.document import LoadedRun, run_names
from needlepoint.safeio import write_bytes_atomic

FIGURE = "comparison_depth.png"
_COLOURS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d")


def _iv(p: Interval) -> str:
    if p.estimate is None:
        return "no estimate"
    return f"{p.estimate:.4g} [{p.lower:.4g}, {p.upper:.4g}]"


def _interval(result: DepthAnalysis) -> str:
    return _iv(result.primary)


def _near(result: DepthAnalysis) -> str:
    model = next(m for m in result.models if m.similarity == "high")
    for c in model.coefficients:
        if c.term == "near names before":
            return f"{c.estimate:+.3g} [{c.lower:.3g}, {c.upper:.3g}]"
    return model.note or "no estimate"


def _figure(names: Sequence[str], results: Sequence[DepthAnalysis], path: Path) -> None:
    first = results[0]
    present = [c for c in first.conditions if c != "A"]
    simulated = any(r.simulation for r in results)
    with stable_figure(
        (9.0, 3.9), (0.7, 0.2, 0.55, 0.95), "Accuracy against depth, by run", simulated, path
    ) as fig:
        axes = fig.subplots(1, 2, sharey=True)
        for ax, sim in zip(axes, SIMILARITIES, strict=True):
            for k, (name, r) in enumerate(zip(names, results, strict=True)):
                xs, ys = [], []
                for depth, cond in zip(r.depths, present, strict=True):
                    correct = sum(r.accuracy[(sim, n, cond)][0] for n in r.lengths)
                    valid = sum(r.accuracy[(sim, n, cond)][1] for n in r.lengths)
                    if valid:
                        xs.append(depth)
                        ys.append(correct / valid)
                ax.plot(xs, ys, marker="o", color=_COLOURS[k % len(_COLOURS)], label=name)
            ax.set_title(f"{sim} similarity (lengths pooled)", fontsize=10)
            ax.set_xlabel("depth of the target")
            ax.set_xticks(list(first.depths))
            ax.set_xticklabels([f"{x:g}" for x in first.depths])
            ax.set_ylim(-0.05, 1.05)
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("accuracy")
        axes[-1].legend(loc="lower left", fontsize=8)
        add_note(fig, "each run analysed alone; accuracy = exact-correct / valid answers")


def compare_depth(
    runs: Sequence[LoadedRun], out: Path, figures: bool = True, labels: Sequence[str] | None = None
) -> list[str]:
    """Analyse each run alone, write them and the comparison; return the lines to print."""
    names = run_names(runs, labels)
    results = [analyze_depth(r.input) for r in runs]
    out.mkdir(parents=True, exist_ok=True)
    lines = [SIMULATION_BANNER] if any(r.simulation for r in results) else []
    table = [
        "| run | decision | contrast (high − low) | high: first − interior | "
        "high: last − interior | high: per near name before |",
        "|---|---|---|---|---|---|",
    ]
    for k, (name, result) in enumerate(zip(names, results, strict=True), start=1):
        write_depth(result, out / "runs" / str(k), figures)
        first, last = result.ends["high"]
        table.append(
            f"| {name} | {result.decision} | {_interval(result)} | "
            f"{_iv(first)} | {_iv(last)} | {_near(result)} |"
        )
        lines.append(f"{name}: {result.decision}, {result.contrast} {_interval(result)}")
    doc = ["# Comparison of depth runs", ""]
    if any(r.simulation for r in results):
        doc += [f"**{SIMULATION_BANNER}**", ""]
    doc += [
        f"Design: depths {', '.join(f'{d:g}' for d in results[0].depths)}; preregistered "
        f"contrast {results[0].contrast}. Each run is analysed alone (runs/<k>/), never pooled.",
        "",
        *table,
    ]
    if figures:
        _figure(names, results, out / FIGURE)
        doc += ["", f"![accuracy against depth]({FIGURE})"]
    write_bytes_atomic(out / "comparison.md", ("\n".join(doc) + "\n").encode("utf-8"))
    lines.append(f"wrote comparison.md, runs/1..{len(runs)} and {int(figures)} figure")
    return lines
