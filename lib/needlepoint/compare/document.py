"""`needlepoint compare`: runs of one design side by side, each analysed alone, never pooled.

Writes comparison.json, comparison.md, the results grid (grid.csv, grid.md) and the figures
into one folder. Like the analysis, the
output depends only on the runs: no dates, durations or absolute paths (runs are named by model
or by the user's labels; their folders are recorded relative to the comparison folder), so
comparing the same runs again gives the same bytes.

A comparison takes main runs of one design. It refuses, with one line naming the first offending
run: a pilot (or a run whose pilot marker it cannot read); a run of another design (another
design fingerprint); the same run given twice; and a simulated run beside a live one, unless the
caller allows it, in which case every output says so.

Every strict number of a run (decision, difference, interval, complete cases, failures, the
accuracy cells) is copied from the analysis document `analyze` builds for that run alone. The
lenient counts use the same cells and the same denominators (protocol-valid responses). No
number combines runs: there is no pooled estimate, and the runs keep the order they were given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import needlepoint
from needlepoint.analysis.depth import DepthAnalysis, Interval, analyze_depth
from needlepoint.analysis.depth.report import depth_axis, finish_panels, write_depth
from needlepoint.analysis.document import build_document
from needlepoint.analysis.figures import stable_figure
from needlepoint.analysis.inputs import AnalysisInput, Outcome, from_run
from needlepoint.analysis.primary import SIMULATION_BANNER
from needlepoint.analysis.record import AnalysisDocument
from needlepoint.analysis.report import headline_lines, record_lines
from needlepoint.analysis.secondary import rate_of
from needlepoint.analysis.shape import shape_words
from needlepoint.compare.record import (
    COMPARISON_FORMAT,
    COMPARISON_VERSION,
    MIXED_LABEL,
    ComparedCell,
    ComparedRun,
    ComparisonDocument,
    ScoreTotal,
    to_json,
)
from needlepoint.compare.report import GRID_FIGURE, comparison_markdown, run_name, write_grid
from needlepoint.design.profiles import body_profile
from needlepoint.design.protocol import design_fingerprint
from needlepoint.design.schema import SIMILARITIES
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import write_bytes_atomic
from needlepoint.run.folder import read_run_record
from needlepoint.safeio import is_output_file, relative_path, replaced_folder
from needlepoint.safetext import md_text

# --- the runs, each read and analysed exactly as `analyze` does ----------------------------------


@dataclass(frozen=True)
class LoadedRun:
    """One run's validated rows and the analysis document `analyze` would write for it alone."""

    run_dir: Path
    input: AnalysisInput
    document: AnalysisDocument | None  # None for a depth design: compare_depth analyses those
    model: str
    body_profile: str
    design_fingerprint: str


def load_run(run_dir: str | Path) -> LoadedRun:
    """Read one run folder as `analyze` does (re-derived from its journal) and analyse it alone;
    a pilot is refused there (``inputs.check_pilot``)."""
    root = Path(run_dir)
    if not root.is_dir():
        raise NeedlepointError(f"{root}: run folder not found")
    marker = read_run_record(root).extra.get("pilot")
    inp = from_run(root)
    # The analysis reads any marker but true as a main run; a comparison refuses one it cannot
    # read rather than set a possible pilot beside main runs.
    if not (marker is None or isinstance(marker, bool)):
        raise NeedlepointError(
            f"{root}: run.json extra.pilot is {marker!r}, neither true nor false; compare cannot "
            "tell whether this is a pilot, and reads only main runs"
        )
    return LoadedRun(
        run_dir=root,
        input=inp,
        document=None if "depths" in inp.protocol else build_document(inp),
        model=str(inp.protocol.get("model")),
        body_profile=body_profile(inp.protocol),
        design_fingerprint=design_fingerprint(inp.protocol),
    )


def check_comparable(runs: Sequence[LoadedRun], allow_simulated: bool) -> None:
    """Refuse another design, a repeated run, or simulated beside live runs (unless allowed)."""
    if len(runs) < 2:
        given = f"{runs[0].run_dir}: " if runs else ""
        raise NeedlepointError(
            f"{given}compare needs two or more run folders of one design (given {len(runs)}); "
            "one run alone is analysed with `needlepoint analyze RUNDIR --out DIR`"
        )
    first = runs[0]
    for run in runs[1:]:
        if run.design_fingerprint != first.design_fingerprint:
            raise NeedlepointError(
                f"{run.run_dir}: design fingerprint {run.design_fingerprint[:12]} differs from "
                f"{first.run_dir} ({first.design_fingerprint[:12]}); only runs of one design "
                "are compared"
            )
    seen: dict[str | None, Path] = {}
    for run in runs:
        journal = run.input.journal_sha256
        if journal in seen:
            raise NeedlepointError(
                f"{run.run_dir}: is the same run as {seen[journal]} (journal sha256 "
                f"{(journal or '')[:12]}); give each run once"
            )
        seen[journal] = run.run_dir
    live = [r for r in runs if not r.input.simulation]
    simulated = [r for r in runs if r.input.simulation]
    if live and simulated and not allow_simulated:
        odd = next(r for r in runs if r.input.simulation != first.input.simulation)
        kind = "simulated" if odd.input.simulation else "live"
        other = "live" if odd.input.simulation else "simulated"
        raise NeedlepointError(
            f"{odd.run_dir}: is {kind} but {first.run_dir} is {other}; simulated and live runs "
            "are set side by side only with --allow-simulated, and then every output says so"
        )


def load_runs(run_dirs: Sequence[str | Path], allow_simulated: bool = False) -> list[LoadedRun]:
    """Load, analyse and check every run; the first refusal is one line naming its run."""
    runs = [load_run(d) for d in run_dirs]
    check_comparable(runs, allow_simulated)
    return runs


# --- the comparison document ---------------------------------------------------------------------


FIGURES = {
    "forest": "comparison_forest.png",
    "accuracy": "comparison_accuracy.png",
    "failures": "comparison_failures.png",
    "grid": GRID_FIGURE,
}
SCORE_GROUPS = {"answer present (B, M, E)": ("B", "M", "E"), "answer absent (A)": ("A",)}


def _lenient(rows: Sequence[Outcome]) -> tuple[int, float | None]:
    valid = [o for o in rows if o.valid]
    hits = sum(o.lenient for o in valid)
    return hits, (hits / len(valid) if valid else None)


def compared_cells(run: LoadedRun) -> tuple[ComparedCell, ...]:
    """The analysis's accuracy cells of this run, each with its lenient count beside it."""
    cells = []
    for cell in run.document.secondary.accuracy:
        rows = [
            o
            for o in run.input.outcomes
            if (o.similarity, o.length, o.condition)
            == (cell.similarity, cell.length, cell.condition)
        ]
        hits, rate = _lenient(rows)
        strict = {f.name: getattr(cell, f.name) for f in fields(cell)}
        cells.append(ComparedCell(**strict, lenient_correct=hits, lenient_accuracy=rate))
    return tuple(cells)


def score_totals(outcomes: Sequence[Outcome]) -> tuple[ScoreTotal, ...]:
    """Strict and lenient correct over valid, where the answer is present and where absent."""
    out = []
    for group, conditions in SCORE_GROUPS.items():
        rows = [o for o in outcomes if o.condition in conditions]
        hits, rate = _lenient(rows)
        out.append(
            ScoreTotal(group=group, **rate_of(rows), lenient_correct=hits, lenient_accuracy=rate)
        )
    return tuple(out)


def run_names(runs: Sequence[LoadedRun], labels: Sequence[str] | None = None) -> list[str]:
    """How the comparison names each run: the user's labels, else the models, made unique.

    Models shared by several runs get their body profile, then ``#k`` in the order given. A run
    is never named by its folder: a path relative to --out (``../run-smart``) says nothing.
    """
    if labels:
        if len(labels) != len(runs):
            raise NeedlepointError(
                f"--label given {len(labels)} times for {len(runs)} runs: give one per run, in "
                "the order of the run folders, or none (runs are then named by model)"
            )
        for label in labels:
            if not label.strip() or len(label) > 60 or not label.isprintable():
                raise NeedlepointError(f"--label {label[:60]!r}: 1 to 60 printable characters")
        if len(set(labels)) != len(labels):
            raise NeedlepointError("--label: each run needs its own label")
        return list(labels)
    names = [r.model for r in runs]
    for model in {n for n in names if names.count(n) > 1}:
        twins = [i for i, n in enumerate(names) if n == model]
        profiles = [runs[i].body_profile for i in twins]
        for k, i in enumerate(twins, start=1):
            unique = len(set(profiles)) == len(profiles)
            names[i] = f"{model} ({runs[i].body_profile})" if unique else f"{model} #{k}"
    return names


def compared_run(run: LoadedRun, out_dir: Path, name: str | None = None) -> ComparedRun:
    """One run's entry: its own analysis, copied, and its lenient score."""
    doc = run.document
    p = doc.primary
    failures = doc.secondary.protocol_failures
    return ComparedRun(
        run_dir=relative_path(run.run_dir, out_dir),
        model=run.model,
        body_profile=run.body_profile,
        design_fingerprint=run.design_fingerprint,
        protocol_fingerprint=doc.protocol.fingerprint,
        protocol_version=doc.protocol.version,
        journal_sha256=doc.run.journal_sha256,
        simulation=doc.simulation,
        label=doc.label,
        decision=p.decision,
        reason=p.reason,
        difference=p.estimate,
        difference_exact=p.estimate_exact,
        interval=None if p.interval is None else (p.interval.lower, p.interval.upper),
        complete_cases=p.complete_cases,
        planned_cases=p.planned_cases,
        protocol_failures={f.kind: f.count for f in failures if f.kind != "unexecuted"},
        unexecuted=sum(f.count for f in failures if f.kind == "unexecuted"),
        caveats=doc.caveats,
        scores=score_totals(run.input.outcomes),
        accuracy=compared_cells(run),
        headline=tuple(headline_lines(doc)),
        middle_loss=tuple(e for e in doc.effects.measures if e.measure == "middle loss"),
        positions=doc.effects.positions,
        robustness=doc.robustness.verdict,
        name=name or run.model,
        shape=shape_words(doc.effects.shapes),
    )


def build_comparison(
    runs: Sequence[LoadedRun],
    out_dir: str | Path,
    figures: bool = True,
    labels: Sequence[str] | None = None,
) -> ComparisonDocument:
    """The comparison.json content for checked runs (``load_runs``), in the order given."""
    out = Path(out_dir)
    first = runs[0].document
    simulated = [r.document.simulation for r in runs]
    label = SIMULATION_BANNER if all(simulated) else MIXED_LABEL if any(simulated) else None
    return ComparisonDocument(
        format=COMPARISON_FORMAT,
        version=COMPARISON_VERSION,
        package_version=needlepoint.__version__,
        simulation=any(simulated),
        label=label,
        design_fingerprint=runs[0].design_fingerprint,
        protocol_id=first.protocol.id,
        threshold=first.parameters.threshold,
        confidence=first.parameters.confidence,
        runs=tuple(map(compared_run, runs, [out] * len(runs), run_names(runs, labels))),
        figures=figure_names(runs) if figures else {},
    )


def figure_names(runs: Sequence[LoadedRun]) -> dict[str, str]:
    """The figures a comparison draws: the failures panel only when some run has a protocol
    failure or an unexecuted request (an empty panel says nothing a table does not)."""
    failed = any(f.count for r in runs for f in r.document.secondary.protocol_failures)
    return {k: v for k, v in FIGURES.items() if k != "failures" or failed}


# --- the comparison folder -----------------------------------------------------------------------


TABLES = ("runs", "failures", "scores", "accuracy")


@dataclass(frozen=True)
class Comparison:
    """One comparison: its document, and the folder its files were written to."""

    document: ComparisonDocument
    out_dir: Path

    def lines(self) -> list[str]:
        """One line per run (decision, difference, interval), then where the files are."""
        doc = self.document
        out = [doc.label] if doc.label else []
        for r in doc.runs:
            value = "—" if r.difference is None else f"{r.difference:.4g}"
            interval = "" if r.interval is None else f" [{r.interval[0]:.4g}, {r.interval[1]:.4g}]"
            model = "" if r.shown.startswith(r.model) else f" ({r.model})"
            out.append(f"{run_name(r)}{model}: {r.decision}; difference {value}{interval}")
            out += [f"  {line}" for line in r.headline]
        out.append(f"not pooled, not ranked; each run analysed alone. Threshold {doc.threshold:g}.")
        return out

    def figures(self) -> dict[str, Path]:
        """Figure name -> PNG path (empty when none were drawn)."""
        return {k: self.out_dir / v for k, v in self.document.figures.items()}

    def table(self, name: str) -> Any:
        """One table as a pandas DataFrame, for notebooks: one of TABLES."""
        import pandas as pd

        if name not in TABLES:
            raise KeyError(f"unknown table {name!r}; choose one of {TABLES}")
        runs = self.document.runs
        if name == "runs":
            keep = ("model", "body_profile", "simulation", "complete_cases", "difference")
            rows = [
                {"run": r.shown}
                | {k: getattr(r, k) for k in keep}
                | {
                    "low": r.interval[0] if r.interval else None,
                    "high": r.interval[1] if r.interval else None,
                    "decision": r.decision,
                }
                for r in runs
            ]
        elif name == "failures":
            rows = [
                {"run": r.shown} | r.protocol_failures | {"unexecuted": r.unexecuted} for r in runs
            ]
        elif name == "scores":
            rows = [
                {"run": r.shown} | {f.name: getattr(s, f.name) for f in fields(s)}
                for r in runs
                for s in r.scores
            ]
        else:
            rows = [
                {"run": r.shown} | {f.name: getattr(c, f.name) for f in fields(c)}
                for r in runs
                for c in r.accuracy
            ]
        return pd.DataFrame(rows).fillna(0) if name == "failures" else pd.DataFrame(rows)


def write_figures(doc: ComparisonDocument, out: Path) -> None:
    """Draw the comparison's figures (``doc.figures``) into ``out``; the grid's is drawn with
    the grid."""
    from needlepoint.compare import report

    report.forest(doc, out / FIGURES["forest"])
    report.accuracy_panels(doc, out / FIGURES["accuracy"])
    if "failures" in doc.figures:
        report.failures(doc, out / FIGURES["failures"])


def compare_runs(
    run_dirs: Sequence[str | Path],
    out_dir: str | Path,
    *,
    allow_simulated: bool = False,
    figures: bool = True,
    record: Sequence[str] | None = None,
    labels: Sequence[str] | None = None,
) -> Comparison:
    """Check and analyse each run alone, then write the comparison folder.

    ``record``: the study record's lines for comparison.md; by default each run's declaration
    chain, for runs started under one (nothing for runs without). ``labels`` name the runs in
    every table and figure (one per run, in order); without them a run is named by its model.
    """
    out = Path(out_dir)
    runs = load_runs(run_dirs, allow_simulated)
    run_names(runs, labels)  # bad labels are refused before anything is written
    if out.exists() and not out.is_dir():
        raise NeedlepointError(f"{out}: exists and is not a folder")
    doc = build_comparison(runs, out, figures, labels)
    if record is None:
        shown = [relative_path(d, out) for d in run_dirs]
        record = record_lines(run_dirs, out, shown=shown)
    text = comparison_markdown(doc, record)
    with replaced_folder(out, is_output_file) as fresh:  # all files together, or none
        if figures:
            write_figures(doc, fresh)
        write_grid(doc, fresh, figure=figures)
        write_bytes_atomic(fresh / "comparison.json", to_json(doc))
        write_bytes_atomic(fresh / "comparison.md", text.encode("utf-8"))
    return Comparison(doc, out)


# Runs of one depth design side by side, each analysed alone (never pooled).
#
# ``needlepoint compare`` routes runs of a depth design here after the usual refusals
# (``document.load_runs``: one design fingerprint, each run once, simulated beside live only when
# allowed). Each run gets its own depth analysis in ``--out/runs/<k>/`` exactly as ``analyze``
# writes it; ``comparison.md`` sets their decisions, end contrasts and near-name coefficients side
# by side, and ``comparison_depth.png`` draws every run's accuracy against depth.

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
            depth_axis(ax, first.depths, "depth of the target")
        finish_panels(
            fig, axes, "each run analysed alone; accuracy = exact-correct / valid answers"
        )


def _robust(result: DepthAnalysis) -> str:
    """The run's robustness word with its reasons ("—" when it has no decision to test)."""
    verdict = "" if result.robustness is None else result.robustness.verdict
    return md_text(verdict) if verdict else "—"


def compare_depth(
    runs: Sequence[LoadedRun], out: Path, figures: bool = True, labels: Sequence[str] | None = None
) -> list[str]:
    """Analyse each run alone, write them and the comparison; return the lines to print."""
    names = run_names(runs, labels)
    results = [analyze_depth(r.input) for r in runs]
    out.mkdir(parents=True, exist_ok=True)
    lines = [SIMULATION_BANNER] if any(r.simulation for r in results) else []
    table = [
        "| run | decision | robustness | contrast (high − low) | high: first − interior | "
        "high: last − interior | high: per near name before |",
        "|---|---|---|---|---|---|---|",
    ]
    for k, (name, result) in enumerate(zip(names, results, strict=True), start=1):
        write_depth(result, out / "runs" / str(k), figures)
        first, last = result.ends["high"]
        table.append(
            f"| {name} | {result.decision} | {_robust(result)} | {_interval(result)} | "
            f"{_iv(first)} | {_iv(last)} | {_near(result)} |"
        )
        lines.append(
            f"{name}: {result.decision}, {result.contrast} {_interval(result)}; {_robust(result)}"
        )
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
