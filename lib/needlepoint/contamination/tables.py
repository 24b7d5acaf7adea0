"""pandas tables of the check results, for notebooks; the checks themselves never need pandas."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlepoint.contamination.inputs import Run, iso_from_ns

if TYPE_CHECKING:
    import pandas as pd

    from needlepoint.contamination.canary import CanaryResult
    from needlepoint.contamination.context import Manifest
    from needlepoint.contamination.overlap import OverlapResult
    from needlepoint.contamination.report import ContaminationReport
    from needlepoint.contamination.timeline import TimelineResult


def _frame(rows: list[dict[str, object]], columns: list[str]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(rows, columns=columns)


def manifest_frame(manifest: Manifest) -> pd.DataFrame:
    """One row per frozen file: relative path, size, exact UTC mtime, hash prefix."""
    rows = [
        {"path": e.path, "size": e.size, "mtime (UTC)": e.mtime, "sha256": e.sha256[:16]}
        for e in manifest.files
    ]
    return _frame(rows, ["path", "size", "mtime (UTC)", "sha256"])


def problems_frame(manifest: Manifest) -> pd.DataFrame:
    """Files that could not be frozen, or that lie outside the root."""
    rows = [{"path": p.path, "kind": p.kind, "detail": p.detail} for p in manifest.problems]
    return _frame(rows, ["path", "kind", "detail"])


def overlap_frame(result: OverlapResult) -> pd.DataFrame:
    """Every match with its location; discarded ones carry their reason."""
    rows = [
        {
            "reference": m.reference_id,
            "answer": m.answer,
            "where": m.where,
            "kept": m.discard_reason is None,
            "discard reason": m.discard_reason or "",
        }
        for m in result.matches
    ]
    return _frame(rows, ["reference", "answer", "where", "kept", "discard reason"])


def runs_frame(runs: tuple[Run, ...]) -> pd.DataFrame:
    """The runs as the timeline sees them."""
    rows = [
        {"run": r.run_id, "battery": r.battery, "started (UTC)": iso_from_ns(r.started_ns),
         "values": ", ".join(r.values)}
        for r in runs
    ]  # fmt: skip
    return _frame(rows, ["run", "battery", "started (UTC)", "values"])


def holdings_frame(result: TimelineResult) -> pd.DataFrame:
    """Context files that hold a run's values, with their mtime relative to the run's start."""
    rows = [
        {
            "file": h.file,
            "file mtime (UTC)": iso_from_ns(h.mtime_ns),
            "run": h.run_id,
            "minutes after run start": round(h.minutes_after_start),
            "written after the run": h.after_run,
        }
        for h in result.holdings
    ]
    columns = [
        "file",
        "file mtime (UTC)",
        "run",
        "minutes after run start",
        "written after the run",
    ]
    return _frame(rows, columns)


def poisoned_frame(result: TimelineResult) -> pd.DataFrame:
    """Runs that started after a file holding an earlier run's results existed."""
    rows = [
        {"run": p.run_id, "started (UTC)": iso_from_ns(p.started_ns), "file": p.file,
         "file mtime (UTC)": iso_from_ns(p.file_mtime_ns), "from run(s)": ", ".join(p.source_runs)}
        for p in result.poisoned
    ]  # fmt: skip
    return _frame(rows, ["run", "started (UTC)", "file", "file mtime (UTC)", "from run(s)"])


def canary_frame(result: CanaryResult) -> pd.DataFrame:
    """The seed's table: closed questions per condition, exact answers, tool calls."""
    rows = [
        {"condition": s.condition, "closed questions": s.questions, "exact": s.exact,
         "tool calls": s.tool_calls}
        for s in result.summary
    ]  # fmt: skip
    return _frame(rows, ["condition", "closed questions", "exact", "tool calls"])


def findings_frame(report: ContaminationReport) -> pd.DataFrame:
    """Why the gate fails, one row per finding."""
    rows = [{"check": f.check, "kind": f.kind, "message": f.message} for f in report.gate.findings]
    return _frame(rows, ["check", "kind", "message"])
