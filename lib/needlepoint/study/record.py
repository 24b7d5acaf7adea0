"""What `analyze`, `compare` and `calibrate` add from the study record: each run's declaration
chain (with the amendments found under the evidence root, and a flag on one made after outcomes
it governs), and the other runs of the same design and model that were not passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

from needlepoint.analysis.report import display, record_lines
from needlepoint.errors import NeedlepointError
from needlepoint.run.declaration import Declared, chain
from needlepoint.safetext import md_code
from needlepoint.study.registry import Registry, RunEntry, collect

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
    from needlepoint.study.scan import scan

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
