"""What `analyze`, `compare` and `calibrate` add from the study record: each run's declaration
chain (with the amendments found under the evidence root, and a flag on one made after outcomes
it governs), and the other runs of the same design and model that were not passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from needlepoint.errors import NeedlepointError
from needlepoint.run.declaration import Declared, chain, run_chain_lines
from needlepoint.run.folder import recorded_declaration
from needlepoint.study.registry import Registry, collect
from needlepoint.study.runs import RunEntry

EVIDENCE_NAME = "evidence"


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
    """Each run's declaration chain, with later amendments found under ``root``; ``shown``
    names the runs (default: as given)."""
    lines: list[str] = []
    for i, run_dir in enumerate(run_dirs):
        ref = recorded_declaration(run_dir)
        later = later_amendments(root, ref.sha256) if ref is not None and root else []
        name = display(run_dir) if shown is None else shown[i]
        lines += [*run_chain_lines(run_dir, base, later, shown=name), ""]
    return lines[:-1]


def display(path: Path) -> str:
    """A path as the user gave it; an absolute one relative to here, so no machine path shows."""
    if not path.is_absolute():
        return path.as_posix()
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return path.name


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
        return [
            f"Also on record under `{display(reg.root)}`: no other run of this design and model."
        ]
    lines = [f"Also on record under `{display(reg.root)}` (same design and model, not passed in):"]
    lines += [f"- {_other(r)}" for r in others]
    return lines


def _other(r: RunEntry) -> str:
    sim = " (SIMULATION)" if r.simulation else ""
    return f"`{r.path}`{sim} (v{r.version}, {r.attempted} of {r.planned} attempted): {r.verdict()}"


def study_record(run_dirs: Sequence[str | Path], root: Path | None, base: Path) -> list[str]:
    """The lines `analyze` and `compare` print and append to summary.md / comparison.md."""
    runs = [Path(p) for p in run_dirs]
    lines = chain_record(runs, root, base)
    if root is None:
        return [*lines, "", "No evidence root given or found: other runs on record not searched."]
    return [*lines, "", *also_on_record(runs, collect(root))]
