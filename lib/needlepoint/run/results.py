"""``results.csv``: one row per planned seq, derived from the journal alone.

The file carries the journal's final hash on every row. ``load_run_results`` re-derives the rows
and refuses a ``results.csv`` that differs, so an edited score is an error, not a silent change.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.design.prepared import PLAN_COLUMNS
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import file_sha256, write_bytes_atomic
from needlepoint.run.answers import reasoning_tokens
from needlepoint.run.folder import read_run_record
from needlepoint.run.journal import read_chain
from needlepoint.run.journal_records import JournalState
from needlepoint.run.run_record import RunRecord

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


@dataclass(frozen=True)
class RunResults:
    """A run's rows (results.csv columns, as strings) and where they came from."""

    rows: list[dict[str, str]]
    simulation: bool
    journal_sha256: str
    prepared_fingerprint: str
    prepared_dir: Path


def _cell(value: Any) -> str:
    """Empty means unknown; never write 0 for something we do not know."""
    if value is None or isinstance(value, bool):
        return ""
    return repr(value) if isinstance(value, float) else str(value)


def _tokens(usage: Any, name: str) -> str:
    value = usage.get(name) if isinstance(usage, dict) else None
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else ""


def derive_rows(plan: Any, records: Any, simulation: bool, head: str) -> list[dict[str, str]]:
    """One row per planned seq, from the plan rows and the journal records."""
    state = JournalState.of(records)
    rows = []
    for p in plan:
        row = {name: str(getattr(p, name)) for name in PLAN_COLUMNS}
        outcome = state.outcomes.get(p.seq)
        if outcome is not None:
            c = outcome["classification"]
            usage = outcome.get("usage")
            row.update(
                status=c["status"],
                kind=c["kind"],
                response_text=c["response_text"],
                http_status=_cell(outcome.get("http_status")),
                latency_s=_cell(outcome.get("latency_s")),
                prompt_tokens=_tokens(usage, "prompt_tokens"),
                completion_tokens=_tokens(usage, "completion_tokens"),
                reasoning_tokens=_cell(reasoning_tokens(usage)),
                cost=_cell(outcome.get("cost")),
            )
        else:
            # Attempted without an outcome: the runner died mid-request; it may have executed.
            dangling = p.seq in state.attempts
            row.update(
                status="protocol_failure" if dangling else "unexecuted",
                kind="indeterminate_interrupted" if dangling else "",
                response_text="",
                **dict.fromkeys(
                    (
                        "http_status",
                        "latency_s",
                        "prompt_tokens",
                        "completion_tokens",
                        "reasoning_tokens",
                        "cost",
                    ),
                    "",
                ),
            )
        row["simulation"] = "true" if simulation else "false"
        row["journal_sha256"] = head
        rows.append(row)
    return rows


def csv_bytes(rows: list[dict[str, str]]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=RESULT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode("utf-8")


def load_frozen_plan(run_dir: Path, run: RunRecord, prepared_dir: str | Path | None) -> Any:
    """Load the run's prepared folder and check it is byte for byte the one the run used."""
    from needlepoint.design.prepared import load_prepared

    # run.json names the prepared folder relative to the run folder (no machine paths)
    root = Path(prepared_dir) if prepared_dir else run_dir / run.prepared_dir
    prepared = load_prepared(root)
    if prepared.fingerprint != run.prepared_fingerprint:
        raise NeedlepointError(
            f"{root}: manifest fingerprint differs from {run_dir / 'run.json'}: "
            "not the prepared folder this run used"
        )
    for name, sha in sorted(prepared.manifest.get("files", {}).items()):
        if (root / name).exists() and file_sha256(root / name) != sha:
            raise NeedlepointError(f"{root / name}: differs from manifest.json (edited?)")
    return prepared


def derive(run_dir: str | Path, prepared_dir: str | Path | None = None) -> RunResults:
    """Re-derive a run's rows from its journal, refusing a broken chain."""
    root = Path(run_dir)
    run = read_run_record(root)
    chain = read_chain(root)
    if not chain.ok:
        raise NeedlepointError(f"journal chain broken: {chain.problems[0]}")
    prepared = load_frozen_plan(root, run, prepared_dir)
    simulation = run.simulation
    rows = derive_rows(prepared.plan, chain.records, simulation, chain.head)
    return RunResults(rows, simulation, chain.head, prepared.fingerprint, prepared.root)


def write_results(run_dir: str | Path, prepared_dir: str | Path | None = None) -> RunResults:
    """Write results.csv from the journal (``needlepoint results RUNDIR``)."""
    results = derive(run_dir, prepared_dir)
    write_bytes_atomic(Path(run_dir) / RESULTS_NAME, csv_bytes(results.rows))
    return results


def load_run_results(run_dir: str | Path, prepared_dir: str | Path | None = None) -> RunResults:
    """Rows for analysis; refuses a results.csv that is not exactly the journal's derivation."""
    results = derive(run_dir, prepared_dir)
    path = Path(run_dir) / RESULTS_NAME
    if path.exists():
        on_disk = path.read_bytes().split(b"\n")
        derived = csv_bytes(results.rows).split(b"\n")
        for number, (a, b) in enumerate(zip(on_disk, derived, strict=False), start=1):
            if a != b:
                raise NeedlepointError(
                    f"{path}:{number}: differs from the journal's re-derivation (edited?); "
                    f"rerun `needlepoint results {run_dir}` to see the journal's rows"
                )
        if len(on_disk) != len(derived):
            raise NeedlepointError(
                f"{path}: {len(on_disk) - 1} lines, the journal derives "
                f"{len(derived) - 1} (edited?)"
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

    chain = read_chain(run_dir)
    if not chain.ok:
        raise NeedlepointError(f"journal chain broken: {chain.problems[0]}")
    out: list[str] = []
    kinds: Counter[str] = Counter()
    gaps, latencies = [], []
    for r in chain.records:
        if r["type"] == "session":
            reason = f", override: {r['override_reason']}" if r.get("override_reason") else ""
            out.append(
                f"session {r['session']} at {r['time']}: allow {r['allow']}, "
                f"min gap {r['min_gap_s']:g} s{reason}"
            )
        elif r["type"] == "stop":
            out.append(f"  stopped at {r['time']}: {r['reason']}: {r['detail']}")
        elif r["type"] == "attempt" and r.get("gap_s") is not None:
            gaps.append(r["gap_s"])
        elif r["type"] == "outcome":
            c = r["classification"]
            kinds[c["status"] + (f" ({c['kind']})" if c["kind"] else "")] += 1
            if r.get("latency_s") is not None:
                latencies.append(r["latency_s"])
    state = JournalState.of(chain.records)
    out.append(f"attempts {state.attempt_count}, outcomes {len(state.outcomes)}")
    out += [f"  {k}: {v}" for k, v in sorted(kinds.items())]
    if gaps:
        out.append(f"gaps: min {min(gaps):g} s, median {statistics.median(gaps):g} s")
    if latencies:
        out.append(f"latency: median {statistics.median(latencies):g} s")
    unknown = len(state.unknown_cost)
    out.append(f"cost: {state.spent:.6f} known" + (f", {unknown} unknown" if unknown else ""))
    out.append(f"journal sha256 {chain.head}")
    return out
