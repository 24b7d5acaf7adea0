"""The comparison document: each run's own analysis, copied, plus its exploratory lenient score.

Every strict number of a run (decision, difference, interval, complete cases, failures, the
accuracy cells) is copied from the analysis document `analyze` builds for that run alone. The
lenient counts use the same cells and the same denominators (protocol-valid responses). No
number combines runs: there is no pooled estimate, and the runs keep the order they were given.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import needlepoint
from needlepoint.analysis.headline import headline_lines
from needlepoint.analysis.inputs import Outcome
from needlepoint.analysis.primary import SIMULATION_BANNER
from needlepoint.compare.record import (
    COMPARISON_FORMAT,
    COMPARISON_VERSION,
    MIXED_LABEL,
    ComparedCell,
    ComparedRun,
    ComparisonDocument,
    ScoreTotal,
)
from needlepoint.compare.runs import LoadedRun
from needlepoint.errors import NeedlepointError

FIGURES = {
    "forest": "comparison_forest.png",
    "accuracy": "comparison_accuracy.png",
    "failures": "comparison_failures.png",
    "positions": "comparison_positions.png",
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
        cells.append(
            ComparedCell(
                similarity=cell.similarity,
                length=cell.length,
                condition=cell.condition,
                valid=cell.valid,
                correct=cell.correct,
                accuracy=cell.accuracy,
                lenient_correct=hits,
                lenient_accuracy=rate,
                not_valid=cell.not_valid,
            )
        )
    return tuple(cells)


def score_totals(outcomes: Sequence[Outcome]) -> tuple[ScoreTotal, ...]:
    """Strict and lenient correct over valid, where the answer is present and where absent."""
    out = []
    for group, conditions in SCORE_GROUPS.items():
        rows = [o for o in outcomes if o.condition in conditions]
        valid = [o for o in rows if o.valid]
        correct = sum(o.status == "correct" for o in valid)
        hits, rate = _lenient(rows)
        out.append(
            ScoreTotal(
                group=group,
                valid=len(valid),
                correct=correct,
                accuracy=correct / len(valid) if valid else None,
                lenient_correct=hits,
                lenient_accuracy=rate,
                not_valid=len(rows) - len(valid),
            )
        )
    return tuple(out)


def relative(path: Path, out_dir: Path) -> str:
    """A run folder as seen from the comparison folder, so no machine path is written."""
    return Path(os.path.relpath(path.resolve(), out_dir.resolve())).as_posix()


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
        run_dir=relative(run.run_dir, out_dir),
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
    )


def build_comparison(
    runs: Sequence[LoadedRun],
    out_dir: str | Path,
    figures: bool = True,
    labels: Sequence[str] | None = None,
) -> ComparisonDocument:
    """The comparison.json content for checked runs (``runs.load_runs``), in the order given."""
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
        figures=dict(FIGURES) if figures else {},
    )
