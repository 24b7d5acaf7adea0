"""Helpers for the pilot tests: a small design file and a simulated pilot of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from needlepoint.pilot.folder import PilotRun, run_pilot
from needlepoint.run.options import RunOptions

# Inside the band at both lengths under each similarity (a low arm at the ceiling is refused),
# with a middle dip: a pilot of it calibrates to a design.
IN_BAND = {"p_edge": 0.8, "p_middle": 0.7, "length_drop_per_100_records": 0.1}


def design_file(folder: Path, **fields: Any) -> Path:
    """A small design (v5, one length of 12, 4 cases) as a protocol override file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "design.json"
    path.write_text(json.dumps({"version": 5, "lengths": [12], "cases": 4, **fields}))
    return path


def simulated_pilot(
    out: Path,
    design: Path | None,
    lengths: tuple[int, ...] = (12, 24),
    cases: int = 4,
    sim_params: dict[str, float] | None = None,
    **options: Any,
) -> PilotRun:
    """A simulated pilot with every request allowed; fsync off to keep the tests fast."""
    simulate = options.pop("simulate", "position")
    params = (IN_BAND if sim_params is None else sim_params) if simulate == "position" else None
    run_options = RunOptions(
        allow=options.pop("allow", cases * len(lengths) * 8),
        simulate=simulate,
        sim_params=params,
        progress="off",
        fsync=False,
        **options,
    )
    return run_pilot(design, out, lengths, cases, run_options)
