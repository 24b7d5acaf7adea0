"""Two packaged models, one design, each run live and complete, then compared side by side.

`needlepoint local-compare` prepares one model variant of the design per packaged model (same
design fingerprint; the base model with the completion profile, the instruct model with chat),
serves each model in turn on 127.0.0.1, checks every prompt's token count against the server's
window before the first request, and runs the variant with every guarantee of `run` (the gap
override and its reason, and the server's facts, recorded in run.json). Then each run must pass
`audit-run`; results, the analyses and the comparison are written into one evidence folder.

One model at a time (two llama.cpp servers would share the same two cores). Running it again
resumes: prepared folders are reused when the protocol gives them, complete runs are left alone,
an unfinished run is resumed at its recorded address.

The local comparison's evidence folder: where each part goes, its record, and its README.md.

The record (`local-compare.json`) states what the folder was made from: the protocol file's
name and SHA-256, each packaged model with its alias and body profile, and the server window. A
second invocation resumes the folder only when it asks for exactly that. README.md is derived
from the folder's own files (comparison, journals, audits), so it can be re-derived and checked.

Two sections of the local comparison's README: what each run's difference is made of, and the
other runs of the same design on record.

The preregistered difference averages two changes from low to high similarity, in B − M and in
E − M (each per complete case, then over the cases); saying both, with each position's accuracy
under high similarity, tells a reader whether near names deepened a *middle* loss or pulled an
end position down with it. The runs on record come from the study record (`registry`).

The local comparison's notebooks: the design, each run's analysis, and the comparison.

They run with papermill inside the evidence folder, as `needlepoint pipeline` runs them, and
receive only paths relative to it. The live runs themselves are not notebooks: they are sent by
the command, which shows their progress, so that Ctrl-C reaches the runner directly.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import socket
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from needlepoint.errors import NeedlepointError
from needlepoint.local.live import KEY_ENV, PLACEHOLDER_KEY, check_compare_inputs, local_route
from needlepoint.safeio import relative_path

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

    ``sections``: lines placed after the result (``readme_sections``: what each difference is
    made of, and the other runs of the design on record).
    """
    from needlepoint.compare.record import read_comparison
    from needlepoint.jsonio import read_json
    from needlepoint.run.folder import read_provenance
    from needlepoint.safetext import md_text
    from needlepoint.study.readme import load_text, machine_text

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
    out += [
        "| model | sessions | first request to last answer | median s/request by length | "
        "machine | 1-min load at start → end |",
        "|---|---|---|---|---|---|",
    ]
    for e in entrants:
        t = journal_timing(layout.run(e))
        med = ", ".join(f"{n} records {s:.1f} s" for n, s in t["median_s"].items())
        prov = read_provenance(layout.run(e))
        load = f"{load_text(prov, 'session_start')} → {load_text(prov, 'session_end')}"
        out.append(
            f"| {e.key} | {t['sessions']} | {t['span_min']:.1f} min | {med} | "
            f"{md_text(machine_text(prov))} | {load} |"
        )
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


def _changes(analysis_dir: Path) -> tuple[int, Fraction, Fraction] | None:
    """(complete cases, mean change in B − M, mean change in E − M): the effects the run's
    analysis.json holds (each per complete case, lengths averaged, then over the cases)."""
    from needlepoint.analysis.effects import find
    from needlepoint.analysis.primary import DIFFERENCE
    from needlepoint.analysis.record import read_document

    effects = read_document(analysis_dir / "analysis.json").effects
    if effects.cases == 0:
        return None
    bm, em = (find(effects.measures, m, DIFFERENCE).estimate_exact for m in ("B − M", "E − M"))
    assert bm is not None and em is not None  # complete cases give every estimate
    return effects.cases, Fraction(bm), Fraction(em)


def _number(x: Fraction) -> str:
    return f"{float(x):.3g}" if x.denominator != 1 else str(x.numerator)


def effect_lines(layout: Layout, entrants: Sequence[Entrant]) -> list[str]:
    """For each run with complete cases: the two changes behind its difference, and B, M, E
    under high similarity."""
    from needlepoint.compare.record import read_comparison

    doc = read_comparison(layout.comparison / "comparison.json")
    runs = {Path(r.run_dir).name: r for r in doc.runs}
    out = ["## What each difference is made of", ""]
    out += [
        "The preregistered difference is the mean over complete cases of two changes from low "
        "to high similarity, in B − M and in E − M, halved (middle loss is (B + E)/2 − M). "
        "Both, and each position under high similarity (all cases):",
        "",
    ]
    for e in entrants:
        run = runs[e.key]
        changes = _changes(layout.analysis(e))
        high = {c.condition: c for c in run.accuracy if c.similarity == "high"}
        cells = ", ".join(f"{k} {high[k].correct}/{high[k].valid}" for k in "BME" if k in high)
        if changes is None or run.difference is None:
            out.append(f"- `runs/{e.key}`: {run.decision}, no difference; high similarity {cells}.")
            continue
        n, bm, em = changes
        line = (
            f"- `runs/{e.key}`: over {n} complete case(s), B − M changes by {_number(bm)} and "
            f"E − M by {_number(em)} (difference {_number((bm + em) / 2)}); high similarity {cells}"
        )
        if em == 0 and bm != 0:
            line += ". All of it is in B − M; E − M does not change"
            if (
                "E" in high
                and "M" in high
                and high["E"].correct * high["M"].valid <= (high["M"].correct * high["E"].valid)
            ):
                line += (
                    " (under high similarity E is right no more often than M): the near names "
                    "pull the end down with the middle rather than deepen a middle loss"
                )
        out.append(line + ".")
    return [*out, ""]


def on_record_lines(layout: Layout, entrants: Sequence[Entrant], root: Path) -> list[str]:
    """The other runs of this folder's design under ``root`` (not these journals), each with its
    decision and its agreement with this folder's run of the same request bytes."""
    from needlepoint.study.registry import agreement, collect, read_entry, run_line

    mine = [read_entry(layout.run(e), f"runs/{e.key}") for e in entrants]
    designs = {r.design_fingerprint for r in mine}
    journals = {r.journal_sha256 for r in mine}
    reg = collect(root)
    others = [
        r
        for r in reg.runs
        if r.design_fingerprint in designs and r.journal_sha256 not in journals and not r.pilot
    ]
    out = ["## Other runs of this design on record", ""]
    if not others:
        return [*out, f"None under `{root.name}` (`needlepoint registry`).", ""]
    out += [
        f"Found under `{root.name}` by `needlepoint registry`; each analysed alone, never pooled "
        "with this comparison (its folder's README says why it was run):",
        "",
    ]
    for other in others:
        out.append(f"- {run_line(other)}")
        for r in mine:
            line = agreement(r, other)
            if line is not None:
                out.append(f"  - same request bytes as `{r.path}`: {line}")
    return [*out, ""]


def shows_lines(layout: Layout, entrants: Sequence[Entrant]) -> list[str]:
    """What each run shows per length, read from its analysis.json and nothing else: Q1's shape
    verdict per similarity, refusal (A) accuracy, and what the near names did to the wrong
    answers; then Q2 and its robustness, which the preregistered analysis gives per run."""
    from needlepoint.analysis.record import read_document

    out = ["## What it shows, per model and length", ""]
    out += [
        "Q1's shape verdict is read from B − M and E − M, Holm-adjusted (a U-shape only when both "
        "ends beat the middle); Q2 and its robustness are one per run, over both lengths. Under "
        "high similarity the reference design places its six near names at fixed slots: all "
        "after the target at B, three before and three after at M, all before at E.",
        "",
    ]
    for e in entrants:
        doc = read_document(layout.analysis(e) / "analysis.json")
        p = doc.primary
        shapes = doc.effects.shapes
        out.append(f"- `runs/{e.key}`: Q2 {p.decision}; {doc.robustness.verdict}.")
        for n in sorted({c.length for c in doc.secondary.accuracy}):
            verdicts = (
                "; ".join(
                    f"{r.similarity} similarity {r.verdict} (B {r.counts['B']}, M {r.counts['M']}, "
                    f"E {r.counts['E']})"
                    for r in (shapes.rows if shapes is not None else ())
                    if r.length == n
                )
                or "no shape verdict (no complete case)"
            )
            refusal = [c for c in doc.secondary.accuracy if c.length == n and c.condition == "A"]
            a = ", ".join(f"{c.similarity} {c.correct}/{c.valid}" for c in refusal)
            near = {r.condition: r for r in doc.diagnostics.preceding if r.length == n}
            named = ", ".join(
                f"{k} {near[k].near} of {near[k].wrong} wrong" for k in "BME" if k in near
            )
            out.append(
                f"  - {n} records: Q1 {verdicts}. Absent target (A) answered UNKNOWN: {a}. "
                f"High-similarity wrong answers naming a near name: {named}."
            )
    return [*out, ""]


def readme_sections(layout: Layout, entrants: Sequence[Entrant], root: Path) -> list[str]:
    """The sections README.md places after the result table: what each run shows, what each
    difference is made of, and the other runs of the design on record."""
    return [
        *shows_lines(layout, entrants),
        *effect_lines(layout, entrants),
        *on_record_lines(layout, entrants, root),
    ]


def notebook_plan(
    layout: Layout, entrants: Sequence[Entrant], protocol_path: Path
) -> list[tuple[str, str, dict[str, Any]]]:
    """(source notebook, executed name, parameters) in order, with paths relative to the folder."""

    def rel(path: Path) -> str:
        return relative_path(path, layout.root)

    plan: list[tuple[str, str, dict[str, Any]]] = [
        ("01-design", "01-design", {"protocol_file": rel(protocol_path), "figures_dir": "figures"})
    ]
    for e in entrants:
        params = {
            "run_dir": rel(layout.run(e)),
            "prepared_dir": rel(layout.prepared(e)),
            "analysis_dir": rel(layout.analysis(e)),
        }
        plan.append(("04-analysis", f"04-analysis-{e.key}", params))
    compare = {
        "run_dirs": [rel(layout.run(e)) for e in entrants],
        "simulated": None,
        "comparison_dir": rel(layout.comparison),
        "allow_simulated": False,
    }
    plan.append(("07-compare", "07-compare", compare))
    return plan


def execute_all(
    layout: Layout,
    entrants: Sequence[Entrant],
    protocol_path: Path,
    notebooks_dir: Path,
    say: Callable[[str], None],
) -> None:
    """Execute the design, analysis and comparison notebooks into the evidence folder."""
    from needlepoint.notebook.pipeline import ensure_kernel, execute_notebook, plan_parameters

    plan = notebook_plan(layout, entrants, protocol_path)
    for source, _, _ in plan:
        if not (notebooks_dir / f"{source}.ipynb").is_file():
            raise NeedlepointError(
                f"{notebooks_dir / source}.ipynb: notebook not found (run from the repository root)"
            )
    for source, _, params in plan:
        # Refuses a parameter the notebook does not declare, before anything runs.
        plan_parameters([notebooks_dir / f"{source}.ipynb"], params)
    ensure_kernel()
    for i, (source, name, params) in enumerate(plan, start=1):
        say(f"[notebook {i}/{len(plan)}] {name}")
        seconds = execute_notebook(
            notebooks_dir / f"{source}.ipynb", layout.root / f"{name}.ipynb", params, layout.root
        )
        say(f"  ok ({seconds:.1f} s)")


if TYPE_CHECKING:
    from needlepoint.run.records import RunRecord

DEFAULT_ENTRANTS = (Entrant("gemma3", "completion"), Entrant("smollm2", "chat"))
# One window for both models, so that the served context is not one more difference between
# them; the token check refuses a request that would not fit.
DEFAULT_N_CTX = 4096
Say = Callable[[str], None]


class RunStopped(NeedlepointError):
    """A stop rule ended a run before every planned request was attempted."""


class AuditFailed(NeedlepointError):
    """A finished run failed `audit-run`: nothing is analysed."""


@dataclass(frozen=True)
class CompareOutcome:
    """Where the evidence went, and each model's live seconds in this invocation."""

    folder: Path
    live_seconds: dict[str, float]


def run_local_compare(
    label: str,
    protocol_file: str | Path,
    *,
    entrants: Sequence[Entrant] = DEFAULT_ENTRANTS,
    n_ctx: int = DEFAULT_N_CTX,
    timeout_s: float = 300.0,
    evidence_root: str | Path = "evidence",
    notebooks_dir: str | Path = "notebooks",
    date: str | None = None,
    notebooks: bool = True,
    progress: str = "auto",
    say: Say = print,
    declaration: str | Path | None = None,
) -> CompareOutcome:
    """Prepare, run (or resume), audit, analyse and compare into ``<root>/<date>-<label>/``;
    every run under ``declaration`` when one is given (a resume must name the same one)."""
    protocol_path = Path(protocol_file)
    if not protocol_path.is_file():
        raise NeedlepointError(f"{protocol_path}: protocol file not found")
    if len({e.key for e in entrants}) != len(entrants) or len(entrants) < 2:
        raise NeedlepointError("local-compare needs at least two different packaged models")

    check_compare_inputs(protocol_path, entrants, timeout_s, progress)  # before any folder
    folder = evidence_folder(Path(evidence_root), label, date)
    layout = Layout(folder)
    check_marker(layout, protocol_path, entrants, n_ctx, declaration)
    design = prepare_variants(layout, protocol_path, entrants)
    say(f"{folder.name}: design fingerprint {design[:16]}…, {len(entrants)} model variants")
    live: dict[str, float] = {}
    for i, entrant in enumerate(entrants, start=1):
        done, planned = attempted(layout.run(entrant)), planned_count(layout.prepared(entrant))
        if done >= planned:
            say(f"[{i}/{len(entrants)}] {entrant.key}: complete ({done} of {planned} attempted)")
            continue
        say(f"[{i}/{len(entrants)}] {entrant.key}: {done} of {planned} attempted; serving")
        start = time.perf_counter()
        run_live(layout, entrant, n_ctx, timeout_s, progress, say, declaration)
        live[entrant.key] = time.perf_counter() - start
        say(f"[{i}/{len(entrants)}] {entrant.key}: complete in {live[entrant.key] / 60:.1f} min")
    finish(layout, entrants, protocol_path, Path(notebooks_dir), notebooks, say)
    return CompareOutcome(folder, live)


def prepare_variants(layout: Layout, protocol_path: Path, entrants: Sequence[Entrant]) -> str:
    """Prepare each model variant once (reused when it is what the protocol gives); the design."""
    from needlepoint.design.prepared import load_prepared, load_protocol, prepare
    from needlepoint.design.protocol import protocol_bytes
    from needlepoint.jsonio import sha256_hex
    from needlepoint.local.model import model_spec

    designs: dict[str, str] = {}
    for entrant in entrants:
        alias = model_spec(entrant.key).alias
        folder = layout.prepared(entrant)
        wanted = load_protocol(protocol_path, model=alias, body_profile=entrant.body_profile)
        if not folder.is_dir() or not any(folder.iterdir()):
            prepare(folder, protocol_path, model=alias, body_profile=entrant.body_profile)
        prepared = load_prepared(folder)
        if prepared.manifest["files"]["protocol.json"] != sha256_hex(protocol_bytes(wanted)):
            raise NeedlepointError(
                f"{folder}: prepared from another protocol than {protocol_path.name} for "
                f"{alias} ({entrant.body_profile}); use a new --label"
            )
        designs[entrant.key] = prepared.manifest["design_fingerprint"]
    first = entrants[0].key
    for key, fingerprint in designs.items():
        if fingerprint != designs[first]:
            raise NeedlepointError(f"{key}: design fingerprint differs from {first}'s")
    return designs[first]


def planned_count(prepared_dir: Path) -> int:
    """How many requests the prepared folder plans."""
    from needlepoint.design.prepared import load_prepared

    return len(load_prepared(prepared_dir).plan)


def attempted(run_dir: Path) -> int:
    """How many planned requests the run folder's journal has attempted (0 for a new folder)."""
    from needlepoint.run.folder import has_run_record
    from needlepoint.run.journal import walk

    return len(walk(run_dir).state.attempts) if has_run_record(run_dir) else 0


def recorded_run(run_dir: Path) -> RunRecord | None:
    """The run folder's run.json, or None before its first session."""
    from needlepoint.run.folder import has_run_record, read_run_record

    return read_run_record(run_dir) if has_run_record(run_dir) else None


def resume_port(record: RunRecord | None) -> int | None:
    """The port an unfinished run was sent to: a resume must use the same base URL."""
    if record is None:
        return None
    port = urlsplit(record.base_url or "").port
    if port is None:
        raise NeedlepointError("run.json: base_url has no port; this run cannot be resumed here")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the server binds: connections of the last session may linger in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            raise NeedlepointError(
                f"port {port} (this run's recorded base_url) is in use; a resumed run must be "
                "sent to the same address, so free that port and run the command again"
            ) from None
    return port


def check_same_server(record: RunRecord | None, facts: dict[str, Any]) -> None:
    """A resumed run must be answered by the same weights in the same window as it began."""
    if record is None:
        return
    saved = record.extra.get("local_server") or {}
    for name, was, now in (
        ("GGUF sha256", (saved.get("gguf") or {}).get("sha256"), facts["gguf"]["sha256"]),
        ("n_ctx", saved.get("n_ctx"), facts["n_ctx"]),
    ):
        if was != now:
            raise NeedlepointError(
                f"run.json: the run began with {name} {was!r}, the server now has {now!r}; "
                "use a new --label"
            )


# The server and its checks, as module attributes so that tests can put a loopback server here.
def serve(key: str, n_ctx: int, port: int | None, log_path: Path) -> Any:
    """The packaged model served on 127.0.0.1 (a context manager yielding a Server)."""
    from needlepoint.local.server import served_model

    return served_model(key, n_ctx=n_ctx, port=port, log_path=log_path)


def facts_of(server: Any) -> dict[str, Any]:
    """What run.json records about the server."""
    from needlepoint.local.server import server_facts

    return server_facts(server)


def token_check(prepared_dir: Path, server: Any) -> Any:
    """Count every prompt with the server's tokenizer; refuse any that would not fit."""
    from needlepoint.local.server import check_token_counts

    return check_token_counts(prepared_dir, server)


def timed_timeout(prepared_dir: Path, server: Any, report: Any, floor_s: float) -> dict[str, Any]:
    """The run's request timeout, from the measured time of its longest prompt."""
    from needlepoint.local.server import local_timeout, time_longest_prompt

    return local_timeout(floor_s, time_longest_prompt(prepared_dir, server, report))


def run_live(
    layout: Layout,
    entrant: Entrant,
    n_ctx: int,
    timeout_s: float,
    progress: str,
    say: Say,
    declaration: str | Path | None = None,
) -> None:
    """Serve one model, check its token counts, and run (or resume) its variant completely."""
    from needlepoint.run.options import RunOptions
    from needlepoint.run.runner import run_protocol

    prepared, run_dir = layout.prepared(entrant), layout.run(entrant)
    record = recorded_run(run_dir)
    port = resume_port(record)
    os.environ.setdefault(KEY_ENV, PLACEHOLDER_KEY)
    log = Path(tempfile.gettempdir()) / f"needlepoint-{layout.root.name}-{entrant.key}-server.log"
    with serve(entrant.key, n_ctx, port, log) as server:
        facts = facts_of(server)
        check_same_server(record, facts)
        say(f"  serving {server.alias} (n_ctx {server.n_ctx}) on {server.base_url}; log {log}")
        report = token_check(prepared, server)
        say(f"  token check: {report.summary_line()}")
        timing = timed_timeout(prepared, server, report, timeout_s)
        longest = timing["longest_prompt"]
        say(
            f"  longest prompt ({longest['prompt_tokens']} tokens) took "
            f"{longest['seconds']:.1f} s: request timeout {timing['timeout_s']:g} s"
        )
        options = RunOptions(
            allow=planned_count(prepared),
            progress=progress,
            **local_route(server.base_url, server.alias),
            timeout_s=timing["timeout_s"],
            run_meta={"local_server": facts, "request_timeout": timing},
            declaration=None if declaration is None else str(declaration),
        )
        summary = run_protocol(prepared, run_dir, options)
    for line in summary.lines():
        say(f"  {line}")
    if summary.stop_reason != "complete":
        raise RunStopped(
            f"{run_dir}: stopped before every request was attempted ({summary.stop_reason}: "
            f"{summary.stop_detail}); run the command again to resume"
        )


def finish(
    layout: Layout,
    entrants: Sequence[Entrant],
    protocol_path: Path,
    notebooks_dir: Path,
    notebooks: bool,
    say: Say,
) -> None:
    """Audit every run, derive results, analyse each run alone, compare them; then README.md."""
    from needlepoint.jsonio import write_bytes_atomic
    from needlepoint.run.audit import audit_run
    from needlepoint.run.results import summary_lines, write_results

    audits: dict[str, list[str]] = {}
    for entrant in entrants:
        # results.csv first, so that the audit also checks it against the journal.
        for line in summary_lines(write_results(layout.run(entrant))):
            say(f"  {entrant.key}: {line}")
        report = audit_run(layout.run(entrant))
        audits[entrant.key] = report.lines()
        if not report.ok:
            raise AuditFailed(f"{layout.run(entrant)}: audit-run failed: {report.lines()[-1]}")
        say(f"{entrant.key}: {report.lines()[-1]}")
    if notebooks:
        execute_all(layout, entrants, protocol_path, notebooks_dir, say)
    else:
        from needlepoint.analysis.document import analyze_run
        from needlepoint.compare.document import compare_runs

        for entrant in entrants:
            analysis = analyze_run(layout.run(entrant), layout.analysis(entrant))
            say(f"{entrant.key}: decision {analysis.decision}: {analysis.reason}")
        runs = [layout.run(e) for e in entrants]
        for line in compare_runs(runs, layout.comparison).lines():
            say(line)

    sections = readme_sections(layout, entrants, layout.root.parent)
    text = readme_text(layout, entrants, audits, sections)
    write_bytes_atomic(layout.root / "README.md", text.encode("utf-8"))
    say(f"wrote {layout.root / 'README.md'}")
