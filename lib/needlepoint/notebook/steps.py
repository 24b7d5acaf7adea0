"""The notebooks' steps: what a notebook does beyond a call into its stage, where a test reaches it.

A notebook's parameters cell holds literals only, and its cells call the library; every choice a
notebook makes (simulated or live, which plan it declares, which simulated variants it runs,
which pilot it calibrates) is made here. The stages below never import this module.

The run notebook's one entry point: a `transport` switch between simulation and a live API.

The notebook's parameters cell holds literals only, so the choice between a simulated and a live
run is made here, where a test can reach it, rather than in a notebook cell.

The notebooks' declarations: each notebook that runs something declares its plan first.

A notebook writes a plan stating what it is about to run and the rule that will judge it, then
a declaration of that plan (`declare`), and starts its runs under it. Re-executed on the same
folder, it keeps its declaration when the plan is the same (the runs resume under it), and
refuses another plan. A simulated pipeline declares on the simulated clock, so its evidence stays
reproducible byte for byte; the declaration says that its time proves nothing.

Simulated model variants of one design: the offline default of the comparison notebook.

Each entry names a model and the ``position`` simulation's parameters (``PositionParams``).
Its prepared folder is a model variant of the reference design (``prepare --model``): the same
design fingerprint, its own bodies. Its run is an ordinary simulated run folder, labelled as
simulation everywhere, so the comparison reads it as it would read a live run.

The pilot notebook's steps, so that the notebook holds no logic a test cannot reach.

Offline, the notebook runs a simulated pilot (labelled as such everywhere); given a pilot folder
made elsewhere (a live `needlepoint pilot`), it calibrates that one instead.

The depth notebook freezes the worked example of PROTOCOL.md's "Depth designs" (verify and
audit with the checks a depth design adds) before its seeded simulation and analysis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.design.audit import audit_prepared
from needlepoint.design.prepared import load_prepared, prepare
from needlepoint.design.protocol import protocol_bytes
from needlepoint.design.verify import verify_prepared
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import write_bytes_atomic
from needlepoint.pilot.calibrate import Calibration, CalibrationOptions, calibrate
from needlepoint.pilot.folder import OnRecord, read_design, run_pilot
from needlepoint.pilot.record import read_pilot_record
from needlepoint.pilot.report import write_protocol, write_report
from needlepoint.run.declaration import read_declaration
from needlepoint.run.options import DEFAULT_TIMEOUT_S, RunOptions
from needlepoint.run.runner import run_protocol

TRANSPORTS = ("simulate", "live")


def run_step(
    prepared_dir: str | Path,
    run_dir: str | Path,
    *,
    transport: str,
    allow: int,
    simulate: str = "position",
    sim_params: dict[str, float] | None = None,
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = None,
    min_gap_s: float | None = None,
    override_reason: str | None = None,
    timeout_s: float | None = None,
    deadline_s: float | None = None,
    input_rate: float | None = None,
    output_rate: float | None = None,
    cost_cap: float | None = None,
    progress: str = "terminal",
    fsync: bool = True,
    run_meta: dict[str, Any] | None = None,
    declaration: str | Path | None = None,
) -> Any:
    """Run (or resume) the protocol: simulated offline, or live against an OpenAI-compatible API.

    The keywords are the run notebook's parameters; they become one ``RunOptions`` here. Live
    runs read the key from the environment variable ``api_key_env`` only; the runner refuses to
    start without it, a base URL and the frozen model name. ``run_meta`` (for example a local
    server's facts) is stored in run.json; options left at ``None`` keep their defaults.
    ``declaration``: the declaration file the run is started under.
    """
    from needlepoint.run.runner import run_protocol

    if transport not in TRANSPORTS:
        raise NeedlepointError(
            f"transport must be one of {', '.join(TRANSPORTS)}, not {transport!r}"
        )
    live = transport == "live"
    options = RunOptions(
        allow=allow,
        simulate=None if live else simulate,
        sim_params=sim_params,
        base_url=base_url if live else None,
        model=model if live else None,
        api_key_env=api_key_env if live else None,
        min_gap_s=min_gap_s,
        override_reason=override_reason,
        timeout_s=DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s,
        deadline_s=deadline_s,
        input_rate=input_rate,
        output_rate=output_rate,
        cost_cap=cost_cap,
        progress=progress,
        fsync=fsync,
        run_meta=run_meta,
        declaration=None if declaration is None else str(declaration),
    )
    return run_protocol(prepared_dir, run_dir, options, print)


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
    from needlepoint.study.declare import chain_record
    from needlepoint.study.scan import records_for

    base = Path(root)
    records = records_for(base)
    lines = chain_record([Path(pilot_dir) / "run"], base, base, shown=[f"{shown}/run"])
    lines.append(f"designs the new version's materials avoid: the pilot, {len(records)} on record")
    return records, lines


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


CALIBRATED_NAME = "calibrated-protocol.json"
REPORT_NAME = "calibration.json"
ACCURACY_FIGURE = "accuracy_by_length.png"
POWER_FIGURE = "power_curve.png"
POWER_TABLE = "power.csv"


def pilot_step(
    design_file: str | Path | None,
    pilot_dir: str | Path,
    *,
    simulate: bool,
    lengths: list[int],
    cases: int,
    sim_params: dict[str, float] | None = None,
    declaration: str | Path | None = None,
) -> list[str]:
    """Run a simulated pilot into ``pilot_dir`` (or resume it), or describe an existing one;
    ``declaration``: the declaration the simulated pilot is started under."""
    if simulate:
        planned = cases * len(lengths) * 8
        options = RunOptions(
            allow=planned,
            simulate="position",
            sim_params=sim_params,
            progress="off",
            declaration=None if declaration is None else str(declaration),
        )
        return run_pilot(design_file, pilot_dir, tuple(lengths), cases, options).lines()
    record = read_pilot_record(pilot_dir)
    return [
        f"pilot of {record.design.protocol_id} v{record.design.version} (pilot protocol "
        f"v{record.protocol_version}): lengths {', '.join(map(str, record.lengths))}, "
        f"{record.cases} cases, held-out materials seed {record.materials_seed.seed}"
    ]


@dataclass(frozen=True)
class CalibrationStep:
    """A calibration and the files written for it (paths relative to where they were asked)."""

    calibration: Calibration
    design: dict[str, Any]
    out_dir: Path

    @property
    def recommended(self) -> bool:
        return self.calibration.protocol is not None


def calibrate_step(
    pilot_dir: str | Path,
    out_dir: str | Path,
    options: CalibrationOptions,
    records: tuple[OnRecord, ...] = (),
) -> CalibrationStep:
    """Calibrate; write the record, and the new protocol when one is recommended, to out_dir.

    ``records``: designs already run, which the new version's materials must not repeat.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result = calibrate(pilot_dir, options, records)
    write_report(result.record, out / REPORT_NAME)
    if result.protocol is not None:
        write_protocol(result.protocol, out / CALIBRATED_NAME)
    design = read_design(Path(pilot_dir), read_pilot_record(pilot_dir))
    return CalibrationStep(result, design, out)


def figures_step(step: CalibrationStep, effects: list[float]) -> list[str]:
    """Draw the accuracy-by-length figure, and with a power model the power curve (and its
    table, power.csv); returns the figure file names.

    The curve compares half the recommended count (a multiple of the orders), the recommended
    count and the largest count tried when none was recommended.
    """
    from needlepoint.jsonio import write_bytes_atomic
    from needlepoint.pilot.report import accuracy_by_length, power_curve, power_table

    rec = step.calibration.record
    out = step.out_dir
    accuracy_by_length(rec, out / ACCURACY_FIGURE)
    names = [ACCURACY_FIGURE]
    if rec.model is None or not rec.power_table:
        return names
    step_size = len(step.design["orders"])
    top = rec.recommended_cases or rec.power_table[-1].cases
    half = max(step_size, top // 2 // step_size * step_size)
    counts = tuple(sorted({half, top}))
    if not effects or any(e < 0 for e in effects):
        raise NeedlepointError("effects: give non-negative added middle losses")
    model = rec.model
    grid = [e for e in effects if max(0.0, model.smallest_effect) <= e <= model.largest_effect]
    table = power_table(rec, step.design, counts, tuple(grid))
    write_bytes_atomic(
        out / POWER_TABLE, table.to_csv(index=False, lineterminator="\n").encode("utf-8")
    )
    power_curve(table, rec, out / POWER_FIGURE)
    return [*names, POWER_FIGURE]


def recommendation_lines(step: CalibrationStep, shown_dir: str) -> list[str]:
    """What the calibration decided and which files hold it (``shown_dir`` as the user named it)."""
    rec = step.calibration.record
    if not step.recommended:
        return [f"{rec.verdict}: {rec.reason}", f"wrote {shown_dir}/{REPORT_NAME} only"]
    return [
        f"{rec.verdict}: v{rec.protocol_version} with lengths "
        f"{', '.join(map(str, rec.chosen_lengths))} and {rec.recommended_cases} cases",
        f"wrote {shown_dir}/{CALIBRATED_NAME} (for needlepoint prepare --protocol) and "
        f"{shown_dir}/{REPORT_NAME}",
    ]


FIGURE_EFFECTS = tuple(round(0.05 * i, 2) for i in range(11))


def write_figures(pilot_dir: str | Path, result: Calibration, out_dir: str | Path) -> list[str]:
    """`calibrate --figures DIR`: the notebook's figures (and power.csv) for a calibration."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    design = read_design(Path(pilot_dir), read_pilot_record(pilot_dir))
    names = figures_step(CalibrationStep(result, design, out), list(FIGURE_EFFECTS))
    return [*names, POWER_TABLE] if len(names) > 1 else names


def freeze_depth(protocol: dict[str, Any], folder: Path) -> tuple[Path, list[str]]:
    """09-depth: write the override, prepare it into ``folder/prepared``, verify and audit it."""
    folder.mkdir(parents=True, exist_ok=True)
    override = folder / "protocol-override.json"
    write_bytes_atomic(override, protocol_bytes(protocol))
    prepared = prepare(folder / "prepared", override)
    loaded = load_prepared(prepared)
    verify = verify_prepared(prepared)
    audit = audit_prepared(prepared)
    conditions = ", ".join(loaded.protocol["conditions"])
    lines = [
        f"prepared {len(loaded.plan)} requests: conditions {conditions}",
        f"verify {'OK' if verify.ok else 'FAILED'}: {verify.files_compared} files compared",
        audit.lines()[-1],
        *(
            f"  {c.name}: {c.count} items, {c.failed} failed"
            for c in audit.checks
            if c.name in ("williams_orders", "position_balance", "near_slots", "answer_key")
        ),
    ]
    return prepared, lines
