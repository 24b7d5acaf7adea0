"""Run the whole analysis on one run and write analysis.json, summary.md and the figures.

The output depends only on the prepared folder and the run's rows: no dates, durations or
absolute paths, so re-running it gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import needlepoint
from needlepoint.analysis.inputs import AnalysisInput, from_results_csv, from_run
from needlepoint.analysis.primary import SIMULATION_BANNER, primary
from needlepoint.analysis.record import (
    ANALYSIS_FORMAT,
    ANALYSIS_VERSION,
    AnalysisDocument,
    AnalysisParameters,
    ProtocolRef,
    RunContext,
    RunRef,
    to_json,
)
from needlepoint.analysis.report import record_lines, summary_markdown
from needlepoint.analysis.secondary import secondary
from needlepoint.design.profiles import body_profile
from needlepoint.design.protocol import design_fingerprint
from needlepoint.jsonio import write_bytes_atomic
from needlepoint.safeio import is_output_file, replaced_folder

FIGURES = {
    "accuracy": "accuracy_by_position.png",
    "forest": "forest_difference.png",
    "bootstrap": "bootstrap_distribution.png",
    "completeness": "completeness.png",
    "positions": "accuracy_by_position_lines.png",
}
TABLES = (
    "cases", "exploratory", "exclusions", "accuracy", "refusal", "errors", "failures",
    "effects", "positions", "robustness", "diagnostics", "shapes",
)  # fmt: skip


def _row(record: Any) -> dict[str, Any]:
    """A record's fields as one table row, its columns in field order."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


@dataclass(frozen=True)
class Analysis:
    """One run's analysis: the analysis.json document plus where its files were written."""

    document: AnalysisDocument
    out_dir: Path | None

    @property
    def decision(self) -> str:
        return self.document.primary.decision

    @property
    def reason(self) -> str:
        return self.document.primary.reason

    @property
    def simulation(self) -> bool:
        return self.document.simulation

    def headline(self) -> list[str]:
        """What was run, Q1, Q2 and the robustness verdict, as ``analyze`` prints them."""
        from needlepoint.analysis.report import headline_lines

        return headline_lines(self.document)

    def figures(self) -> dict[str, Path]:
        """Figure name -> PNG path (empty when nothing was written)."""
        if self.out_dir is None:
            return {}
        return {k: self.out_dir / v for k, v in FIGURES.items()}

    def table(self, name: str) -> Any:
        """One table as a pandas DataFrame, for notebooks: one of TABLES."""
        import pandas as pd

        doc = self.document
        if name not in TABLES:
            raise KeyError(f"unknown table {name!r}; choose one of {TABLES}")
        sec = doc.secondary
        rows = {
            "cases": lambda: [
                {"case": c.case}
                | {f"difference_{r.length}": r.difference for r in c.lengths}
                | {"difference": c.difference}
                for c in doc.primary.cases
            ],
            "exploratory": lambda: [_row(r) for r in doc.exploratory],
            "exclusions": lambda: [_row(r) for r in doc.exclusions],
            "accuracy": lambda: [_row(r) for r in sec.accuracy],
            "refusal": lambda: [_row(r) for r in sec.refusal],
            # every kind in every row: a kind a row lacks is a count of 0, not a missing value
            "errors": lambda: [
                {k: v for k, v in _row(r).items() if k != "kinds"}
                | {k: r.kinds.get(k, 0) for k in sorted({k for e in sec.errors for k in e.kinds})}
                for r in sec.errors
            ],
            "failures": lambda: [_row(r) for r in sec.protocol_failures],
            "effects": lambda: [_row(r) for r in doc.effects.measures],
            "positions": lambda: [_row(r) for r in doc.effects.positions],
            "robustness": lambda: [
                {k: v for k, v in _row(r).items() if k != "cells"}
                for r in (*doc.robustness.missing, *doc.robustness.leave_one_out)
            ],
            "diagnostics": lambda: [_row(r) for r in doc.diagnostics.accuracy],
            "shapes": lambda: [
                {"similarity": r.similarity, "length": r.length}
                | {f"{k} correct/valid": v for k, v in r.counts.items()}
                | {
                    f"{c.name} {field}": getattr(c, field)
                    for c in (r.first, r.last)
                    for field in ("estimate", "lower", "upper", "p", "p_adjusted")
                }
                | {"verdict": r.verdict}
                for r in (doc.effects.shapes.rows if doc.effects.shapes else ())
            ],
        }
        return pd.DataFrame(rows[name]())


def build_document(inp: AnalysisInput) -> AnalysisDocument:
    """The versioned analysis.json content for one validated run."""
    from needlepoint.analysis.effects import diagnostics, effects
    from needlepoint.analysis.robustness import robustness

    result = primary(inp)
    proto = inp.protocol
    params = AnalysisParameters.of(proto)
    # An input built by hand (not by from_run or from_results_csv) has no context: none known.
    context = inp.context or RunContext(None, None, None, None, ())
    return AnalysisDocument(
        format=ANALYSIS_FORMAT,
        version=ANALYSIS_VERSION,
        package_version=needlepoint.__version__,
        simulation=inp.simulation,
        label=SIMULATION_BANNER if inp.simulation else None,
        protocol=ProtocolRef(
            id=proto.get("protocol_id"),
            version=proto.get("version"),
            fingerprint=inp.fingerprint,
            design_fingerprint=design_fingerprint(proto),
            model=proto.get("model"),
            body_profile=body_profile(proto),
        ),
        run=RunRef(journal_sha256=inp.journal_sha256, source=inp.source, unverified=inp.unverified),
        parameters=params,
        completeness=result.completeness,
        exploratory=result.exploratory,
        exclusions=result.exclusions,
        caveats=result.caveats,
        primary=result.primary,
        secondary=secondary(inp.outcomes),
        figures=dict(FIGURES),
        context=context,
        effects=effects(inp.outcomes, params),
        robustness=robustness(inp.outcomes, params, result.primary),
        diagnostics=diagnostics(inp.outcomes, inp.sessions),
    )


def write_figures(doc: AnalysisDocument, inp: AnalysisInput, out: Path) -> None:
    """Draw the five analysis figures into ``out``."""
    from needlepoint.analysis import figures

    sim = inp.simulation
    figures.accuracy_heatmap(doc.secondary.accuracy, out / FIGURES["accuracy"], sim)
    figures.forest_plot(doc.primary, out / FIGURES["forest"], sim)
    figures.bootstrap_plot(doc.primary, out / FIGURES["bootstrap"], sim)
    figures.completeness_grid(inp.outcomes, out / FIGURES["completeness"], sim)
    figures.position_lines(doc.effects.positions, out / FIGURES["positions"], sim)


def analyze(
    inp: AnalysisInput,
    out_dir: str | Path | None,
    figures: bool = True,
    record: Sequence[str] = (),
) -> Analysis:
    """Analyse a validated input; with ``out_dir`` write analysis.json, summary.md, figures.

    ``record``: the study record's lines for summary.md (``report.record_lines``: a run's
    declaration chain, other runs of its design on record); they never enter analysis.json or
    the decision.
    """
    doc = build_document(inp)
    if out_dir is None:
        return Analysis(doc, None)
    out = Path(out_dir)
    if not figures:
        doc = replace(doc, figures={})
    # All files of one analysis land together or not at all: an interrupted analysis leaves the
    # earlier one whole, never new figures beside an old analysis.json.
    with replaced_folder(out, is_output_file) as fresh:
        if figures:
            write_figures(doc, inp, fresh)
        write_bytes_atomic(fresh / "analysis.json", to_json(doc))
        write_bytes_atomic(fresh / "summary.md", summary_markdown(doc, record).encode("utf-8"))
    return Analysis(doc, out)


def analyze_run(
    run_dir: str | Path,
    out_dir: str | Path | None = None,
    prepared_dir: str | Path | None = None,
    figures: bool = True,
    record: Sequence[str] | None = None,
) -> Analysis:
    """Analyse a run folder (re-derived from its journal); default output ``RUNDIR/analysis``.

    ``record``: the study record's lines, as `needlepoint analyze` passes them; by default a
    declared run's declaration chain, as the command writes it where it finds no evidence root.
    """
    target = Path(run_dir) / "analysis" if out_dir is None else Path(out_dir)
    inp = from_run(run_dir, prepared_dir)
    if "depths" in inp.protocol:  # a depth design has its own analysis (analysis.depth)
        from needlepoint.analysis.depth.report import depth_run

        return depth_run(inp, target, figures)  # type: ignore[return-value]
    if record is None:
        record = record_lines([run_dir], target)
    return analyze(inp, target, figures, record)


def analyze_results(
    results_csv: str | Path,
    prepared_dir: str | Path,
    out_dir: str | Path | None = None,
    figures: bool = True,
) -> Analysis:
    """Analyse a results table made elsewhere; default output ``analysis`` beside the table."""
    target = Path(results_csv).parent / "analysis" if out_dir is None else out_dir
    return analyze(from_results_csv(results_csv, prepared_dir), target, figures)
