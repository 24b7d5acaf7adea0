"""`needlepoint registry`: every prepared folder, run, pilot, calibration, analysis, comparison
and declaration under an evidence root, grouped by design fingerprint, then model variant.

Each run shows its decision (re-derived from its journal, exactly as `analyze` gives it), its
completeness, its audit and its declaration. Runs that sent the same request bytes are compared
request by request, so two runs of one design can never stand side by side unremarked.

One run folder (or pilot run) as the record lists it: design, variant, decision, completeness,
audit, declaration, and each request's outcome for comparing runs of the same request bytes.

A folder that cannot be read is still listed, with the one-line reason, so a damaged folder
never hides the rest of the record.

`registry --history`: run folders that were committed once and are gone from the tree.

Every commit that deleted a ``journal.jsonl`` under the root is read at its parent: the run
folder, the prepared folder its run.json names and, for a pilot, the pilot record are copied
out of git into a scratch folder and read like any run on the record. A run whose journal is
still somewhere in the tree (the same final hash) is not "in history only"; every other one is,
with its decision re-derived from its journal.

The registry as text: designs, their model variants and runs, agreements, the rest.

Every line depends only on the files (and, with ``--history``, the git history): no times of
the listing itself and no absolute paths, so two listings of one record are the same text.
"""

from __future__ import annotations

import io
import itertools
import posixpath
import re
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import sha256_hex
from needlepoint.run.folder import read_run_record
from needlepoint.safeio import is_output_file, relative_path, replaced_folder
from needlepoint.safetext import md_code
from needlepoint.study.scan import Found, lenient_field, lenient_json, scan

# What identifies an outcome when two runs of the same request are compared.
# (status, kind, SHA-256 of the response text): equal answers compare equal, and a registry of
# runs with huge answers holds 64 hex digits per answer, not the answers.
Answer = tuple[str, str, str | None]


@dataclass(frozen=True)
class RunEntry:
    """One run on the record; ``problem`` is set (and most fields empty) when it is unreadable."""

    path: str
    pilot: bool
    design_fingerprint: str = ""
    protocol_id: str | None = None
    version: int | None = None
    model: str = ""
    body_profile: str = ""
    simulation: bool = False
    planned: int = 0
    attempted: int = 0
    decision: str | None = None
    result: str = ""
    complete_cases: int | None = None
    planned_cases: int | None = None
    audit: str = ""
    declaration: str = "none"
    declaration_sha256: str | None = None
    journal_sha256: str = ""
    robustness: str = ""  # the analysis's robustness word with its reasons
    server: str = ""  # what answered: a local server's package, model file and context, or host
    # request SHA-256 -> the outcome received for it (a request with no response is absent)
    answers: dict[str, Answer] = field(default_factory=dict, repr=False)
    requests: frozenset[str] = frozenset()
    problem: str | None = None
    # Where it was executed when not by needlepoint's runner (an import: "inspect_ai 0.3.285").
    source: str | None = None

    @property
    def variant(self) -> str:
        return f"{self.model} ({self.body_profile})"

    def verdict(self) -> str:
        """The decision in words: a pilot has none, an unreadable run says why."""
        if self.problem:
            return f"unreadable: {self.problem}"
        if self.pilot:
            return "pilot (calibrates a design; no decision)"
        said = f"{self.decision} ({self.result})" if self.result else str(self.decision)
        return f"{said}; {self.robustness}" if self.robustness else said


def read_entry(
    run_dir: Path, shown: str, pilot_design: str | None = None, root: Path | None = None
) -> RunEntry:
    """Read one run folder; ``pilot_design`` is the design a pilot calibrates (its group), and
    ``root`` the folder its declaration is shown relative to (default: the run folder)."""
    try:
        return _read(run_dir, shown, pilot_design, root)
    except (NeedlepointError, OSError, ValueError) as exc:
        return RunEntry(path=shown, pilot=pilot_design is not None, problem=str(exc)[:300])


def _read(run_dir: Path, shown: str, pilot_design: str | None, root: Path | None) -> RunEntry:
    from needlepoint.design.prepared import frozen_model
    from needlepoint.design.profiles import body_profile
    from needlepoint.design.protocol import design_fingerprint
    from needlepoint.run.audit import audit_run
    from needlepoint.run.folder import read_run_record
    from needlepoint.run.journal import read_line, walk
    from needlepoint.run.results import load_frozen_plan

    run = read_run_record(run_dir)
    prepared = load_frozen_plan(run_dir, run, None)
    pilot = pilot_design is not None or run.extra.get("pilot") is True
    sha_of = {row.seq: row.request_sha256 for row in prepared.plan}
    walked = walk(run_dir)  # a stream: one record at a time
    chain, attempted = walked.chain, walked.state.attempts
    answers: dict[str, Answer] = {}
    for o in walked.state.outcomes.values():
        if o.http_status is not None and o.seq in sha_of:
            text = o.response_text
            if text is None:  # too long to keep in the fold: read from its line
                text = str(read_line(run_dir, o.at)["classification"]["response_text"])
            digest = sha256_hex(text.encode("utf-8", "replace"))
            answers[sha_of[o.seq]] = (o.status, o.kind, digest)
    audit = audit_run(run_dir)
    first = next((p for p in audit.problems), "")
    audited = "ok" if audit.ok else f"FAILED ({len(audit.problems)}: {first[:120]})"
    decision, result, complete, cases, robust = None, "", None, None, ""
    if not pilot:
        decision, result, complete, cases, robust = _decision(run_dir)
    ref = run.declaration
    return RunEntry(
        path=shown,
        pilot=pilot,
        design_fingerprint=pilot_design or design_fingerprint(prepared.protocol),
        protocol_id=prepared.protocol.get("protocol_id"),
        version=prepared.protocol.get("version"),
        model=frozen_model(prepared),
        body_profile=body_profile(prepared.protocol),
        simulation=run.simulation,
        planned=len(prepared.plan),
        attempted=len(attempted),
        decision=decision,
        result=result,
        complete_cases=complete,
        planned_cases=cases,
        audit=audited,
        declaration="none"
        if ref is None
        else f"{md_code(_shown(run_dir, ref.path, root))} (sha256 {ref.sha256[:12]}…)",
        declaration_sha256=None if ref is None else ref.sha256,
        journal_sha256=chain.head,
        source=str(run.extra.get("source"))
        if run.extra.get("executed_elsewhere") is True
        else None,
        robustness=robust,
        server=server_identity(run.base_url, run.extra, run.simulate),
        answers=answers,
        requests=frozenset(sha_of.values()),
    )


def _shown(run_dir: Path, path: str, root: Path | None) -> str:
    """The declaration's path as seen from ``root`` (as run.json has it without one)."""
    if root is None:
        return path
    try:
        return relative_path(run_dir / path, root)
    except ValueError:
        return path


def server_identity(base_url: str | None, extra: dict, simulate: object = None) -> str:
    """What answered a run, for telling a reproduction from a replication: the simulator by its
    mode and parameters; a local server by its package, version, model file SHA-256 and context
    size (its port changes every start); any other endpoint by its scheme, host, port and path."""
    from urllib.parse import urlsplit

    from needlepoint.jsonio import canonical_bytes
    from needlepoint.schema import to_plain

    if simulate is not None:
        plain = to_plain(simulate)
        return f"simulator {plain.get('mode')}, {sha256_hex(canonical_bytes(plain))[:12]}"

    local = extra.get("local_server") if isinstance(extra, dict) else None
    if isinstance(local, dict):
        server = local.get("server") if isinstance(local.get("server"), dict) else {}
        gguf = local.get("gguf") if isinstance(local.get("gguf"), dict) else {}
        return (
            f"local {server.get('package')} {server.get('version')}, model file "
            f"{str(gguf.get('sha256'))[:12]}, n_ctx {local.get('n_ctx')}"
        )
    if not base_url:
        return ""
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def _decision(run_dir: Path) -> tuple[str | None, str, int | None, int | None, str]:
    """The run's preregistered decision and robustness, as `analyze` gives them (nothing
    written)."""
    from needlepoint.analysis.document import build_document
    from needlepoint.analysis.inputs import from_run

    try:
        inp = from_run(run_dir)
        if "depths" in inp.protocol:  # a depth design: its own preregistered contrast
            return _depth_decision(inp)
        doc = build_document(inp)
    except NeedlepointError as exc:
        return None, f"no analysis: {str(exc)[:160]}", None, None, ""
    p = doc.primary
    result = ""
    if p.estimate is not None and p.interval is not None:
        result = f"{p.estimate:.4g} [{p.interval.lower:.4g}, {p.interval.upper:.4g}]"
    elif p.estimate is not None:
        result = f"{p.estimate:.4g}"
    robust = "" if p.decision == "not evaluable" else doc.robustness.verdict
    return p.decision, result, p.complete_cases, p.planned_cases, robust


def _depth_decision(inp: Any) -> tuple[str | None, str, int | None, int | None, str]:
    """A depth design's decision on its preregistered contrast (analysis.depth)."""
    from needlepoint.analysis.depth import analyze_depth

    d = analyze_depth(inp)
    p = d.primary
    result = "" if p.estimate is None else f"{p.estimate:.4g} [{p.lower:.4g}, {p.upper:.4g}]"
    robust = "" if d.robustness is None else d.robustness.verdict
    return d.decision, result, p.cases, inp.protocol["cases"], robust


def pilot_design_of(folder: Path) -> str:
    """The design fingerprint a pilot folder calibrates ('' when its pilot.json is unreadable)."""
    from needlepoint.pilot.record import read_pilot_record

    try:
        return read_pilot_record(folder).design.design_fingerprint
    except (NeedlepointError, OSError):
        return ""


# Deleted journals examined at most, newest first; a bound on the work, stated when reached.
MAX_DELETED = 200
_TIMEOUT_S = 60


def _git(top: Path, *args: str, text: bool = True) -> str | bytes:
    try:
        done = subprocess.run(
            ["git", "-C", str(top), *args],
            capture_output=True,
            text=text,
            timeout=_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:  # no git, or it hung past the bound
        raise NeedlepointError(f"git {args[0]}: {type(exc).__name__}") from None
    if done.returncode != 0:
        err = done.stderr if text else done.stderr.decode("utf-8", "replace")
        raise NeedlepointError(f"git {args[0]}: {str(err).strip()[:200]}")
    return done.stdout


def deleted_runs(root: Path) -> tuple[Path, list[tuple[str, str]]]:
    """The repository's top folder and (commit, run folder) for each journal a commit deleted."""
    try:
        top = Path(str(_git(root, "rev-parse", "--show-toplevel")).strip())
    except (OSError, subprocess.SubprocessError):
        raise NeedlepointError(f"{root}: git is not available to search the history") from None
    rel = Path(root).resolve().relative_to(top.resolve()).as_posix()
    log = str(
        _git(top, "log", "--all", "--diff-filter=D", "--name-only", "--format=%x00%H", "--", rel)
    )
    found: list[tuple[str, str]] = []
    for chunk in log.split("\x00")[1:]:
        lines = [x for x in chunk.splitlines() if x.strip()]
        commit, paths = lines[0], lines[1:]
        for path in paths:
            if posixpath.basename(path) == "journal.jsonl":
                found.append((commit, posixpath.dirname(path)))
    return top, found


def _files(top: Path, commit: str, folder: str) -> list[str]:
    out = str(_git(top, "ls-tree", "-r", "--name-only", commit, "--", folder + "/"))
    return [x for x in out.splitlines() if x]


def _materialise(top: Path, commit: str, run: str, scratch: Path) -> None:
    """Copy the run folder, its prepared folder and a pilot record out of ``commit``."""
    import json

    from needlepoint.run.folder import RUN_NAME, parse_run_record

    where = f"{commit}:{run}/{RUN_NAME}"
    record = parse_run_record(json.loads(str(_git(top, "show", where))), where)
    prepared = posixpath.normpath(posixpath.join(run, record.prepared_dir))
    wanted = _files(top, commit, run) + _files(top, commit, prepared)
    pilot = posixpath.join(posixpath.dirname(run), "pilot.json")
    wanted += [p for p in _files(top, commit, posixpath.dirname(run)) if p == pilot]
    data = _git(top, "archive", "--format=tar", commit, "--", *sorted(set(wanted)), text=False)
    with tarfile.open(fileobj=io.BytesIO(bytes(data))) as tar:
        tar.extractall(scratch, filter="data")


def history_runs(root: Path, present: set[str]) -> tuple[list[RunEntry], str]:
    """Runs in history only (journals not in ``present``), and a line saying what was searched."""
    top, deleted = deleted_runs(root)
    note = f"history: {len(deleted)} deleted run journal(s) under {root.as_posix()} in git"
    if len(deleted) > MAX_DELETED:
        note += f" (the newest {MAX_DELETED} read)"
    entries: list[RunEntry] = []
    seen = set(present)
    rel_root = Path(root).resolve().relative_to(top.resolve())
    with tempfile.TemporaryDirectory(prefix="needlepoint-history-") as tmp:
        for i, (commit, run) in enumerate(deleted[:MAX_DELETED]):
            scratch = Path(tmp) / str(i)
            try:
                parent = str(_git(top, "rev-parse", f"{commit}^")).strip()
                _materialise(top, parent, run, scratch)
            except (NeedlepointError, ValueError, OSError, tarfile.TarError) as exc:
                shown = f"{commit[:12]}^:{run}"
                entries.append(RunEntry(path=shown, pilot=False, problem=str(exc)[:200]))
                continue
            shown = f"{parent[:12]}:{Path(run).relative_to(rel_root).as_posix()}"
            owner = scratch / posixpath.dirname(run)
            pilot = pilot_design_of(owner) if (owner / "pilot.json").is_file() else None
            entry = read_entry(scratch / run, shown, pilot_design=pilot, root=scratch / rel_root)
            if entry.journal_sha256 and entry.journal_sha256 in seen:
                continue  # the same journal is still on the record (or listed already)
            seen.add(entry.journal_sha256)
            entries.append(entry)
    note += f"; {len(entries)} in history only (any other is still on record in the tree)"
    return entries, note


@dataclass(frozen=True)
class Item:
    """Anything else on the record, under the design it belongs to: an analysis, a comparison,
    a calibration record or a prepared folder no run used."""

    kind: str
    path: str
    design_fingerprint: str
    text: str


@dataclass
class Registry:
    """What `registry` found: runs, the other items, and runs found only in git history."""

    root: Path
    found: Found
    runs: list[RunEntry]
    items: list[Item]
    history: list[RunEntry] = field(default_factory=list)
    history_note: str = ""

    def designs(self) -> list[str]:
        """Every design fingerprint on the record, sorted (unreadable entries last)."""
        keys = {r.design_fingerprint for r in [*self.runs, *self.history]}
        keys |= {i.design_fingerprint for i in self.items}
        return sorted(keys, key=lambda k: (k == "", k))


def collect(root: str | Path, history: bool = False) -> Registry:
    """Read everything under ``root`` (one line per unreadable folder, never a failure); with
    ``history``, also the runs that git history holds and the tree no longer does."""
    base = Path(root)
    found = scan(base)
    pilot_designs = {p: pilot_design_of(base / p) for p in found.pilots}
    runs = []
    for rel in found.runs:
        design = pilot_designs.get(Path(rel).parent.as_posix())
        runs.append(read_entry(base / rel, rel, pilot_design=design, root=base))
    used = {_prepared_of(base / r.path) for r in runs}
    items = [*_analyses(base, found), *_comparisons(base, found), *_calibrations(base, found)]
    items += _unrun(base, found, used)
    reg = Registry(base, found, runs, items)
    if history:
        reg.history, reg.history_note = history_runs(base, {r.journal_sha256 for r in runs})
    return reg


def _prepared_of(run_dir: Path) -> Path | None:
    try:
        return (run_dir / read_run_record(run_dir).prepared_dir).resolve()
    except (NeedlepointError, OSError, KeyError, TypeError, ValueError):
        return None


def _analyses(base: Path, found: Found) -> list[Item]:
    out = []
    for rel in found.analyses:
        doc = lenient_json(base / rel / "analysis.json")
        design = lenient_field(doc, "protocol", "design_fingerprint")
        decision = lenient_field(doc, "primary", "decision")
        journal = lenient_field(doc, "run", "journal_sha256")
        robust = lenient_field(doc, "robustness", "verdict")
        text = f"{decision} (journal {str(journal)[:12]}…)" if decision else "unreadable"
        if decision and decision != "not evaluable" and isinstance(robust, str):
            text += f"; {robust[:400]}"
        out.append(Item("analysis", rel, design if isinstance(design, str) else "", text))
    return out


def _comparisons(base: Path, found: Found) -> list[Item]:
    out = []
    for rel in found.comparisons:
        doc = lenient_json(base / rel / "comparison.json")
        runs = lenient_field(doc, "runs")
        design = lenient_field(doc, "design_fingerprint")
        n = len(runs) if isinstance(runs, list) else 0
        decisions = "; ".join(_with_robustness(r) for r in runs or [] if isinstance(r, dict))
        out.append(
            Item(
                "comparison",
                rel,
                design if isinstance(design, str) else "",
                f"{n} runs: {decisions}",
            )
        )
    return out


def _with_robustness(run: dict) -> str:
    """A compared run's decision, and its robustness word with reasons where it has one."""
    decision = str(lenient_field(run, "decision"))
    robust = lenient_field(run, "robustness")
    if decision == "not evaluable" or not isinstance(robust, str):
        return decision
    return f"{decision} ({robust[:400]})"


def _calibrations(base: Path, found: Found) -> list[Item]:
    out = []
    for rel in found.calibrations:
        doc = lenient_json(base / rel)
        design = lenient_field(doc, "design", "design_fingerprint")
        verdict, version = lenient_field(doc, "verdict"), lenient_field(doc, "protocol_version")
        cases = lenient_field(doc, "recommended_cases")
        text = f"{verdict}" + (f": v{version}, {cases} cases" if version is not None else "")
        out.append(Item("calibration", rel, design if isinstance(design, str) else "", text))
    return out


def _unrun(base: Path, found: Found, used: set[Path | None]) -> list[Item]:
    from needlepoint.design.protocol import design_fingerprint

    out = []
    for rel in found.prepared:
        if (base / rel).resolve() in used:
            continue
        protocol = lenient_json(base / rel / "protocol.json")
        try:
            design = design_fingerprint(protocol)
        except (KeyError, TypeError, ValueError):
            design = ""
        version = lenient_field(protocol, "version")
        out.append(Item("prepared", rel, design, f"v{version}, no run"))
    return out


REPRODUCTION = (
    "reproduction (byte-identical requests to the same model and server: a determinism check, "
    "not a replication)"
)
REPLICATION = "replication on the same materials (another server or model)"


def kind_of(a: RunEntry, b: RunEntry) -> str:
    """A reproduction repeats byte-identical requests on the same model and server: it checks
    determinism and says nothing new about the model. A replication needs fresh materials or
    another model or server; two runs of the same bytes elsewhere are one on the same materials.
    """
    same = a.model == b.model and a.server == b.server and a.server != ""
    return REPRODUCTION if same else REPLICATION


def agreement(a: RunEntry, b: RunEntry) -> str | None:
    """Request-by-request agreement of two runs that sent some of the same request bytes,
    labelled a reproduction or a replication (``kind_of``)."""
    if a.problem or b.problem or not a.requests & b.requests:
        return None
    shared = sorted(k for k in a.requests & b.requests if k in a.answers and k in b.answers)
    same = sum(a.answers[k] == b.answers[k] for k in shared)
    line = f"{kind_of(a, b)}: {same} of {len(shared)} shared outcomes identical"
    if not (a.pilot or b.pilot):
        agree = a.decision == b.decision
        line += f"; decisions {'agree' if agree else 'differ'} ({a.decision}; {b.decision})"
    return line


def agreements(runs: list[RunEntry]) -> list[tuple[RunEntry, RunEntry, str]]:
    """Every pair of runs (in listing order) that sent some of the same request bytes."""
    out = []
    for a, b in itertools.combinations(runs, 2):
        line = agreement(a, b)
        if line is not None:
            out.append((a, b, line))
    return out


def run_line(r: RunEntry, where: str = "") -> str:
    """One run: path, version, completeness, decision, audit and declaration."""
    kind = "pilot" if r.pilot else "run"
    sim = " (SIMULATION)" if r.simulation else ""
    if r.source:
        sim += f" (executed by {r.source}, imported)"
    if r.problem:
        return f"{kind} {where}{r.path}: unreadable: {r.problem}"
    cases = ""
    if r.complete_cases is not None:
        cases = f", {r.complete_cases} of {r.planned_cases} cases complete"
    return (
        f"{kind} {where}{r.path}{sim}: v{r.version}, {r.attempted} of {r.planned} attempted"
        f"{cases}; {r.verdict()}; audit {r.audit}; declaration: {r.declaration}"
    )


def registry_lines(reg: Registry) -> list[str]:
    """The whole listing, grouped by design fingerprint, then model variant."""
    out = [
        f"registry of {reg.root.as_posix()}: {reg.found.counts()}",
        "(each decision re-derived from its journal as `analyze` gives it; nothing is written)",
    ]
    if reg.history_note:
        out.append(reg.history_note)
    for design in reg.designs():
        runs = [r for r in reg.runs if r.design_fingerprint == design]
        old = [r for r in reg.history if r.design_fingerprint == design]
        items = [i for i in reg.items if i.design_fingerprint == design]
        title = f"design {design[:12]}…" if design else "design unknown (unreadable folders)"
        title += _versions([*runs, *old])
        out += ["", title]
        for variant in sorted({r.variant for r in [*runs, *old] if not r.problem}):
            group = [r for r in runs if r.variant == variant and not r.problem]
            group_old = [r for r in old if r.variant == variant and not r.problem]
            out.append(f"  {variant}")
            out += [f"    {run_line(r)}" for r in group]
            out += [f"    {run_line(r, 'IN HISTORY ONLY ')}" for r in group_old]
            for a, b, line in agreements([*group, *group_old]):
                out.append(f"    same request bytes, {a.path} and {b.path}: {line}")
        out += [f"  {run_line(r)}" for r in [*runs, *old] if r.problem]
        out += [f"  {i.kind} {i.path}: {i.text}" for i in items]
    if reg.found.declarations:
        out += ["", "declarations"]
        out += [f"  {line}" for line in declaration_lines(reg)]
    return out


def _versions(runs: list[RunEntry]) -> str:
    """`` (context-position-similar v4, v5; pilots v2)``: the versions run, pilots apart."""
    ids = sorted({r.protocol_id for r in runs if r.protocol_id})
    if not ids:
        return ""
    main = sorted({r.version for r in runs if r.version is not None and not r.pilot})
    pilots = sorted({r.version for r in runs if r.version is not None and r.pilot})
    text = f" ({', '.join(ids)}"
    text += f" {', '.join(f'v{v}' for v in main)}" if main else ""
    text += f"; pilots {', '.join(f'v{v}' for v in pilots)}" if pilots else ""
    return text + ")"


def declaration_lines(reg: Registry) -> list[str]:
    """Each declaration with its time, what it amends, flags, and the runs started under it."""
    from needlepoint.errors import NeedlepointError
    from needlepoint.run.declaration import chain, flagged

    out = []
    for rel in reg.found.declarations:
        try:
            entries = chain(reg.root / rel)
        except NeedlepointError as exc:
            out.append(f"{rel}: unreadable: {exc}")
            continue
        last = entries[-1]
        r = last.record
        cited = [x.path for x in reg.runs if x.declaration_sha256 == last.sha256]
        line = f"{rel} (sha256 {last.sha256[:12]}…): made {r.time}"
        if r.simulation:
            line += " (simulated clock)"
        if r.amends:
            line += f", amends {r.amends.sha256[:12]}…"
        governed = flagged(entries).get(last.sha256)
        if governed:
            seen = ", ".join(f"{h.path} {h.outcomes}" for h in governed)
            line += f"; FLAG: made after outcomes it governs ({seen})"
        line += f"; runs started under it: {', '.join(cited) if cited else 'none'}"
        out.append(line)
    return out


# `needlepoint registry --grid OUT`: the results grid of every design on record.
#
# `compare` writes the grid of the runs it is given; a study folder with many runs wants the same
# table for everything on record without naming each run. For each design (design fingerprint)
# with at least one readable, audited live main run, the runs are loaded and analysed alone
# exactly as `compare` loads them (one run alone is a grid too), in the registry's order, and
# their grid (``grid.csv``, ``grid.md``, ``grid.png``) is written to
# ``OUT/<protocol>-<design fingerprint, 12>/``. Pilots and simulated runs are left out (a grid of
# results holds model results only), and a run recorded twice (the same journal) appears once.


def grid_groups(reg: Registry) -> dict[str, list[Path]]:
    """Design fingerprint -> the live, audited main runs of it on record (each journal once)."""
    groups: dict[str, list[Path]] = {}
    seen: set[str] = set()
    for run in reg.runs:
        if run.problem or run.pilot or run.simulation or not run.audit.startswith("ok"):
            continue
        if run.journal_sha256 in seen:
            continue
        seen.add(run.journal_sha256)
        groups.setdefault(run.design_fingerprint, []).append(reg.root / run.path)
    return dict(sorted(groups.items()))


def write_registry_grids(reg: Registry, out: str | Path) -> list[str]:
    """Write one grid per design into ``out``; one line per grid written (or why none was)."""
    from needlepoint.compare.document import build_comparison, load_run
    from needlepoint.compare.report import write_grid

    target = Path(out)
    groups = grid_groups(reg)
    if not groups:
        return [f"grid: no audited live main run under {reg.root}; nothing written"]
    if target.exists() and not target.is_dir():
        raise NeedlepointError(f"--grid {target}: exists and is not a folder")
    lines = []
    for design, run_dirs in groups.items():
        # one design, each journal once, all live (grid_groups): a grid of one run is a table
        runs = [load_run(d) for d in run_dirs]
        # each run named by where it lies under the root (a model may have several runs)
        shown = [p.relative_to(reg.root).as_posix() for p in run_dirs]
        labels = shown if all(0 < len(s) <= 60 and s.isprintable() for s in shown) else None
        doc = build_comparison(runs, target, figures=True, labels=labels)
        name = re.sub(r"[^a-z0-9-]+", "-", str(doc.protocol_id or "design").lower())[:40]
        folder = target / f"{name}-{design[:12]}"
        with replaced_folder(folder, is_output_file) as fresh:
            written = write_grid(doc, fresh)
        lines.append(
            f"grid of {len(runs)} run{'s' * (len(runs) != 1)} of design {design[:12]}: "
            + ", ".join(f"{folder}/{w}" for w in written)
        )
    return lines
