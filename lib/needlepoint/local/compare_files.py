"""The local comparison's evidence folder: where each part goes, its record, and its README.md.

The record (`local-compare.json`) states what the folder was made from: the protocol file's
name and SHA-256, each packaged model with its alias and body profile, and the server window. A
second invocation resumes the folder only when it asks for exactly that. README.md is derived
from the folder's own files (comparison, journals, audits), so it can be re-derived and checked.
"""

from __future__ import annotations

import datetime as dt
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError

MARKER = "local-compare.json"
MARKER_KIND = "needlepoint-local-compare"
MARKER_FORMAT = 1


@dataclass(frozen=True)
class Entrant:
    """One packaged model (its key names its folders) and the body profile it is asked with."""

    key: str
    body_profile: str


@dataclass(frozen=True)
class Layout:
    """The evidence folder's parts, one prepared, run and analysis folder per model."""

    root: Path

    def prepared(self, e: Entrant) -> Path:
        return self.root / "prepared" / e.key

    def run(self, e: Entrant) -> Path:
        return self.root / "runs" / e.key

    def analysis(self, e: Entrant) -> Path:
        return self.root / "analysis" / e.key

    @property
    def comparison(self) -> Path:
        return self.root / "comparison"


def evidence_folder(root: Path, label: str, date: str | None) -> Path:
    """``root/<date>-<label>``; without a date, the one existing folder of that label, if any.

    So running the same command again resumes, even on another day.
    """
    from needlepoint.notebook.pipeline import check_date, check_label

    check_label(label)
    if date is not None:
        check_date(date)
        return root / f"{date}-{label}"
    pattern = re.compile(r"\d{8}-" + re.escape(label))
    found = sorted(p for p in root.glob(f"*-{label}") if pattern.fullmatch(p.name))
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise NeedlepointError(
            f"{root}: several folders with label {label!r} ({names}); give --date"
        )
    return found[0] if found else root / f"{dt.date.today():%Y%m%d}-{label}"


def marker_record(
    protocol_path: Path, entrants: Sequence[Entrant], n_ctx: int, declared: Any = None
) -> dict[str, Any]:
    """What the folder is made from; model aliases come from the packaged-model table.

    ``declared``: the declaration the runs are started under; its SHA-256 is recorded (the key
    is absent without one, as in folders made before declarations existed).
    """
    from needlepoint.jsonio import sha256_hex
    from needlepoint.local.model import model_spec

    extra = {} if declared is None else {"declaration_sha256": declared.sha256}
    return extra | {
        "format": MARKER_FORMAT,
        "kind": MARKER_KIND,
        "protocol_file": protocol_path.name,
        "protocol_sha256": sha256_hex(protocol_path.read_bytes()),
        "models": [
            {"key": e.key, "model": model_spec(e.key).alias, "body_profile": e.body_profile}
            for e in entrants
        ],
        "n_ctx": n_ctx,
        "one_at_a_time": True,
    }


def check_marker(
    layout: Layout,
    protocol_path: Path,
    entrants: Sequence[Entrant],
    n_ctx: int,
    declaration: str | Path | None = None,
) -> None:
    """Write the record into a new folder; in an existing one, refuse anything else."""
    from needlepoint.jsonio import canonical_bytes, read_json, write_bytes_atomic
    from needlepoint.run.declaration import read_declaration

    declared = None if declaration is None else read_declaration(declaration)
    wanted = marker_record(protocol_path, entrants, n_ctx, declared)
    path = layout.root / MARKER
    if path.is_file():
        saved = read_json(path)
        for key in sorted(set(wanted) | set(saved)):
            if saved.get(key) != wanted.get(key):
                raise NeedlepointError(
                    f"{path}: made with {key} {saved.get(key)!r}, this invocation has "
                    f"{wanted.get(key)!r}; use a new --label"
                )
        return
    if layout.root.exists() and (not layout.root.is_dir() or any(layout.root.iterdir())):
        raise NeedlepointError(f"{layout.root}: exists and has no {MARKER}; use a new --label")
    layout.root.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, canonical_bytes(wanted) + b"\n")


def journal_timing(run_dir: Path) -> dict[str, Any]:
    """From the journal: first request to last answer, and median seconds per request by length."""
    from needlepoint.design.prepared import load_prepared
    from needlepoint.run.folder import read_run_record
    from needlepoint.run.journal import walk

    prepared = load_prepared(run_dir / read_run_record(run_dir).prepared_dir)
    lengths = {row.seq: row.length for row in prepared.plan}
    state = walk(run_dir).state  # one record at a time: bodies not kept
    times = [t["time"] for t in state.timeline() if t["type"] in ("attempt", "outcome")]
    by_length: dict[int, list[float]] = {}
    for o in state.outcomes.values():
        if o.latency_s is not None:
            by_length.setdefault(lengths[o.seq], []).append(o.latency_s)
    span = dt.datetime.fromisoformat(times[-1]) - dt.datetime.fromisoformat(times[0])
    return {
        "span_min": span.total_seconds() / 60,
        "sessions": len(state.sessions),
        "median_s": {n: statistics.median(v) for n, v in sorted(by_length.items())},
    }


def _failures(kinds: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "none"


def _score(run: Any, group: str) -> str:
    """Strict correct/valid, lenient correct in brackets, and how many had no valid answer."""
    total = next(s for s in run.scores if s.group.startswith(group))
    return f"{total.correct}/{total.valid} [{total.lenient_correct}], {total.not_valid} not valid"


def readme_text(
    layout: Layout,
    entrants: Sequence[Entrant],
    audits: dict[str, list[str]],
    sections: Sequence[str] = (),
) -> str:
    """README.md for the evidence folder, from its record, comparison, journals and audits.

    ``sections``: lines placed after the result (``compare_effects``: what each difference is
    made of, and the other runs of the design on record).
    """
    from needlepoint.compare.record import read_comparison
    from needlepoint.jsonio import read_json

    marker = read_json(layout.root / MARKER)
    doc = read_comparison(layout.comparison / "comparison.json")
    runs = {Path(r.run_dir).name: r for r in doc.runs}
    models = ", ".join(f"`{m['model']}` ({m['body_profile']})" for m in marker["models"])
    out = [
        f"# Two local models, one design: `{layout.root.name}`",
        "",
        f"Made by `needlepoint local-compare` from `{marker['protocol_file']}` (SHA-256 "
        f"`{marker['protocol_sha256'][:16]}…`): {models}, served one at a time by llama.cpp on "
        f"127.0.0.1 with a {marker['n_ctx']}-token window, each run complete and audited. "
        f"Design fingerprint `{doc.design_fingerprint}`.",
        "",
        "## Result (strict; lenient in brackets, exploratory)",
        "",
        "| run | model | profile | decision | complete cases | difference [interval] "
        "| answer present (B, M, E) | answer absent (A) | protocol failures |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e in entrants:
        r = runs[e.key]
        diff = "—" if r.difference is None else f"{r.difference:.4g}"
        if r.interval is not None:
            diff += f" [{r.interval[0]:.4g}, {r.interval[1]:.4g}]"
        out.append(
            f"| `runs/{e.key}`{' (SIMULATION)' if r.simulation else ''} | `{r.model}` | "
            f"{r.body_profile} | {r.decision} | "
            f"{r.complete_cases} of {r.planned_cases} | {diff} | {_score(r, 'answer present')} | "
            f"{_score(r, 'answer absent')} | {_failures(r.protocol_failures)} |"
        )
    out += ["", "Reasons, caveats and every cell: `comparison/comparison.md`.", "", *sections]
    out += ["## Timing (from each journal)", ""]
    out += ["| model | sessions | first request to last answer | median s/request by length |"]
    out += ["|---|---|---|---|"]
    for e in entrants:
        t = journal_timing(layout.run(e))
        med = ", ".join(f"{n} records {s:.1f} s" for n, s in t["median_s"].items())
        out.append(f"| {e.key} | {t['sessions']} | {t['span_min']:.1f} min | {med} |")
    out += ["", "## Audit (`needlepoint audit-run`)", ""]
    for key, lines in audits.items():
        checked = ", ".join(x.removeprefix("checked ") for x in lines if x.startswith("checked "))
        out.append(f"- {key}: {lines[-1]} ({checked})")
    out += ["", "## Files", "", "| path | what |", "|---|---|"]
    out += [f"| `{path}` | {what} |" for path, what in _FILES if _present(layout.root, path)]
    return "\n".join(out) + "\n"


_FILES = (
    (MARKER, "what the folder was made from; a rerun resumes only when it matches"),
    (
        "prepared/<model>/",
        "the model variant of the design (`needlepoint prepare --model --body-profile`); "
        "`token_counts.json`: every prompt counted by the served model before its first request",
    ),
    (
        "runs/<model>/",
        "the run folder: `run.json` (server facts under `extra.local_server`, the gap override "
        "and its reason), `journal.jsonl` and its head, `provenance.jsonl`, "
        "`context_manifest.json`, `results.csv`",
    ),
    (
        "analysis/<model>/",
        "the run's preregistered analysis, alone: `analysis.json`, `summary.md`, figures",
    ),
    ("comparison/", "`comparison.json`, `comparison.md` and four figures (`compare`)"),
    ("01-design.ipynb", "the design: tables and the execution order (`figures/`)"),
    ("04-analysis-<model>.ipynb", "each run's analysis notebook"),
    ("07-compare.ipynb", "the comparison notebook"),
    ("*.html, notebook-*.css", "the notebooks rendered, and their stylesheet"),
)


def _present(root: Path, shown: str) -> bool:
    """Whether a row of the file table names something in the folder (notebooks are optional)."""
    first = shown.split(",")[0].replace("<model>", "*").rstrip("/")
    return any(root.glob(first))


def write_readme(
    layout: Layout,
    entrants: Sequence[Entrant],
    audits: dict[str, list[str]],
    sections: Sequence[str] = (),
) -> Path:
    """Write README.md into the evidence folder."""
    from needlepoint.jsonio import write_bytes_atomic

    path = layout.root / "README.md"
    text = readme_text(layout, entrants, audits, sections)
    write_bytes_atomic(path, text.encode("utf-8"))
    return path
