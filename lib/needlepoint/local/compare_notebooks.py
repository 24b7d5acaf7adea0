"""The local comparison's notebooks: the design, each run's analysis, and the comparison.

They run with papermill inside the evidence folder, as `needlepoint pipeline` runs them, and
receive only paths relative to it. The live runs themselves are not notebooks: they are sent by
the command, which shows their progress, so that Ctrl-C reaches the runner directly.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.local.compare_files import Entrant, Layout


def notebook_plan(
    layout: Layout, entrants: Sequence[Entrant], protocol_path: Path
) -> list[tuple[str, str, dict[str, Any]]]:
    """(source notebook, executed name, parameters) in order, with paths relative to the folder."""

    def rel(path: Path) -> str:
        return Path(os.path.relpath(path.resolve(), layout.root.resolve())).as_posix()

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
