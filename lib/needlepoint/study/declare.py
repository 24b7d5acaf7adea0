"""`needlepoint declare PLAN.md --out DECL.json`: a plan bound to what results existed then.

The record holds the plan's text and SHA-256, the time, and the journal head of every run and
pilot and the decision of every analysis then present under the evidence root. An amendment
(``--amends PREV.json``) cites the declaration it replaces by its file's SHA-256 and records the
heads again, so a reader sees which outcomes the amender could have seen. A run started with
``--declaration DECL.json`` carries the file's SHA-256 in run.json and in its journal's first
record; `audit-run` checks it. The file is never overwritten.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import needlepoint
from needlepoint.analysis.report import display, record_lines
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import sha256_hex, write_bytes_atomic
from needlepoint.run.clock import SIM_EPOCH, iso_utc, parse_iso_utc
from needlepoint.run.declaration import (
    DECLARATION_FORMAT,
    DECLARATION_VERSION,
    Amends,
    AnalysisHead,
    CodeRef,
    DeclarationRecord,
    Declared,
    JournalHead,
    PlanText,
    chain,
    current_code,
    published_place,
    read_declaration,
)
from needlepoint.safeio import read_limited, relative_path
from needlepoint.safetext import md_code
from needlepoint.schema import document_bytes
from needlepoint.study.registry import Registry, RunEntry, collect
from needlepoint.study.scan import lenient_field, lenient_json, scan

# A plan is prose; anything larger is not one (and would bloat every declaration that cites it).
MAX_PLAN_BYTES = 1 << 20


def read_plan(path: str | Path) -> PlanText:
    """The plan file as UTF-8 text, with its SHA-256 (of the text's UTF-8 bytes)."""
    p = Path(path)
    if p.is_dir():
        raise NeedlepointError(f"{p}: is a folder; give the plan file (PLAN.md)")
    # A regular file only, read within its limit: a FIFO or a device is refused, never waited on.
    data = read_limited(p, MAX_PLAN_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NeedlepointError(f"{p}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    if not text.strip():
        raise NeedlepointError(f"{p}: the plan is empty")
    return PlanText(p.name, sha256_hex(data), text)


def journal_head(run_dir: Path, shown: str, pilot: bool) -> JournalHead:
    """One journal as it stands: record count, final hash, attempts, outcomes, latest time."""
    from needlepoint.run.folder import recorded_declaration
    from needlepoint.run.journal import walk

    walked = walk(run_dir)  # a stream: never the whole journal at once
    state = walked.state
    times = [line["time"] for line in state.timeline()]
    declaration = recorded_declaration(run_dir)
    return JournalHead(
        path=shown,
        kind="pilot" if pilot else "run",
        records=state.records,
        sha256=walked.chain.head,
        attempts=state.attempt_count,
        outcomes=state.outcome_count,
        last_time=max(times, key=parse_iso_utc) if times else None,
        declaration_sha256=None if declaration is None else declaration.sha256,
    )


def heads_under(root: Path) -> tuple[tuple[JournalHead, ...], tuple[AnalysisHead, ...]]:
    """Every run and pilot journal, and every analysis, under ``root`` now."""
    found = scan(root)
    pilots = set(found.pilots)
    heads = tuple(
        journal_head(root / rel, rel, Path(rel).parent.as_posix() in pilots) for rel in found.runs
    )
    analyses = []
    for rel in found.analyses:
        doc = lenient_json(root / rel / "analysis.json")
        journal, decision = (
            lenient_field(doc, "run", "journal_sha256"),
            lenient_field(doc, "primary", "decision"),
        )
        analyses.append(
            AnalysisHead(
                rel,
                journal if isinstance(journal, str) and len(journal) == 64 else None,
                decision if isinstance(decision, str) else "unreadable",
            )
        )
    return heads, tuple(analyses)


def declare(
    plan_path: str | Path,
    out: str | Path,
    root: str | Path,
    *,
    amends: str | Path | None = None,
    simulated: bool = False,
    published: str | None = None,
) -> Declared:
    """Write a declaration (an amendment with ``amends``) and return it as read back.

    ``simulated`` stamps the simulation epoch instead of the time, so a simulated pipeline's
    evidence is reproducible byte for byte; every reader says that such a time proves nothing,
    and a live run refuses such a declaration. It binds no code either (a commit would change
    the simulated evidence with every commit). A real one binds the code that runs now
    (``current_code``: commit, clean flag, constraints.txt's SHA-256). ``published``: where the
    user published the plan or an earlier declaration's line (a URL, checked).
    """
    place = None if published is None else published_place(published)
    target = Path(out)
    if target.exists() or target.is_symlink():
        raise NeedlepointError(f"{target}: exists; a declaration is never overwritten")
    if not target.parent.is_dir():
        raise NeedlepointError(f"{target.parent}: no such folder")
    plan = read_plan(plan_path)
    base = Path(root)
    heads, analyses = heads_under(base)
    now = iso_utc(SIM_EPOCH if simulated else time.time())
    previous = None
    if amends is not None:
        cited = read_declaration(amends)
        if parse_iso_utc(cited.record.time) > parse_iso_utc(now):
            raise NeedlepointError(
                f"{amends}: made at {cited.record.time}, later than this amendment ({now})"
            )
        previous = Amends(cited.sha256, relative_path(cited.path, target.parent), cited.record.time)
    record = DeclarationRecord(
        format=DECLARATION_FORMAT,
        version=DECLARATION_VERSION,
        package_version=needlepoint.__version__,
        time=now,
        simulation=simulated,
        plan=plan,
        amends=previous,
        root=relative_path(base, target.parent),
        heads=heads,
        analyses=analyses,
        code=None if simulated else current_code(),
        published=place,
    )
    write_bytes_atomic(target, document_bytes(record))
    return read_declaration(target)


def declaration_summary(declared: Declared, root: str) -> list[str]:
    """What `declare` prints: the file's SHA-256, the time and what was on record under
    ``root`` (as the user named it)."""
    r = declared.record
    outcomes = sum(h.outcomes for h in r.heads)
    what = "amendment" if r.amends else "declaration"
    lines = [
        f"{what} {declared.path.as_posix()}: sha256 {declared.sha256}",
        f"made {r.time}" + (" (simulated clock: the time proves nothing)" if r.simulation else ""),
        f"plan {r.plan.file}: sha256 {r.plan.sha256}",
        f"on record under {root}: {len(r.heads)} journal(s) with {outcomes} outcome(s), "
        f"{len(r.analyses)} analysis(es)",
    ]
    if r.amends:
        lines.append(f"amends {r.amends.path} (sha256 {r.amends.sha256}, made {r.amends.time})")
    lines += code_lines(r.code)
    if r.published:
        lines.append(f"published at {r.published}")
    lines.append(f"next: start runs with --declaration {declared.path.as_posix()}")
    if not r.simulation:
        lines += [
            "this machine's clock proves nothing to anyone else; publish this line somewhere "
            "outside the machine now (a signed git tag, a preregistration site, a mailing list):",
            publishable_line(declared),
        ]
    return lines


def code_lines(code: CodeRef | None) -> list[str]:
    """The code a declaration binds, in one line (none for a simulated one)."""
    if code is None:
        return []
    commit = code.commit or "unknown (not a git checkout)"
    clean = {True: "clean tree", False: "tracked files MODIFIED", None: "tree state unknown"}
    pinned = code.constraints_sha256 or "unknown (no constraints.txt)"
    return [f"code: commit {commit}, {clean[code.tree_clean]}; constraints.txt sha256 {pinned}"]


def publishable_line(declared: Declared) -> str:
    """One line to publish outside the machine: what a third party's timestamp then proves."""
    r = declared.record
    commit = (r.code.commit if r.code and r.code.commit else "unknown")[:12]
    return (
        f"needlepoint declaration sha256:{declared.sha256} plan sha256:{r.plan.sha256} "
        f"commit:{commit} made:{r.time}"
    )


# What `analyze`, `compare` and `calibrate` add from the study record: each run's declaration
# chain (with the amendments found under the evidence root, and a flag on one made after outcomes
# it governs), and the other runs of the same design and model that were not passed in.

EVIDENCE_NAME = "evidence"
NOT_SEARCHED = "No evidence root given or found: other runs on record not searched."


def evidence_root(given: str | Path | None, near: str | Path) -> Path | None:
    """The evidence root: ``given`` (which must be a folder), else the nearest folder named
    ``evidence`` that holds ``near``; None when there is none. Shown relative when it can be."""
    if given is not None:
        root = Path(given)
        if not root.is_dir():
            raise NeedlepointError(f"--evidence-root {given}: no such folder")
        return root
    here = Path(near).resolve()
    for folder in (here, *here.parents):
        if folder.name == EVIDENCE_NAME and folder.is_dir():
            try:
                return folder.relative_to(Path.cwd())
            except ValueError:
                return folder
    return None


def later_amendments(root: Path, cited: str) -> list[Declared]:
    """Declarations under ``root`` whose chain passes through ``cited``, in chain order."""

    out: dict[str, tuple[int, Declared]] = {}
    for rel in scan(root).declarations:
        try:
            entries = chain(root / rel)
        except NeedlepointError:
            continue
        shas = [e.sha256 for e in entries]
        if cited in shas:
            for depth, e in enumerate(entries):
                if depth > shas.index(cited):
                    out.setdefault(e.sha256, (depth, e))
    return [e for _, e in sorted(out.values(), key=lambda x: (x[0], x[1].record.time))]


def chain_record(
    run_dirs: Sequence[Path],
    root: Path | None,
    base: Path,
    shown: Sequence[str] | None = None,
) -> list[str]:
    """Each run's declaration chain, with later amendments found under ``root``, and a line for
    a run started without one; ``shown`` names the runs (default: as given)."""
    later = None if root is None else partial(later_amendments, root)
    return record_lines(run_dirs, base, shown=shown, later=later, undeclared=True)


def also_on_record(run_dirs: Sequence[Path], reg: Registry) -> list[str]:
    """The other runs of the same design and model under the root, each with its decision."""
    given = {p.resolve() for p in run_dirs}
    mine = [r for r in reg.runs if (reg.root / r.path).resolve() in given]
    keys = {(r.design_fingerprint, r.model, r.body_profile) for r in mine if not r.problem}
    others = [
        r
        for r in [*reg.runs, *reg.history]
        if (r.design_fingerprint, r.model, r.body_profile) in keys
        and (reg.root / r.path).resolve() not in given
        and not r.pilot
    ]
    if not others:
        where = md_code(display(reg.root))
        return [f"Also on record under {where}: no other run of this design and model."]
    lines = [
        f"Also on record under {md_code(display(reg.root))} (same design and model, not passed in):"
    ]
    lines += [f"- {_other(r)}" for r in others]
    return lines


def _other(r: RunEntry) -> str:
    sim = " (SIMULATION)" if r.simulation else ""
    # A folder name is anyone's: a backtick in it cannot close the span.
    done = f"{r.attempted} of {r.planned} attempted"
    return f"{md_code(r.path)}{sim} (v{r.version}, {done}): {r.verdict()}"


def study_record(run_dirs: Sequence[str | Path], root: Path | None, base: Path) -> list[str]:
    """The lines `analyze` and `compare` append to summary.md / comparison.md, and print: each
    run's chain and the other runs of its design and model under ``root``. Without a root, the
    declared runs' chains alone: what a notebook's analysis of the same run writes."""
    runs = [Path(p) for p in run_dirs]
    if root is None:
        return record_lines(runs, base)
    return [*chain_record(runs, root, base), "", *also_on_record(runs, collect(root))]


def search_note(root: Path | None, record: Sequence[str]) -> list[str]:
    """What only the terminal is told after the record's lines: that no root was searched."""
    if root is not None:
        return []
    return ["", NOT_SEARCHED] if record else [NOT_SEARCHED]
