"""``results.csv``: one row per planned seq, derived from the journal alone.

The file carries the journal's final hash on every row. ``load_run_results`` re-derives the rows
and refuses a ``results.csv`` that differs, so an edited score is an error, not a silent change.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.design.schema import PLAN_COLUMNS
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import file_sha256
from needlepoint.run.folder import RUN_NAME, read_run_record
from needlepoint.run.journal import JournalState, read_line, walk
from needlepoint.run.records import OutcomeSummary, RunRecord
from needlepoint.safeio import open_read, write_chunks_atomic

RESULTS_NAME = "results.csv"
# The documented results.csv columns: the plan's, then the outcome's. The analysis reads the
# same tuple, so writer and reader cannot drift apart.
RESULT_COLUMNS = (
    *PLAN_COLUMNS,
    "status",
    "kind",
    "response_text",
    "http_status",
    "latency_s",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "cost",
    "simulation",
    "journal_sha256",
)


class Rows:
    """A run's rows, re-derived from the journal each time they are walked.

    Only the slim outcomes (``slim_outcome``) stay in memory; an answer text too long to keep is
    read again from its journal line when its row is produced. So walking the rows of a journal
    of 480 MB costs the memory of one record, not of the file.
    """

    def __init__(self, run_dir: Path, plan: Any, state: JournalState, simulation: bool, head: str):
        self._run_dir, self._plan, self._state = run_dir, plan, state
        self._simulation, self._head = simulation, head

    def __len__(self) -> int:
        return len(self._plan)

    def __getitem__(self, index: int | slice) -> Any:
        """A row or a slice of rows (for notebooks and tests), produced by walking the rows."""
        return list(self)[index]

    def __iter__(self) -> Iterator[dict[str, str]]:
        def text_of(outcome: OutcomeSummary) -> str:
            if outcome.response_text is not None:
                return outcome.response_text
            return str(read_line(self._run_dir, outcome.at)["classification"]["response_text"])

        return derive_rows(self._plan, self._state, self._simulation, self._head, text_of)


@dataclass(frozen=True)
class RunResults:
    """A run's rows (results.csv columns, as strings) and where they came from."""

    rows: Rows
    simulation: bool
    journal_sha256: str
    prepared_fingerprint: str
    prepared_dir: Path


def _cell(value: Any) -> str:
    """Empty means unknown; never write 0 for something we do not know."""
    if value is None or isinstance(value, bool):
        return ""
    return repr(value) if isinstance(value, float) else str(value)


_OUTCOME_CELLS = ("http_status", "latency_s", "prompt_tokens", "completion_tokens")
_OUTCOME_CELLS += ("reasoning_tokens", "cost")


def derive_rows(
    plan: Any,
    state: JournalState,
    simulation: bool,
    head: str,
    text_of: Callable[[OutcomeSummary], str],
) -> Iterator[dict[str, str]]:
    """One row per planned seq, from the plan rows and the journal's folded state."""
    for p in plan:
        row = {name: str(getattr(p, name)) for name in PLAN_COLUMNS}
        outcome = state.outcomes.get(p.seq)
        if outcome is not None:
            row.update(
                status=outcome.status,
                kind=outcome.kind,
                response_text=text_of(outcome),
                **{name: _cell(getattr(outcome, name)) for name in _OUTCOME_CELLS},
            )
        else:
            # Attempted without an outcome: the runner died mid-request; it may have executed.
            dangling = p.seq in state.attempts
            row.update(
                status="protocol_failure" if dangling else "unexecuted",
                kind="indeterminate_interrupted" if dangling else "",
                response_text="",
                **dict.fromkeys(_OUTCOME_CELLS, ""),
            )
        row["simulation"] = "true" if simulation else "false"
        row["journal_sha256"] = head
        yield row


def csv_cell(value: str) -> str:
    """One CSV cell as the csv module writes it (quoted when it holds a comma, a quote or a line
    end), and also quoted for a bare CR, which the csv module leaves bare though every CSV
    reader, Python's included, ends a row there."""
    if any(c in value for c in ',"\n\r'):
        return '"' + value.replace('"', '""') + '"'
    return value


def csv_chunks(rows: Iterable[dict[str, str]]) -> Iterator[bytes]:
    """results.csv as bytes: the header, then one chunk per row (a row of a 16 MiB answer costs
    a few copies of that answer; the csv module would hold it as 4-byte characters, twice)."""
    yield (",".join(RESULT_COLUMNS) + "\n").encode("utf-8")
    for row in rows:
        yield (",".join(csv_cell(row[name]) for name in RESULT_COLUMNS) + "\n").encode("utf-8")


def load_frozen_plan(run_dir: Path, run: RunRecord, prepared_dir: str | Path | None) -> Any:
    """Load the run's prepared folder and check it is byte for byte the one the run used."""
    from needlepoint.design.prepared import load_prepared

    # run.json names the prepared folder relative to the run folder (no machine paths)
    root = Path(prepared_dir) if prepared_dir else run_dir / run.prepared_dir
    prepared = load_prepared(root)
    if prepared.fingerprint != run.prepared_fingerprint:
        raise NeedlepointError(
            f"{root}: manifest fingerprint differs from {run_dir / RUN_NAME}: "
            "not the prepared folder this run used"
        )
    # load_prepared checked manifest.json against its schema, which requires the files map.
    for name, sha in sorted(prepared.manifest["files"].items()):
        if (root / name).exists() and file_sha256(root / name) != sha:
            raise NeedlepointError(f"{root / name}: differs from manifest.json (edited?)")
    return prepared


def derive(run_dir: str | Path, prepared_dir: str | Path | None = None) -> RunResults:
    """Re-derive a run's rows from its journal, refusing a broken chain."""
    root = Path(run_dir)
    run = read_run_record(root)
    walked = walk(root).checked()
    head = walked.chain.head
    prepared = load_frozen_plan(root, run, prepared_dir)
    rows = Rows(root, prepared.plan, walked.state, run.simulation, head)
    return RunResults(rows, run.simulation, head, prepared.fingerprint, prepared.root)


# The results.csv cells that differ between any two live runs of the same answers, sequential
# ones too: the latency each request measured, and the journal's hash (its records carry times).
# Every other cell is a function of the plan and the answers, whatever order the answers came
# in (`run --concurrency`).
RUN_SPECIFIC_COLUMNS = ("latency_s", "journal_sha256")


def answer_bytes(run_dir: str | Path, prepared_dir: str | Path | None = None) -> bytes:
    """results.csv as ``needlepoint results`` writes it, with the RUN_SPECIFIC_COLUMNS cells
    left empty: equal byte for byte for two runs that received the same answers."""
    blank = dict.fromkeys(RUN_SPECIFIC_COLUMNS, "")
    return b"".join(csv_chunks({**row, **blank} for row in derive(run_dir, prepared_dir).rows))


def write_results(run_dir: str | Path, prepared_dir: str | Path | None = None) -> RunResults:
    """Write results.csv from the journal (``needlepoint results RUNDIR``), row by row."""
    results = derive(run_dir, prepared_dir)
    write_chunks_atomic(Path(run_dir) / RESULTS_NAME, csv_chunks(results.rows))
    return results


def differs_at(path: Path, rows: Iterable[dict[str, str]]) -> int | None:
    """The first line at which ``path`` differs from the CSV of ``rows`` (None: identical),
    compared one row at a time."""
    line = 1
    with open_read(path) as fh:
        for chunk in csv_chunks(rows):
            got = fh.read(len(chunk))
            if got != chunk:
                same = next(
                    (i for i, (x, y) in enumerate(zip(got, chunk, strict=False)) if x != y),
                    len(got),
                )
                return line + chunk.count(b"\n", 0, same)
            line += chunk.count(b"\n")
        return line if fh.read(1) else None


def load_run_results(run_dir: str | Path, prepared_dir: str | Path | None = None) -> RunResults:
    """Rows for analysis; refuses a results.csv that is not exactly the journal's derivation."""
    results = derive(run_dir, prepared_dir)
    path = Path(run_dir) / RESULTS_NAME
    if os.path.lexists(path):
        number = differs_at(path, results.rows)
        if number is not None:
            raise NeedlepointError(
                f"{path}:{number}: differs from the journal's re-derivation (edited?); "
                f"rerun `needlepoint results {run_dir}` to see the journal's rows"
            )
    return results


def summary_lines(results: RunResults) -> list[str]:
    """Counts by status, for the command line and notebooks."""
    counts: dict[str, int] = {}
    for row in results.rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    label = "SIMULATION - not a model result. " if results.simulation else ""
    parts = ", ".join(f"{k} {counts[k]}" for k in sorted(counts))
    return [
        f"{label}{len(results.rows)} planned rows: {parts}",
        f"journal {results.journal_sha256}",
    ]


def journal_summary(run_dir: str | Path) -> list[str]:
    """What the journal says, session by session: for notebooks and the command line."""
    import statistics
    from collections import Counter

    walked = walk(run_dir).checked()
    state = walked.state
    said: dict[int, str] = {}
    for n, r in state.sessions.items():
        reason = f", override: {r.override_reason}" if r.override_reason else ""
        said[n] = (
            f"session {r.session} at {r.time}: allow {r.allow}, min gap {r.min_gap_s:g} s{reason}"
        )
    for n, stop in state.stops.items():
        said[n] = f"  stopped at {stop.time}: {stop.reason}: {stop.detail}"
    out = [said[n] for n in sorted(said)]
    gaps = [a.gap_s for a in state.sent if a.gap_s is not None]
    outcomes = state.outcomes.values()
    kinds = Counter(o.status + (f" ({o.kind})" if o.kind else "") for o in outcomes)
    latencies = [o.latency_s for o in outcomes if o.latency_s is not None]
    out.append(f"attempts {state.attempt_count}, outcomes {len(state.outcomes)}")
    out += [f"  {k}: {v}" for k, v in sorted(kinds.items())]
    if gaps:
        out.append(f"gaps: min {min(gaps):g} s, median {statistics.median(gaps):g} s")
    if latencies:
        out.append(f"latency: median {statistics.median(latencies):g} s")
    unknown = len(state.unknown_cost)
    out.append(f"cost: {state.spent:.6f} known" + (f", {unknown} unknown" if unknown else ""))
    out.append(f"journal sha256 {walked.chain.head}")
    return out
