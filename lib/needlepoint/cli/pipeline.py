"""`needlepoint pipeline` (run the notebooks into an evidence folder) and `evidence-diff`."""

from __future__ import annotations

import argparse
from pathlib import Path


def outcome_lines(out: Path) -> list[str]:
    """The decision and where the summary is, read back from the analysis the notebooks wrote.

    A simulated run's decision carries the simulation banner, so it is never read as a model's.
    Nothing when the analysis notebook did not run (or wrote no analysis).
    """
    from needlepoint.analysis.document import Analysis
    from needlepoint.analysis.primary import SIMULATION_BANNER
    from needlepoint.analysis.record import read_document

    folder = out / "analysis"
    if not (folder / "analysis.json").is_file():
        return []
    analysis = Analysis(read_document(folder / "analysis.json"), folder)
    label = f" ({SIMULATION_BANNER})" if analysis.simulation else ""
    return [
        f"decision{label}: {analysis.decision} ({analysis.reason.rstrip('.')})",
        f"summary: {folder / 'summary.md'}",
    ]


def _cmd_pipeline(args: argparse.Namespace) -> int:
    from needlepoint.notebook.pipeline import parse_value, run_pipeline

    overrides = {name: parse_value(value) for name, value in args.p or []}
    out = run_pipeline(
        args.label,
        overrides,
        evidence_root=args.evidence_root,
        notebooks_dir=args.notebooks,
        date=args.date,
    )
    print(f"evidence written to {out}/")
    for line in outcome_lines(out):
        print(line)
    return 0


def _cmd_evidence_diff(args: argparse.Namespace) -> int:
    from needlepoint.notebook.evidence import diff_evidence

    diff = diff_evidence(args.committed, args.regenerated)
    print("\n".join(diff.lines()))
    return 0 if diff.ok else 1


def register(sub: argparse._SubParsersAction) -> None:
    """Add the pipeline and evidence-diff commands."""
    from needlepoint.notebook.pipeline import DEFAULT_ROOT

    p = sub.add_parser("pipeline", help="run the notebooks in order into an evidence folder")
    p.add_argument("--label", required=True, help="evidence folder label, e.g. offline")
    p.add_argument(
        "-p",
        nargs=2,
        action="append",
        metavar=("NAME", "VALUE"),
        help="set a notebook parameter (JSON literal or string); repeatable",
    )
    p.add_argument(
        "--evidence-root",
        default=DEFAULT_ROOT,
        metavar="DIR",
        help="folder the evidence folder <date>-<label>/ is created in (default: %(default)s/, "
        "which git ignores; the committed evidence lives in evidence/)",
    )
    p.add_argument(
        "--notebooks",
        metavar="DIR",
        help="the notebooks to execute (default: ./notebooks, else the repository's notebooks "
        "beside the installed package)",
    )
    p.add_argument("--date", help="YYYYMMDD for the folder name (default: today)")
    p.set_defaults(func=_cmd_pipeline)

    p = sub.add_parser(
        "evidence-diff",
        help="compare a regenerated evidence folder with the committed one, byte for byte",
    )
    p.add_argument("committed", type=Path, help="the committed evidence folder")
    p.add_argument("regenerated", type=Path, help="the folder the notebooks re-wrote")
    p.set_defaults(func=_cmd_evidence_diff)
