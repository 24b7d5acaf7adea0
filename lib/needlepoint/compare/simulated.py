"""Simulated model variants of one design: the offline default of the comparison notebook.

Each entry names a model and the ``position`` simulation's parameters (``PositionParams``).
Its prepared folder is a model variant of the reference design (``prepare --model``): the same
design fingerprint, its own bodies. Its run is an ordinary simulated run folder, labelled as
simulation everywhere, so the comparison reads it as it would read a live run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from needlepoint.design.prepared import load_prepared, prepare
from needlepoint.errors import NeedlepointError
from needlepoint.run.options import RunOptions
from needlepoint.run.runner import run_protocol


def simulate_variants(
    run_dirs: Sequence[str | Path],
    simulated: Sequence[Mapping[str, Any]],
    prepared_root: str | Path,
    shown: Sequence[str] | None = None,
    declaration: str | Path | None = None,
) -> list[str]:
    """Prepare each model variant (once) and simulate its run (or resume it); one line each.

    ``simulated[i]`` is ``{"model": NAME, "params": {PositionParams field: value}}`` for
    ``run_dirs[i]``; the variant is prepared into ``prepared_root/NAME``. ``shown`` names the
    runs in the returned lines (default: the run folders as given). ``declaration``: the
    declaration every run is started under.
    """
    if len(simulated) != len(run_dirs):
        raise NeedlepointError(
            f"{len(simulated)} simulated profiles for {len(run_dirs)} run folders; give one each"
        )
    lines = []
    for i, (run_dir, entry) in enumerate(zip(run_dirs, simulated, strict=True)):
        unknown = sorted(set(entry) - {"model", "params"})
        if unknown or not isinstance(entry.get("model"), str):
            raise NeedlepointError(
                f"simulated[{i}]: expected {{'model': NAME, 'params': {{...}}}}"
                + (f", not {unknown[0]!r}" if unknown else "")
            )
        model = entry["model"]
        prepared = Path(prepared_root) / model
        if not (prepared / "manifest.json").exists():
            prepare(prepared, model=model)
        options = RunOptions(
            allow=len(load_prepared(prepared).plan),
            simulate="position",
            sim_params=dict(entry.get("params") or {}),
            progress="off",
            declaration=None if declaration is None else str(declaration),
        )
        summary = run_protocol(prepared, run_dir, options)
        name = shown[i] if shown is not None else str(run_dir)
        counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.counts.items()))
        lines.append(f"{name}: SIMULATION of {model}: {summary.stop_reason}; {counts}")
    return lines
