"""`needlepoint local-pilot` and `local-run`: a held-out pilot, or a prepared folder, run live
against a packaged model served on 127.0.0.1 (the commands `pilot` and `run` do elsewhere)."""

from __future__ import annotations

import argparse
from typing import Any

from needlepoint.cli import args as types
from needlepoint.cli.pilot import add_pilot_flags
from needlepoint.cli.run import add_declaration_flag


def _serving(args: argparse.Namespace) -> dict[str, Any]:
    """The serving and run options both commands pass on, from their shared flags."""
    return {
        "allow": args.allow,
        "model": args.model,
        "n_ctx": args.n_ctx,
        "timeout_s": args.timeout_s,
        "progress": "off" if args.no_progress else "auto",
        "declaration": args.declaration,
    }


def _serving_flags(p: argparse.ArgumentParser) -> None:
    """The flags both commands share: the allowance, the model and server, the declaration."""
    p.add_argument("--allow", type=types.positive_int, required=True, help="most attempts")
    p.add_argument("--model", default="smollm2", help="packaged model key or alias")
    p.add_argument("--n-ctx", type=types.n_ctx, help="server context size (default: window)")
    p.add_argument("--timeout-s", type=types.seconds, default=300.0, help="per-request timeout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_declaration_flag(p)


def _cmd_local_pilot(args: argparse.Namespace) -> int:
    from needlepoint.cli.pilot import parse_ints, pilot_record, report_pilot
    from needlepoint.local.live import run_local_pilot

    records, check = pilot_record(args)
    result = run_local_pilot(
        args.protocol,
        args.out,
        parse_ints("--lengths", args.lengths),
        args.cases,
        **_serving(args),
        version=args.version,
        records=records,
        check=check,
    )
    return report_pilot(args.out, result)


def _cmd_local_run(args: argparse.Namespace) -> int:
    from needlepoint.local.live import run_local
    from needlepoint.run.results import summary_lines

    summary, results = run_local(
        args.prepared,
        args.run_dir,
        **_serving(args),
    )
    for line in [*summary.lines(), *summary_lines(results)]:
        print(line)
    return 0 if summary.stop_reason in ("complete", "allowance_spent") else 3


def register(sub: argparse._SubParsersAction) -> None:
    """Add the local-pilot and local-run commands."""
    p = sub.add_parser(
        "local-pilot",
        help="serve the packaged model and run a held-out pilot live against it",
        description="`needlepoint pilot` against a packaged model on 127.0.0.1: the token "
        "check runs before the first request, and the server's facts go into run.json.",
    )
    p.add_argument("--protocol", required=True, help="the design's protocol file (its model)")
    add_pilot_flags(p)
    _serving_flags(p)
    p.set_defaults(func=_cmd_local_pilot)

    r = sub.add_parser(
        "local-run",
        help="serve the packaged model and run a prepared folder live against it",
        description="`needlepoint run` against a packaged model on 127.0.0.1, with the token "
        "check before the first request and the server's facts in run.json; then results.csv.",
    )
    r.add_argument("prepared", metavar="DIR", help="prepared folder (its model is served)")
    r.add_argument("--run-dir", required=True, help="run folder: created, or resumed")
    _serving_flags(r)
    r.set_defaults(func=_cmd_local_run)
