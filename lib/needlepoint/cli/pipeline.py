"""`needlepoint pipeline`: run the notebooks in order with papermill into one evidence folder."""

from __future__ import annotations

import argparse


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
    for name in ("analysis/summary.md", "analysis/figures"):
        if (out / name).exists():
            print(f"  {out / name}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the pipeline command."""
    p = sub.add_parser("pipeline", help="run the notebooks in order into an evidence folder")
    p.add_argument("--label", required=True, help="evidence folder label, e.g. offline")
    p.add_argument(
        "-p",
        nargs=2,
        action="append",
        metavar=("NAME", "VALUE"),
        help="set a notebook parameter (JSON literal or string); repeatable",
    )
    p.add_argument("--evidence-root", default="evidence")
    p.add_argument("--notebooks", default="notebooks")
    p.add_argument("--date", help="YYYYMMDD for the folder name (default: today)")
    p.set_defaults(func=_cmd_pipeline)
