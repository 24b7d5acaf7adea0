"""What the depth analysis writes and prints: depth.json, summary.md and the figures.

``needlepoint analyze`` routes a run of a depth design here (``analysis.depth`` computes); the
headline lines are printed, and the folder gets ``depth.json`` (versioned, sorted keys), a
``summary.md`` a reader can follow without the code, and the two figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.analysis.depth import (
    FORMAT,
    VERSION,
    DepthAnalysis,
    DepthRobustness,
    Interval,
    ModelFit,
)
from needlepoint.analysis.figures import add_note, stable_figure
from needlepoint.analysis.primary import SIMULATION_BANNER
from needlepoint.analysis.record import Contrast
from needlepoint.analysis.report import p_text
from needlepoint.design.schema import SIMILARITIES
from needlepoint.safeio import is_output_file, replaced_folder, write_bytes_atomic
from needlepoint.schema import (
    AddedLater,
    document_bytes,
    fields_plain,
    record_from_plain,
    versioned_from_json,
)

FIGURES = {"lines": "accuracy_by_depth.png", "heatmap": "depth_by_length_heatmap.png"}


# --- depth.json: one record per part, written and read through schema ----------------------


@dataclass(frozen=True)
class DepthCell:
    """Accuracy in one similarity × length × depth: correct of valid, and what was planned."""

    similarity: str
    length: int
    condition: str
    correct: int
    valid: int
    planned: int


@dataclass(frozen=True)
class ContrastWeights:
    """The preregistered contrast by name, and the weight of each depth in it."""

    name: str
    weights: tuple[float, ...]


@dataclass(frozen=True)
class DepthDecision(Interval):
    """The preregistered contrast's interval, and the decision read from it."""

    decision: str
    reason: str


@dataclass(frozen=True)
class Ends:
    """One similarity's end contrasts: first depth − interior mean, last depth − interior mean."""

    first_minus_interior: Interval
    last_minus_interior: Interval


@dataclass(frozen=True)
class Absent:
    """UNKNOWN answers among one similarity's valid answers."""

    unknown: int
    valid: int


@dataclass(frozen=True)
class NearNamed:
    """Wrong answers naming a near name before the target, after it, and all wrong answers."""

    before: int
    after: int
    wrong: int


@dataclass(frozen=True)
class DepthShape(AddedLater):
    """One similarity's shape verdict with its two end contrasts; ``length`` is written only
    for a row at one length (the row over every length has no such key)."""

    ADDED_LATER = ("length",)

    similarity: str
    verdict: str
    reason: str
    first_minus_interior: Contrast
    last_minus_interior: Contrast
    length: int | None = None


@dataclass(frozen=True)
class DepthDocument:
    """depth.json: the versioned document of one depth analysis."""

    format: str
    version: int
    simulation: bool
    depths: tuple[float, ...]
    conditions: tuple[str, ...]
    lengths: tuple[int, ...]
    contrast: ContrastWeights
    accuracy: tuple[DepthCell, ...]
    primary: DepthDecision
    robustness: DepthRobustness | None
    ends: dict[str, Ends]
    models: tuple[ModelFit, ...]
    absent: dict[str, Absent]
    near_named: dict[str, NearNamed]
    shapes: tuple[DepthShape, ...]

    @classmethod
    def from_plain(cls, value: dict[str, Any], where: str) -> DepthDocument:
        """A file written before ``near_named`` and ``robustness`` existed reads without them."""
        return record_from_plain(cls, {"near_named": {}, "robustness": None} | value, where)


def document(d: DepthAnalysis) -> DepthDocument:
    """The depth analysis as its versioned document."""
    return DepthDocument(
        format=FORMAT,
        version=VERSION,
        simulation=d.simulation,
        depths=d.depths,
        conditions=d.conditions,
        lengths=d.lengths,
        contrast=ContrastWeights(d.contrast, d.weights),
        accuracy=tuple(DepthCell(s, n, c, *v) for (s, n, c), v in d.accuracy.items()),
        primary=DepthDecision(**fields_plain(d.primary), decision=d.decision, reason=d.reason),
        robustness=d.robustness,
        ends={sim: Ends(a, b) for sim, (a, b) in d.ends.items()},
        models=d.models,
        absent={sim: Absent(*v) for sim, v in d.absent.items()},
        near_named={sim: NearNamed(*v) for sim, v in (d.near_named or {}).items()},
        shapes=tuple(
            DepthShape(r.similarity, r.verdict, r.reason, r.first, r.last, r.length)
            for r in d.shapes
        ),
    )


def to_json(d: DepthAnalysis) -> bytes:
    """depth.json's bytes: sorted keys, two-space indent, UTF-8, final newline."""
    return document_bytes(document(d))


def from_json(data: bytes | str, where: str = "depth.json") -> DepthDocument:
    """Read depth.json bytes, refusing another format or version and any malformed field."""
    return versioned_from_json(data, DepthDocument, FORMAT, VERSION, where)


def _iv(i: Interval) -> str:
    if i.estimate is None:
        return "no estimate (no complete case)"
    return f"{i.estimate:.4g} [{i.lower:.4g}, {i.upper:.4g}] over {i.cases} cases"


def _p(p: float | None) -> str:
    return "no p (fewer than two cases)" if p is None else f"p {p_text(p)}"


def headline_lines(d: DepthAnalysis) -> list[str]:
    """What the terminal and summary.md lead with."""
    present = [c for c in d.conditions if c != "A"]
    lines = []
    for sim in SIMILARITIES:
        cells = []
        for cond in present:
            correct = sum(d.accuracy[(sim, n, cond)][0] for n in d.lengths)
            valid = sum(d.accuracy[(sim, n, cond)][1] for n in d.lengths)
            cells.append(f"{cond[1:]} {correct}/{valid}")
        first, last = d.ends[sim]
        lines.append(f"{sim} similarity, accuracy by depth: {', '.join(cells)}")
        lines.append(f"  first depth − interior: {_iv(first)}; last depth − interior: {_iv(last)}")
        for r in (r for r in d.shapes if r.similarity == sim):
            where = "" if r.length is None else f" at {r.length} records"
            counts = "" if r.length is None else f" ({', '.join(r.counts.values())})"
            lines.append(
                f"  shape{where}: {r.verdict}{counts}: {r.reason} (Holm across the "
                f"{2 * len(d.shapes)} end contrasts: first {_p(r.first.p_adjusted)}, last "
                f"{_p(r.last.p_adjusted)})"
            )
        if d.near_named is not None:
            b, a, w = d.near_named[sim]
            lines.append(
                f"  wrong answers to a present target: {w}; naming a near name placed before "
                f"the target {b}, after it {a}"
            )
    lines.append(
        f"preregistered contrast {d.contrast} (high − low): {_iv(d.primary)}; "
        f"decision: {d.decision} ({d.reason})"
    )
    if d.robustness is not None and d.robustness.verdict:
        lines.append(f"robustness: {d.robustness.verdict}")
    for m in d.models:
        near = [c for c in m.coefficients if c.term == "near names before"]
        if near:
            c = near[0]
            lines.append(
                f"model, {m.similarity} similarity: each near name before the target "
                f"{c.estimate:+.3g} [{c.lower:.3g}, {c.upper:.3g}] (p {c.p_two_sided:.3g}), "
                "depth held fixed"
            )
        else:
            lines.append(f"model, {m.similarity} similarity: {m.note}")
    return lines


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(x) for x in row) + " |" for row in rows]
    return out


def summary_markdown(d: DepthAnalysis, figures: bool) -> str:
    """summary.md of a depth design's analysis."""
    present = [c for c in d.conditions if c != "A"]
    out = ["# Depth analysis", ""]
    if d.simulation:
        out += [f"**{SIMULATION_BANNER}**", ""]
    out += [*headline_lines(d), ""]
    out += ["## Accuracy by similarity, length and depth", ""]
    rows = []
    for sim in SIMILARITIES:
        for n in d.lengths:
            row: list[Any] = [sim, n]
            for cond in present:
                correct, valid, _ = d.accuracy[(sim, n, cond)]
                row.append(f"{correct}/{valid}")
            rows.append(row)
    out += _table(["similarity", "records", *(f"depth {x:g}" for x in d.depths)], rows)
    out += ["", "## The model: depth and near names before the target", ""]
    out.append(
        "Linear-probability GEE per similarity (identity link, independence, bias-reduced "
        "sandwich, t on cases − 1 df); coefficients in probability points against depth "
        f"{d.depths[0]:g} and the first length."
    )
    out.append("")
    for m in d.models:
        out.append(f"- {m.similarity} similarity ({m.rows} answers, {m.cases} cases)")
        if m.note:
            out.append(f"  - {m.note}")
        for c in m.coefficients:
            out.append(
                f"  - {c.term}: {c.estimate:+.4g} [{c.lower:.4g}, {c.upper:.4g}], "
                f"p {c.p_two_sided:.3g}"
            )
    out += ["", "## Absent condition", ""]
    for sim, (unknown, valid) in d.absent.items():
        out.append(f"- {sim} similarity: UNKNOWN {unknown}/{valid}")
    if figures:
        out += ["", "## Figures", ""]
        out += [f"- {path}" for path in FIGURES.values()]
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class DepthRun:
    """A depth run's analysis as the analysis notebook reads it (``analyze_run``'s interface)."""

    result: DepthAnalysis
    out_dir: Path | None

    @property
    def decision(self) -> str:
        return self.result.decision

    @property
    def reason(self) -> str:
        return self.result.reason

    @property
    def simulation(self) -> bool:
        return self.result.simulation

    def headline(self) -> list[str]:
        """The lines ``analyze`` prints."""
        return ([SIMULATION_BANNER] if self.simulation else []) + headline_lines(self.result)

    def figures(self) -> dict[str, Path]:
        """Figure name -> PNG path (empty when nothing was written)."""
        if self.out_dir is None:
            return {}
        return {k: self.out_dir / v for k, v in FIGURES.items()}


def depth_run(inp: Any, out_dir: str | Path | None, figures: bool = True) -> DepthRun:
    """Analyse a depth run and (with ``out_dir``) write its files."""
    from needlepoint.analysis.depth import analyze_depth

    result = analyze_depth(inp)
    if out_dir is None:
        return DepthRun(result, None)
    write_depth(result, out_dir, figures)
    return DepthRun(result, Path(out_dir) if figures else None)


def write_depth(d: DepthAnalysis, out_dir: str | Path, figures: bool = True) -> Path:
    """Write depth.json, summary.md and (optionally) the figures, all together or not at all."""

    out = Path(out_dir)
    with replaced_folder(out, is_output_file) as fresh:
        if figures:
            depth_lines(d, fresh / FIGURES["lines"])
            depth_heatmap(d, fresh / FIGURES["heatmap"])
        write_bytes_atomic(fresh / "depth.json", to_json(d))
        write_bytes_atomic(fresh / "summary.md", summary_markdown(d, figures).encode("utf-8"))
    return out


# The figures of a depth design, drawn as the field draws them, as stable PNGs.
#
# - ``depth_lines``: accuracy against depth as Lost-in-the-Middle plots it: one panel per
#   background length, depth on the x-axis, one line per similarity, each point with its Wilson
#   interval (scipy's binomtest) and its count.
# - ``depth_heatmap``: the depth × length grid that needle-in-a-haystack users expect, one panel
#   per similarity, each cell coloured by accuracy and labelled with its count.

COLOURS = {"low": "#4575b4", "high": "#d73027"}
NOTE = (
    "accuracy = exact-correct answers / valid answers (failed requests are missing, never wrong); "
    "bars: 95% Wilson intervals"
)


def _wilson(correct: int, valid: int) -> tuple[float, float]:
    from scipy import stats

    ci = stats.binomtest(correct, valid).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def depth_lines(d: DepthAnalysis, path: str | Path) -> Path:
    """Accuracy against depth, one panel per length, a line per similarity."""
    present = [c for c in d.conditions if c != "A"]
    panels = len(d.lengths)
    with stable_figure(
        # one panel is widened so the note under it fits on one line
        (max(3.6 * panels + 0.8, 6.6), 3.9),
        (0.7, 0.2, 0.55, 0.95),
        "Accuracy against the target's depth",
        d.simulation,
        path,
    ) as fig:
        axes = fig.subplots(1, panels, sharey=True, squeeze=False)[0]
        for ax, n in zip(axes, d.lengths, strict=True):
            for offset, sim in ((-0.006, "low"), (0.006, "high")):
                xs, ys, lo, hi = [], [], [], []
                for depth, cond in zip(d.depths, present, strict=True):
                    correct, valid, _ = d.accuracy[(sim, n, cond)]
                    if valid == 0:
                        continue
                    a, b = _wilson(correct, valid)
                    xs.append(depth + offset)
                    ys.append(correct / valid)
                    lo.append(correct / valid - a)
                    hi.append(b - correct / valid)
                ax.errorbar(
                    xs,
                    ys,
                    yerr=[lo, hi],
                    marker="o",
                    color=COLOURS[sim],
                    capsize=3,
                    label=f"{sim} similarity",
                )
            ax.set_title(f"{n} records", fontsize=10)
            depth_axis(ax, d.depths, "depth of the target (0 = first record, 1 = last)")
        finish_panels(fig, axes, NOTE)
    return Path(path)


def depth_axis(ax: Any, depths: Sequence[float], label: str) -> None:
    """One accuracy-against-depth panel's axes: a tick at each declared depth, accuracy 0 to 1."""
    ax.set_xlabel(label)
    ax.set_xticks(list(depths))
    ax.set_xticklabels([f"{x:g}" for x in depths])
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)


def finish_panels(fig: Any, axes: Any, note: str) -> None:
    """The shared y label, the legend in the last panel and the figure's note."""
    axes[0].set_ylabel("accuracy")
    axes[-1].legend(loc="lower left", fontsize=8)
    add_note(fig, note)


def depth_heatmap(d: DepthAnalysis, path: str | Path) -> Path:
    """Accuracy per depth × length, one panel per similarity."""
    import numpy as np

    present = [c for c in d.conditions if c != "A"]
    with stable_figure(
        (0.8 * len(present) * 2 + 2.8, 0.7 * len(d.lengths) + 1.9),
        (0.9, 1.1, 0.55, 0.85),
        "Accuracy by depth and length",
        d.simulation,
        path,
    ) as fig:
        axes = fig.subplots(1, 2, sharey=True)
        image = None
        for ax, sim in zip(axes, SIMILARITIES, strict=True):
            grid = np.full((len(d.lengths), len(present)), np.nan)
            for i, n in enumerate(d.lengths):
                for j, cond in enumerate(present):
                    correct, valid, _ = d.accuracy[(sim, n, cond)]
                    if valid:
                        grid[i, j] = correct / valid
                    ax.text(
                        j,
                        i,
                        f"{correct}/{valid}",
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="black",
                    )
            image = ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
            ax.set_title(f"{sim} similarity", fontsize=10)
            ax.set_xticks(range(len(present)))
            ax.set_xticklabels([f"{x:g}" for x in d.depths])
            ax.set_xlabel("depth")
            ax.set_yticks(range(len(d.lengths)))
            ax.set_yticklabels([str(n) for n in d.lengths])
        axes[0].set_ylabel("records")
        if image is not None:
            fig.colorbar(image, ax=list(axes), fraction=0.04, pad=0.02, label="accuracy")
        add_note(fig, "cells: exact-correct / valid answers")
    return Path(path)
