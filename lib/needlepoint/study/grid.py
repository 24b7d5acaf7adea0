"""`needlepoint registry --grid OUT`: the results grid of every design on record.

`compare` writes the grid of the runs it is given; a study folder with many runs wants the same
table for everything on record without naming each run. For each design (design fingerprint)
with at least one readable, audited live main run, the runs are loaded and analysed alone
exactly as `compare` loads them (one run alone is a grid too), in the registry's order, and
their grid (``grid.csv``, ``grid.md``, ``grid.png``) is written to
``OUT/<protocol>-<design fingerprint, 12>/``. Pilots and simulated runs are left out (a grid of
results holds model results only), and a run recorded twice (the same journal) appears once.
"""

from __future__ import annotations

import re
from pathlib import Path

from needlepoint.compare.document import build_comparison, load_run
from needlepoint.compare.grid import write_grid
from needlepoint.errors import NeedlepointError
from needlepoint.safeio import is_output_file, replaced_folder
from needlepoint.study.registry import Registry


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
