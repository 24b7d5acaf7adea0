"""`needlepoint analyze`, `power` and `compare`: one run, the design's power, runs side by side.

Heavy imports stay inside the command functions so that `needlepoint --help` stays fast. What
is printed depends only on the inputs: no durations and no absolute paths.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from needlepoint.cli.run import command
from needlepoint.errors import NeedlepointError
from needlepoint.safetext import say

if TYPE_CHECKING:  # the command line loads the analysis only when a command needs it
    from needlepoint.analysis.inputs import AnalysisInput


def _cmd_analyze(args: argparse.Namespace) -> int:
    """the preregistered analysis of one run: analysis.json, summary.md, figures

    Analyse one run (re-derived from its journal) or one results table.
    """
    from needlepoint.analysis.document import analyze
    from needlepoint.analysis.inputs import from_results_csv, from_run, refuse_pooling
    from needlepoint.analysis.report import headline_lines

    if args.results:
        if not args.prepared:
            raise NeedlepointError("--results needs --prepared DIR (the plan it was run from)")
        if args.run_dirs:
            raise NeedlepointError("give either RUNDIR or --results FILE.csv, not both")
        names = list(args.results)
        inputs = [from_results_csv(f, args.prepared) for f in names]
        default_out = Path(names[0]).parent / "analysis"
    else:
        if not args.run_dirs:
            raise NeedlepointError("give a RUNDIR, or --results FILE.csv --prepared DIR")
        names = list(args.run_dirs)
        inputs = [from_run(d, args.prepared) for d in names]
        default_out = Path(names[0]) / "analysis"
    refuse_pooling(inputs, names)
    out = Path(args.out) if args.out else default_out
    if "depths" in inputs[0].protocol:
        return _depth(inputs[0], out, not args.no_figures)
    record, notes = _study_record(args, out)
    if args.run_dirs:
        from needlepoint.interop.inspect_import import imported_lines

        record = [*imported_lines(Path(args.run_dirs[0])), *record]
    result = analyze(inputs[0], out, figures=not args.no_figures, record=record)
    doc = result.document
    if doc.simulation:
        say(doc.label)
    for line in headline_lines(doc):
        say(line)
    p = doc.primary
    trust = f"; not verified: {doc.run.unverified}" if doc.run.unverified else ""
    say(f"decision: {p.decision} ({p.reason}){trust}")
    if p.interval and p.estimate is not None:
        iv = p.interval
        seed = f", seed {iv.seed}" if iv.seed is not None else ""
        say(
            f"difference {p.estimate:.4g} [{iv.lower:.4g}, {iv.upper:.4g}] "
            f"over {p.complete_cases} complete cases ({iv.method} bootstrap{seed})"
        )
    for caveat in doc.caveats:
        say(f"caveat: {caveat}")
    for line in [*record, *notes]:
        say(line)
    where = _shown(out)
    say(f"wrote {where}/analysis.json, {where}/summary.md and {len(doc.figures)} figures")
    return 0


def _depth(inp: AnalysisInput, out: Path, figures: bool) -> int:
    """A depth design's analysis (PROTOCOL.md, "Depth analysis"): depth.json, summary.md and
    the depth figures."""
    from needlepoint.analysis.depth import analyze_depth
    from needlepoint.analysis.depth.report import FIGURES, headline_lines, write_depth
    from needlepoint.analysis.primary import SIMULATION_BANNER

    result = analyze_depth(inp)
    if result.simulation:
        print(SIMULATION_BANNER)
    for line in headline_lines(result):
        print(line)
    write_depth(result, out, figures)
    where = _shown(out)
    print(
        f"wrote {where}/depth.json, {where}/summary.md and {len(FIGURES) if figures else 0} figures"
    )
    return 0


def _study_record(args: argparse.Namespace, out: Path) -> tuple[list[str], list[str]]:
    """The run's declaration chain and the other runs of its design and model on record (for
    summary.md), and what only the terminal is told: that none were searched."""
    from needlepoint.study.declare import evidence_root, search_note, study_record

    if args.results:
        return [], []  # a results table names no run folder, so no declaration and no record
    root = evidence_root(args.evidence_root, args.run_dirs[0])
    record = study_record(args.run_dirs, root, out)
    return record, search_note(root, record)


def _shown(path: Path) -> str:
    """A path as the user gave it, made relative when absolute, so output has no machine paths."""
    from needlepoint.analysis.report import display

    return display(path)


def _cmd_power(args: argparse.Namespace) -> int:
    """design sensitivity: P(decision = supported) for hypothetical models

    Simulate the full design with its completeness rules and decision.
    """
    from needlepoint.analysis.power import PowerModel, PowerStudy, sensitivity_lines

    model = PowerModel(
        acc_b=args.acc_b,
        acc_m=args.acc_m,
        acc_e=args.acc_e,
        acc_a=args.acc_a,
        failure_rate=args.failure_rate,
        high_b=args.high_acc_b,
        high_m=args.high_acc_m,
        high_e=args.high_acc_e,
        high_a=args.high_acc_a,
        case_sd=args.case_sd,
    )
    grid = {"effects": args.effects} if args.effects is not None else {}
    study = PowerStudy(cases=args.cases, simulations=args.simulations, seed=args.seed, **grid)
    for line in sensitivity_lines(model, study, prepared=args.prepared, out=args.out):
        say(line)
    return 0


def _listed(convert: Callable[[str], float], what: str) -> Callable[[str], list]:
    """An argument type for a comma-separated list of ``what``, each read by ``convert``."""

    def parse(text: str) -> list:
        try:
            return [convert(t) for t in text.split(",") if t.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not a comma-separated list of {what}: {text!r}"
            ) from None

    return parse


def _evidence_root(p: argparse.ArgumentParser, holding: str) -> None:
    """``--evidence-root``: where the design's other runs are on record."""
    p.add_argument(
        "--evidence-root",
        metavar="ROOT",
        help="where other runs of the design are on record (default: the nearest folder "
        f"named evidence holding {holding})",
    )


def register(sub: argparse._SubParsersAction) -> None:
    """Add the analyze and power sub-commands."""
    a = command(sub, "analyze", _cmd_analyze)
    a.add_argument("run_dirs", metavar="RUNDIR", nargs="*", help="run folder (exactly one)")
    a.add_argument("--results", action="append", metavar="FILE.csv", help="results table")
    a.add_argument("--prepared", metavar="DIR", help="prepared folder (required with --results)")
    a.add_argument("--out", metavar="DIR", help="output folder (default: RUNDIR/analysis)")
    a.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    _evidence_root(a, "RUNDIR")

    p = command(sub, "power", _cmd_power)
    p.add_argument(
        "--cases", type=_listed(int, "integers"), default=[8, 16, 32], help="e.g. 8,16,32"
    )
    p.add_argument(
        "--effects", type=_listed(float, "numbers"), help="added middle losses, e.g. 0,0.1,0.2"
    )
    p.add_argument("--acc-b", type=float, default=0.95, help="accuracy at the beginning")
    p.add_argument("--acc-m", type=float, default=0.9, help="accuracy in the middle (low sim.)")
    p.add_argument("--acc-e", type=float, default=0.95, help="accuracy at the end")
    p.add_argument("--acc-a", type=float, default=0.95, help="refusal accuracy on A")
    for cond, where in (("b", "beginning"), ("m", "middle"), ("e", "end"), ("a", "absent")):
        p.add_argument(
            f"--high-acc-{cond}",
            type=float,
            help=f"accuracy at the {where} under high similarity (default: the low one)"
            + ("; shown only: the added middle loss sets it" if cond == "m" else ""),
        )
    p.add_argument(
        "--case-sd", type=float, default=0.0, help="between-case spread (SD, logit scale)"
    )
    p.add_argument("--failure-rate", type=float, default=0.0, help="P(protocol failure)")
    p.add_argument("--simulations", type=int, default=1000, help="simulated runs per point")
    p.add_argument("--seed", type=int, default=20260930, help="numpy default_rng seed")
    p.add_argument("--prepared", metavar="DIR", help="take protocol parameters from here")
    p.add_argument("--out", metavar="DIR", help="write power.csv and power_curve.png here")
    _register_compare(sub)  # `compare` follows `power` in --help


# `needlepoint compare`: runs of one design side by side, each analysed alone.
#
# Heavy imports stay inside the command function so that `needlepoint --help` stays fast. What is
# printed depends only on the runs: no durations and no absolute paths.


def _cmd_compare(args: argparse.Namespace) -> int:
    """runs of one design side by side, each analysed alone (never pooled)

    Analyse each run exactly as `analyze` does and set them side by side: comparison.json,
    comparison.md, the results grid (grid.csv, grid.md, grid.png: every run by length, similarity
    and position) and figures. Two or more runs, sharing one design fingerprint.
    """
    from pathlib import Path

    from needlepoint.compare.document import compare_runs, load_runs
    from needlepoint.study.declare import evidence_root, search_note, study_record

    runs = load_runs(args.run_dirs, args.allow_simulated)  # refusals first, before the record
    if "depths" in runs[0].input.protocol:
        from needlepoint.compare.document import compare_depth

        lines = compare_depth(runs, Path(args.out), figures=not args.no_figures, labels=args.label)
        for line in lines:
            print(line)
        return 0
    root = evidence_root(args.evidence_root, args.run_dirs[0])
    record = study_record(args.run_dirs, root, Path(args.out))
    result = compare_runs(
        args.run_dirs,
        args.out,
        allow_simulated=args.allow_simulated,
        figures=not args.no_figures,
        record=record,
        labels=args.label,
    )
    for line in [*result.lines(), *record, *search_note(root, record)]:
        say(line)
    figures = len(result.document.figures)
    say(
        f"wrote comparison.json, comparison.md, the results grid (grid.md, grid.csv) and "
        f"{figures} figures to the --out folder"
    )
    return 0


def _register_compare(sub: argparse._SubParsersAction) -> None:
    """Add the compare sub-command."""
    c = command(sub, "compare", _cmd_compare)
    c.add_argument("run_dirs", metavar="RUNDIR", nargs="+", help="run folders of one design")
    c.add_argument("--out", metavar="DIR", required=True, help="the comparison folder")
    c.add_argument(
        "--allow-simulated",
        action="store_true",
        help="allow simulated runs beside live ones (every output then says so)",
    )
    c.add_argument(
        "--label",
        action="append",
        metavar="NAME",
        help="name of a run in every table and figure; once per run, in the order of the run "
        "folders (default: each run's model)",
    )
    c.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    _evidence_root(c, "the first RUNDIR")
