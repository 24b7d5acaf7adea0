"""The notebooks' declarations: each notebook that runs something declares its plan first.

A notebook writes a plan stating what it is about to run and the rule that will judge it, then
a declaration of that plan (`declare`), and starts its runs under it. Re-executed on the same
folder, it keeps its declaration when the plan is the same (the runs resume under it), and
refuses another plan. A simulated pipeline declares on the simulated clock, so its evidence stays
reproducible byte for byte; the declaration says that its time proves nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import write_bytes_atomic
from needlepoint.run.declaration import read_declaration


@dataclass(frozen=True)
class Declaration:
    """A notebook's declaration file (None when it runs nothing) and the lines it prints (no
    path, no time)."""

    path: Path | None
    lines: list[str]


def _rule(protocol: dict[str, Any]) -> str:
    a = protocol["analysis"]
    return (
        "Decision rule, preregistered in the protocol: *supported* only if the difference in "
        f"middle loss (high − low similarity) is at least {a['threshold']} and the lower bound "
        f"of its {a['confidence']:.0%} case-cluster bootstrap interval is above 0; fewer than "
        f"{a['min_complete_cases']} complete cases: *not evaluable*. Every run is analysed "
        "alone; failures and missing cells are never counted as wrong."
    )


def _design_line(p: dict[str, Any]) -> str:
    from needlepoint.design.protocol import design_fingerprint

    requests = p["cases"] * len(p["lengths"]) * len(p["similarities"]) * len(p["conditions"])
    lengths = ", ".join(map(str, p["lengths"]))
    return (
        f"- {p['protocol_id']} v{p['version']} (design `{design_fingerprint(p)[:16]}…`): "
        f"{p['cases']} cases at lengths {lengths}, {requests} requests per run"
    )


def plan_text(title: str, protocol: dict[str, Any], what: Sequence[str]) -> str:
    """A plan: what is to be run (``what``, one item each), the design, and its decision rule."""
    lines = [f"# Plan: {title}", "", "Declared before the first request of:", ""]
    lines += [f"- {w}" for w in what]
    lines += ["", "Design:", "", _design_line(protocol), "", _rule(protocol), ""]
    return "\n".join(lines)


def declare_step(
    plan: str, folder: str | Path, name: str, root: str | Path, *, simulated: bool
) -> Declaration:
    """Write ``folder/name-plan.md`` and declare it as ``folder/name-declaration.json``, listing
    what is on record under ``root``; an existing declaration of the same plan is kept."""
    from needlepoint.study.declare import declare

    out_dir = Path(folder)
    out_dir.mkdir(parents=True, exist_ok=True)
    plan_path = out_dir / f"{name}-plan.md"
    out = out_dir / f"{name}-declaration.json"
    if out.exists():
        kept = read_declaration(out)
        if kept.record.plan.text != plan:
            raise NeedlepointError(
                f"{out}: declares another plan than this notebook's; use a new folder"
            )
        return Declaration(out, [f"{name}: declaration kept (sha256 {kept.sha256[:12]}…)"])
    write_bytes_atomic(plan_path, plan.encode("utf-8"))
    declared = declare(plan_path, out, root, simulated=simulated)
    r = declared.record
    outcomes = sum(h.outcomes for h in r.heads)
    clock = "; simulated clock: its time proves nothing" if r.simulation else ""
    return Declaration(
        out,
        [
            f"{name}: plan {plan_path.name} (sha256 {r.plan.sha256[:12]}…) declared in "
            f"{out.name} (sha256 {declared.sha256[:12]}…){clock}",
            f"{name}: on record then: {len(r.heads)} journal(s) with {outcomes} outcome(s), "
            f"{len(r.analyses)} analysis(es)",
        ],
    )


def declare_run(
    prepared_dir: str | Path, folder: str | Path, root: str | Path, *, allow: int, simulated: bool
) -> Declaration:
    """The run notebook's declaration: the prepared folder, the allowance, the rule."""
    from needlepoint.design.prepared import load_prepared

    prepared = load_prepared(prepared_dir)
    how = "a simulated run" if simulated else "a live run"
    what = [
        f"{how} of the prepared folder with protocol fingerprint `{prepared.fingerprint[:16]}…` "
        f"(model `{prepared.protocol['model']}`), at most {allow} requests, no retries"
    ]
    plan = plan_text("one run of the design", prepared.protocol, what)
    return declare_step(plan, folder, "run", root, simulated=simulated)


def declare_variants(
    models: Sequence[str], folder: str | Path, root: str | Path, *, simulated: bool
) -> Declaration:
    """The compare notebook's declaration: one run per model variant of the reference design."""
    from needlepoint.design.protocol import reference_protocol

    how = "simulated" if simulated else "live"
    what = [f"a {how} run of the model variant `{m}`, every planned request" for m in models]
    what.append("their comparison, each run analysed alone, never pooled or ranked")
    plan = plan_text("model variants of one design", reference_protocol(), what)
    return declare_step(plan, folder, "compare", root, simulated=simulated)


def declare_pilot(
    design_file: str | Path | None,
    lengths: Sequence[int],
    cases: int,
    calibration: Any,
    folder: str | Path,
    root: str | Path,
    *,
    simulated: bool,
) -> Declaration:
    """The pilot notebook's declaration: the pilot, then its calibration with these options.

    Only a pilot the notebook runs (a simulated one) is declared here; a pilot made elsewhere
    was started under whatever declaration its run.json names.
    """
    from needlepoint.pilot.folder import load_design

    if not simulated:
        return Declaration(None, ["pilot: made elsewhere; not declared by this notebook"])
    design = load_design(design_file)
    o = calibration
    how = "a simulated pilot" if simulated else "a pilot"
    what = [
        f"{how} of this design on held-out materials: lengths "
        f"{', '.join(map(str, lengths))}, {cases} cases, every planned request",
        f"its calibration: end-accuracy band [{o.band_low}, {o.band_high}], effect {o.effect}, "
        f"80% power, at most {o.max_cases} cases, {o.simulations} simulations, seed {o.seed}; "
        "a new version only if a length qualifies and the power is reached",
    ]
    plan = plan_text("pilot and calibration", design, what)
    return declare_step(plan, folder, "pilot", root, simulated=simulated)


def calibration_record(
    pilot_dir: str | Path, root: str | Path, shown: str
) -> tuple[tuple[Any, ...], list[str]]:
    """What the pilot notebook's calibration takes from the record: the designs on record its
    new version must not repeat, and the pilot's declaration chain (``shown`` names the pilot)."""
    from needlepoint.study.fresh import records_for
    from needlepoint.study.record import chain_record

    base = Path(root)
    records = records_for(base)
    lines = chain_record([Path(pilot_dir) / "run"], base, base, shown=[f"{shown}/run"])
    lines.append(f"designs the new version's materials avoid: the pilot, {len(records)} on record")
    return records, lines
