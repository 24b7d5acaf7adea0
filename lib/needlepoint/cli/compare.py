"""`needlepoint compare`: runs of one design side by side, each analysed alone.

Heavy imports stay inside the command function so that `needlepoint --help` stays fast. What is
printed depends only on the runs: no durations and no absolute paths.
"""

from __future__ import annotations

import argparse

from needlepoint.safetext import say


def _cmd_compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from needlepoint.compare.document import compare_runs, load_runs
    from needlepoint.study.record import evidence_root, search_note, study_record

    runs = load_runs(args.run_dirs, args.allow_simulated)  # refusals first, before the record
    if "depths" in runs[0].input.protocol:
        from needlepoint.compare.depth import compare_depth

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


def register(sub: argparse._SubParsersAction) -> None:
    """Add the compare sub-command."""
    c = sub.add_parser(
        "compare",
        help="runs of one design side by side, each analysed alone (never pooled)",
        description="Analyse each run exactly as `analyze` does and set them side by side: "
        "comparison.json, comparison.md, the results grid (grid.csv, grid.md, grid.png: every "
        "run by length, similarity and position) and figures. Two or more runs, sharing one "
        "design fingerprint.",
    )
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
    c.add_argument(
        "--evidence-root",
        metavar="ROOT",
        help="where other runs of the design are on record (default: the nearest folder "
        "named evidence holding the first RUNDIR)",
    )
    c.set_defaults(func=_cmd_compare)
