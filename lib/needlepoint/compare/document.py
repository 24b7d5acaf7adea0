"""`needlepoint compare`: runs of one design side by side, each analysed alone, never pooled.

Writes comparison.json, comparison.md and three figures into one folder. Like the analysis, the
output depends only on the runs: no dates, durations or absolute paths (runs are named by model
or by the user's labels; their folders are recorded relative to the comparison folder), so
comparing the same runs again gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from needlepoint.compare.build import FIGURES, build_comparison, relative, run_names
from needlepoint.compare.record import ComparisonDocument, to_json
from needlepoint.compare.runs import load_runs
from needlepoint.compare.summary import comparison_markdown, run_name
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import write_bytes_atomic
from needlepoint.safeio import is_output_file, replaced_folder

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
    """Draw the four comparison figures into ``out``."""
    from needlepoint.analysis.decision import SIMULATION_BANNER
    from needlepoint.analysis.position_plot import compare_position_lines
    from needlepoint.compare import plots

    plots.forest(doc, out / FIGURES["forest"])
    plots.accuracy_panels(doc, out / FIGURES["accuracy"])
    plots.failures(doc, out / FIGURES["failures"])
    models = [r.model for r in doc.runs]
    compare_position_lines(
        [(r.model if models.count(r.model) == 1 else run_name(r), r.positions) for r in doc.runs],
        out / FIGURES["positions"],
        doc.simulation,
        doc.label or SIMULATION_BANNER,
    )


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
        record = declaration_record(run_dirs, out)
    text = comparison_markdown(doc, record)
    with replaced_folder(out, is_output_file) as fresh:  # all files together, or none
        if figures:
            write_figures(doc, fresh)
        write_bytes_atomic(fresh / "comparison.json", to_json(doc))
        write_bytes_atomic(fresh / "comparison.md", text.encode("utf-8"))
    return Comparison(doc, out)


def declaration_record(run_dirs: Sequence[str | Path], out: Path) -> list[str]:
    """Each declared run's chain, paths shown from the comparison folder; [] when none is."""
    from needlepoint.run.declaration import run_chain_lines
    from needlepoint.run.folder import recorded_declaration

    lines: list[str] = []
    for run_dir in run_dirs:
        if recorded_declaration(Path(run_dir)) is not None:
            shown = relative(Path(run_dir), out)
            lines += [*run_chain_lines(Path(run_dir), out, shown=shown), ""]
    return lines[:-1]
