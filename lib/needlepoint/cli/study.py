"""`needlepoint declare` and `needlepoint registry`: the study record's commands.

Heavy imports stay inside the command functions so that `needlepoint --help` stays fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from needlepoint.cli.run import command
from needlepoint.errors import NeedlepointError
from needlepoint.safetext import say


def _cmd_declare(args: argparse.Namespace) -> int:
    """bind a plan to what results exist now: a declaration record for runs to cite

    Write DECL.json: the plan's text and SHA-256, the time, and the journal head of every run and
    pilot and the decision of every analysis under the evidence root. Start runs with --declaration
    DECL.json. An amendment (--amends PREV.json) cites the declaration it replaces by its SHA-256.
    Never overwrites a file.
    """
    from needlepoint.study.declare import declaration_summary, declare, evidence_root

    out = Path(args.out)
    root = evidence_root(args.evidence_root, out.parent)
    if root is None:
        raise NeedlepointError(
            f"{out}: not inside a folder named evidence; give --evidence-root ROOT, the folder "
            "whose runs and analyses the declaration must list"
        )
    declared = declare(
        args.plan,
        out,
        root,
        amends=args.amends,
        simulated=args.simulated_clock,
        published=args.published,
    )
    for line in declaration_summary(declared, root.as_posix()):
        say(line)
    return 0


def _cmd_registry(args: argparse.Namespace) -> int:
    """every run of every design under an evidence root, with decisions and agreement

    List every prepared folder, run, pilot, calibration, analysis, comparison and declaration under
    ROOT, grouped by design fingerprint and model variant; each run with its decision (re-derived
    from its journal), completeness, audit and declaration; runs of the same request bytes compared
    request by request. Exit 1 when a run is unreadable or fails audit-run. Writes nothing, except
    the grid with --grid.
    """
    from needlepoint.study.registry import collect, registry_lines

    reg = collect(args.root, history=args.history)
    for line in registry_lines(reg):
        say(line)
    if args.grid is not None:
        from needlepoint.study.registry import write_registry_grids

        for line in write_registry_grids(reg, args.grid):
            say(line)
    bad = [r for r in reg.runs if r.problem or not r.audit.startswith("ok")]
    return 1 if bad else 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the declare and registry sub-commands."""
    d = command(sub, "declare", _cmd_declare)
    d.add_argument("plan", metavar="PLAN.md", help="the plan, as UTF-8 text")
    d.add_argument("--out", required=True, metavar="DECL.json", help="the declaration file")
    d.add_argument("--amends", metavar="PREV.json", help="the declaration this one amends")
    d.add_argument(
        "--evidence-root",
        metavar="ROOT",
        help="the folder whose runs it lists (default: the folder named evidence holding --out)",
    )
    d.add_argument(
        "--published",
        metavar="URL",
        help="where the plan (or an earlier declaration's printed line) was published outside "
        "this machine; recorded in the declaration",
    )
    d.add_argument(
        "--simulated-clock",
        action="store_true",
        help="stamp the simulation epoch instead of the time (reproducible simulated evidence; "
        "proves no order in time, and a live run refuses it)",
    )

    r = command(sub, "registry", _cmd_registry)
    r.add_argument("root", metavar="ROOT", nargs="?", default="evidence", help="default: evidence")
    r.add_argument(
        "--history",
        action="store_true",
        help="also list run folders that git history holds and the tree no longer does",
    )
    r.add_argument(
        "--grid",
        metavar="OUT",
        help="also write the results grid (grid.csv, grid.md, grid.png) of each design's live "
        "main runs into OUT/<protocol>-<design>/",
    )
