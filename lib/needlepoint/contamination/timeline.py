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
from dataclasses import dataclass, field

from needlepoint.contamination.context import Context, ContextRef, Problem, Verification
from needlepoint.contamination.inputs import Run, iso_from_ns
from needlepoint.contamination.overlap import AnswerIndex
from needlepoint.schema import IN_MEMORY


@dataclass(frozen=True)
class Holding:
    """A context file that holds recorded values of a run, and where."""

    file: str
    mtime_ns: int = field(metadata=IN_MEMORY)
    run_id: str
    started_ns: int = field(metadata=IN_MEMORY)
    values: tuple[str, ...]
    lines: tuple[int, ...]
    mtime: str = field(init=False)  # the times as exact ISO 8601 UTC strings, for the report
    run_started: str = field(init=False)
    after_run: bool = field(init=False)  # written after the run started: it came from the run

    def __post_init__(self) -> None:
        object.__setattr__(self, "mtime", iso_from_ns(self.mtime_ns))
        object.__setattr__(self, "run_started", iso_from_ns(self.started_ns))
        object.__setattr__(self, "after_run", self.mtime_ns > self.started_ns)

    @property
    def minutes_after_start(self) -> float:
        """File mtime minus run start, in minutes (negative: the file is older)."""
        return (self.mtime_ns - self.started_ns) / 60e9


@dataclass(frozen=True)
class PoisonedRun:
    """A run that started while a file holding an earlier run's results was in its context."""

    run_id: str
    battery: str
    started_ns: int = field(metadata=IN_MEMORY)
    file: str
    file_mtime_ns: int = field(metadata=IN_MEMORY)
    source_runs: tuple[str, ...]
    started: str = field(init=False)  # the times as exact ISO 8601 UTC strings, for the report
    file_mtime: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "started", iso_from_ns(self.started_ns))
        object.__setattr__(self, "file_mtime", iso_from_ns(self.file_mtime_ns))


@dataclass(frozen=True)
class TimelineResult:
    """Files newer than the runs they describe, the reruns they poison, and older holdings;
    its fields (with the number of runs) are its part of the report."""

    run_list: tuple[Run, ...] = field(metadata=IN_MEMORY)
    holdings: tuple[Holding, ...]
    poisoned: tuple[PoisonedRun, ...]
    context: ContextRef
    problems: tuple[Problem, ...] = field(metadata=IN_MEMORY)
    verification: Verification | None = field(metadata=IN_MEMORY)
    runs: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "runs", len(self.run_list))

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
            f"{len(self.poisoned)} poisoned rerun(s) among {self.runs} runs"
        )


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
        context.ref,
        context.problems,
        context.verification,
    )
