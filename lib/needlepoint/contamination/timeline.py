"""Timeline: context files written after a run that hold its results, and the reruns they poison.

A file with modification time t is taken to exist at every instant from t on. So a file whose
mtime is *after* a run's start and that contains that run's recorded values was written from
the run: harmless to it. Every other run of the same battery that started *at or after* t could
read it, and is a poisoned rerun. Equal timestamps therefore count against the run: a file
stamped exactly at a run's start existed at that start (not an artifact of it), and a run that
starts exactly when the file was written is poisoned by it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from needlepoint.contamination.context import Context, Problem, Verification
from needlepoint.contamination.inputs import Run, iso_from_ns
from needlepoint.contamination.overlap import AnswerIndex


@dataclass(frozen=True)
class Holding:
    """A context file that holds recorded values of a run, and where."""

    file: str
    mtime_ns: int
    run_id: str
    started_ns: int
    values: tuple[str, ...]
    lines: tuple[int, ...]

    @property
    def after_run(self) -> bool:
        """True when the file was written after the run started (so it came from the run)."""
        return self.mtime_ns > self.started_ns

    @property
    def minutes_after_start(self) -> float:
        """File mtime minus run start, in minutes (negative: the file is older)."""
        return (self.mtime_ns - self.started_ns) / 60e9


@dataclass(frozen=True)
class PoisonedRun:
    """A run that started while a file holding an earlier run's results was in its context."""

    run_id: str
    battery: str
    started_ns: int
    file: str
    file_mtime_ns: int
    source_runs: tuple[str, ...]


@dataclass(frozen=True)
class TimelineResult:
    """Files newer than the runs they describe, the reruns they poison, and older holdings."""

    runs: tuple[Run, ...]
    holdings: tuple[Holding, ...]
    poisoned: tuple[PoisonedRun, ...]
    context_source: str
    context_files: int
    problems: tuple[Problem, ...]
    verification: Verification | None

    @property
    def artifacts(self) -> tuple[Holding, ...]:
        """Holdings written after their run: each must leave the context before any rerun."""
        return tuple(h for h in self.holdings if h.after_run)

    @property
    def has_poisoned_rerun(self) -> bool:
        """True when at least one run was poisoned."""
        return bool(self.poisoned)

    def sentence(self) -> str:
        """One line for reports."""
        files = sorted({h.file for h in self.artifacts})
        return (
            f"{len(files)} context file(s) newer than a run and holding its results; "
            f"{len(self.poisoned)} poisoned rerun(s) among {len(self.runs)} runs"
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary with exact ISO times."""
        return {
            "runs": len(self.runs),
            "holdings": [
                {
                    "file": h.file,
                    "mtime": iso_from_ns(h.mtime_ns),
                    "run_id": h.run_id,
                    "run_started": iso_from_ns(h.started_ns),
                    "after_run": h.after_run,
                    "values": list(h.values),
                    "lines": list(h.lines),
                }
                for h in self.holdings
            ],
            "poisoned": [
                {
                    "run_id": p.run_id,
                    "battery": p.battery,
                    "started": iso_from_ns(p.started_ns),
                    "file": p.file,
                    "file_mtime": iso_from_ns(p.file_mtime_ns),
                    "source_runs": list(p.source_runs),
                }
                for p in self.poisoned
            ],
            "context": {"source": self.context_source, "files": self.context_files},
        }


def check_timeline(runs: Sequence[Run], context: Context) -> TimelineResult:
    """Find files that hold a run's values, and the same-battery runs started after them."""
    owners: dict[str, list[Run]] = {}
    for run in runs:
        for value in run.values:
            owners.setdefault(value, []).append(run)
    index = AnswerIndex({v: v for v in owners})
    holdings: list[Holding] = []
    for f in context.files:
        per_run: dict[str, tuple[Run, dict[str, None], dict[int, None]]] = {}
        for hit in index.search(f.text):
            for run in owners[hit.value]:
                _, values, lines = per_run.setdefault(run.run_id, (run, {}, {}))
                values[hit.value] = None
                lines[hit.line] = None
        for run, values, lines in per_run.values():
            holdings.append(
                Holding(f.path, f.mtime_ns, run.run_id, run.started_ns, tuple(values), tuple(lines))
            )
    holdings.sort(key=lambda h: (h.file, h.started_ns, h.run_id))
    sources: dict[tuple[str, str], list[str]] = {}
    by_id = {r.run_id: r for r in runs}
    for h in holdings:
        if not h.after_run:
            continue
        battery = by_id[h.run_id].battery
        for other in runs:
            if other.battery == battery and other.started_ns >= h.mtime_ns:
                sources.setdefault((other.run_id, h.file), []).append(h.run_id)
    mtimes = {f.path: f.mtime_ns for f in context.files}
    poisoned = [
        PoisonedRun(
            run_id, by_id[run_id].battery, by_id[run_id].started_ns, file, mtimes[file], tuple(src)
        )
        for (run_id, file), src in sources.items()
    ]
    poisoned.sort(key=lambda p: (p.started_ns, p.run_id, p.file))
    return TimelineResult(
        tuple(runs),
        tuple(holdings),
        tuple(poisoned),
        context.source,
        len(context.files),
        context.problems,
        context.verification,
    )
