"""The runs a comparison may set side by side, each read and analysed exactly as `analyze` does.

A comparison takes main runs of one design. It refuses, with one line naming the first offending
run: a pilot (or a run whose pilot marker it cannot read); a run of another design (another
design fingerprint); the same run given twice; and a simulated run beside a live one, unless the
caller allows it, in which case every output says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.analysis.document import build_document
from needlepoint.analysis.inputs import AnalysisInput, from_run
from needlepoint.analysis.record import AnalysisDocument
from needlepoint.design.profiles import body_profile
from needlepoint.design.protocol import design_fingerprint
from needlepoint.errors import NeedlepointError
from needlepoint.run.folder import read_run_record


@dataclass(frozen=True)
class LoadedRun:
    """One run's validated rows and the analysis document `analyze` would write for it alone."""

    run_dir: Path
    input: AnalysisInput
    document: AnalysisDocument
    model: str
    body_profile: str
    design_fingerprint: str


def _pilot_marker(value: Any, where: Path, mark: str) -> bool:
    """True for a pilot, False for a main run; a marker that says neither is refused."""
    if value is None or value is False:
        return False
    if value is True:
        return True
    raise NeedlepointError(
        f"{where}: {mark} is {value!r}, neither true nor false; compare cannot tell whether "
        "this is a pilot, and reads only main runs"
    )


def refuse_pilot(run_dir: Path, extra: dict[str, Any], protocol: dict[str, Any]) -> None:
    """A pilot calibrates a design on held-out materials: it is never compared as a main run."""
    rationale = protocol.get("rationale")
    marks = (
        (extra.get("pilot"), "run.json extra.pilot"),
        (
            True if isinstance(rationale, dict) and rationale.get("kind") == "pilot" else None,
            "its protocol's rationale.kind",
        ),
    )
    for value, mark in marks:
        if _pilot_marker(value, run_dir, mark):
            raise NeedlepointError(
                f"{run_dir}: is a pilot ({mark} says so); pilots calibrate a design on held-out "
                "materials and are never compared as main runs"
            )


def load_run(run_dir: str | Path) -> LoadedRun:
    """Read one run folder as `analyze` does (re-derived from its journal) and analyse it alone."""
    root = Path(run_dir)
    if not root.is_dir():
        raise NeedlepointError(f"{root}: run folder not found")
    extra = read_run_record(root).extra
    inp = from_run(root)
    refuse_pilot(root, extra, inp.protocol)
    return LoadedRun(
        run_dir=root,
        input=inp,
        document=build_document(inp),
        model=str(inp.protocol.get("model")),
        body_profile=body_profile(inp.protocol),
        design_fingerprint=design_fingerprint(inp.protocol),
    )


def check_comparable(runs: Sequence[LoadedRun], allow_simulated: bool) -> None:
    """Refuse another design, a repeated run, or simulated beside live runs (unless allowed)."""
    if not runs:
        raise NeedlepointError("compare needs at least one run folder")
    first = runs[0]
    for run in runs[1:]:
        if run.design_fingerprint != first.design_fingerprint:
            raise NeedlepointError(
                f"{run.run_dir}: design fingerprint {run.design_fingerprint[:12]} differs from "
                f"{first.run_dir} ({first.design_fingerprint[:12]}); only runs of one design "
                "are compared"
            )
    seen: dict[str | None, Path] = {}
    for run in runs:
        journal = run.input.journal_sha256
        if journal in seen:
            raise NeedlepointError(
                f"{run.run_dir}: is the same run as {seen[journal]} (journal sha256 "
                f"{(journal or '')[:12]}); give each run once"
            )
        seen[journal] = run.run_dir
    live = [r for r in runs if not r.input.simulation]
    simulated = [r for r in runs if r.input.simulation]
    if live and simulated and not allow_simulated:
        odd = next(r for r in runs if r.input.simulation != first.input.simulation)
        kind = "simulated" if odd.input.simulation else "live"
        other = "live" if odd.input.simulation else "simulated"
        raise NeedlepointError(
            f"{odd.run_dir}: is {kind} but {first.run_dir} is {other}; simulated and live runs "
            "are set side by side only with --allow-simulated, and then every output says so"
        )


def load_runs(run_dirs: Sequence[str | Path], allow_simulated: bool = False) -> list[LoadedRun]:
    """Load, analyse and check every run; the first refusal is one line naming its run."""
    runs = [load_run(d) for d in run_dirs]
    check_comparable(runs, allow_simulated)
    return runs
