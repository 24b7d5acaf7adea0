"""CLI provider for `needlepoint run`, `check-endpoint`, `sweep`, `results` and `audit-run`.

The flag names are a stable interface: users script them. Heavy imports stay inside the
command functions so that `needlepoint --help` stays fast.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from needlepoint.errors import NeedlepointError
from needlepoint.run import options as limits

if TYPE_CHECKING:
    from needlepoint.run.options import RunOptions


def _sim_params(pairs: list[str] | None) -> dict[str, float] | None:
    if not pairs:
        return None
    out: dict[str, float] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise NeedlepointError(f"--sim-param {pair!r}: expected NAME=VALUE")
        try:
            out[name] = int(value) if name == "seed" else float(value)
        except ValueError:
            raise NeedlepointError(f"--sim-param {name}: {value!r} is not a number") from None
    return out


def run_options(args: argparse.Namespace) -> RunOptions:
    """The run flags (``add_run_flags``) as one RunOptions; `run` and `pilot` share them."""
    from needlepoint.run.options import RunOptions

    return RunOptions(
        allow=args.allow,
        progress="off" if args.no_progress else "auto",
        simulate=args.simulate,
        sim_params=_sim_params(args.sim_param),
        base_url=args.base_url,
        model=args.model,
        api_key_env=args.api_key_env,
        min_gap_s=args.min_gap_s,
        override_reason=args.override_reason,
        timeout_s=args.timeout_s,
        input_rate=args.input_rate,
        output_rate=args.output_rate,
        cost_cap=args.cost_cap,
        allow_insecure_http=args.allow_insecure_http,
        declaration=args.declaration,
        no_key=args.no_key,
        self_hosted=args.self_hosted,
        concurrency=getattr(args, "concurrency", 1),
    )


def _cmd_run(args: argparse.Namespace) -> int:
    """send a prepared folder's frozen requests (live or simulated), journalled

    Send the frozen requests in order, within --allow attempts, never retrying. Running again on the
    same --run-dir resumes.
    """
    from needlepoint.run.runner import run_protocol

    def say(line: str) -> None:  # the resume line and any warning, before anything is sent
        print(line, file=sys.stderr if line.startswith("warning:") else sys.stdout, flush=True)

    summary = run_protocol(args.prepared, args.run_dir, run_options(args), say)
    for line in summary.lines():
        print(line)
    # A stop rule firing is not an error of the command, but scripts should be able to tell.
    return 0 if summary.stop_reason in ("complete", "allowance_spent") else 3


def _cmd_sweep(args: argparse.Namespace) -> int:
    """several runs at once, one worker per run (SWEEP.json), each a `run`

    Start every run listed in SWEEP.json together, one worker process per run, each with its own
    journal, lock, spacing and stop rules. Running it again resumes each run. Format:
    docs/runner.md.
    """
    import dataclasses
    from pathlib import Path

    from needlepoint.run.sweep import read_sweep, run_sweep

    planned = read_sweep(args.sweep)
    if args.declaration is not None:
        # Resolved here: each worker checks it, and records it relative to its own run folder.
        declared = Path(args.declaration).resolve()
        planned = [dataclasses.replace(p, declaration=declared) for p in planned]
    summary = run_sweep(planned, "off" if args.no_progress else "auto")
    for run in summary.runs:
        for line in run.lines:
            print(f"[{run.name}] {line}", file=sys.stdout if run.state == "done" else sys.stderr)
    if summary.interrupted:
        print("needlepoint sweep: interrupted; run it again to resume", file=sys.stderr)
    return summary.exit_status


def _cmd_results(args: argparse.Namespace) -> int:
    """derive RUNDIR/results.csv from the journal"""
    from needlepoint.run.results import RESULTS_NAME, summary_lines, write_results

    results = write_results(args.run_dir, args.prepared)
    for line in summary_lines(results):
        print(line)
    print(f"wrote {args.run_dir.rstrip('/')}/{RESULTS_NAME}")
    return 0


def _cmd_audit_run(args: argparse.Namespace) -> int:
    """check a run folder's journal, records and rules"""
    from needlepoint.run.audit import audit_run

    audit = audit_run(args.run_dir, args.prepared)
    for line in audit.lines():
        print(line, file=sys.stdout if audit.ok else sys.stderr)
    return 0 if audit.ok else 1


def _cmd_check_endpoint(args: argparse.Namespace) -> int:
    """check an endpoint before a run: TLS or loopback, GET /models, key, model listed

    Ask GET {base-url}/models once, with the runner's client and key rule: reachable, key accepted,
    model listed; with --tokens, whether the longest request fits the served window. Sends no
    completion and writes nothing. Exit 0 when every check passes, 1 when one fails, 2 on bad input.
    """
    from needlepoint.run.endpoint import check_endpoint

    model, prepared = args.model, None
    if args.tokens and args.prepared is None:
        raise NeedlepointError(
            "--tokens needs the prepared folder DIR whose longest request to count"
        )
    if args.prepared is not None:
        from needlepoint.design.freeze import prepare_command
        from needlepoint.design.prepared import frozen_model, load_prepared

        prepared = load_prepared(args.prepared)
        frozen = frozen_model(prepared)
        if model is not None and model != frozen:
            raise NeedlepointError(
                f"--model {model!r} differs from the model frozen in {args.prepared} "
                f"({frozen!r}); to freeze the design for it: "
                f"{prepare_command(args.prepared, model)}"
            )
        model = frozen
    if model is None:
        raise NeedlepointError("give --model M, or the prepared folder whose model to look for")
    report = check_endpoint(
        args.base_url,
        model,
        args.api_key_env,
        allow_insecure_http=args.allow_insecure_http,
        timeout_s=args.timeout_s,
        no_key=args.no_key,
        self_hosted=args.self_hosted,
        tokens=prepared if args.tokens else None,
        prepared=args.prepared,
    )
    for line in report.lines():
        print(line)
    return 0 if report.ok else 1


def register(sub: argparse._SubParsersAction) -> None:
    """Add the run, check-endpoint, sweep, results and audit-run commands."""
    from needlepoint.run.options import MAX_CONCURRENCY

    p = command(sub, "run", _cmd_run)
    p.add_argument("prepared", metavar="DIR", help="prepared folder (must pass verify and audit)")
    p.add_argument("--run-dir", required=True, help="run folder: created, or resumed")
    add_run_flags(p)
    p.add_argument(
        "--concurrency",
        type=whole(1, MAX_CONCURRENCY),
        default=1,
        metavar="N",
        help="requests in flight at once, for a server you own; above 1 only with --min-gap-s "
        "below the protocol's and --override-reason (default 1)",
    )

    e = command(sub, "check-endpoint", _cmd_check_endpoint)
    e.add_argument(
        "prepared",
        metavar="DIR",
        nargs="?",
        help="prepared folder whose frozen model to look for (or give --model)",
    )
    e.add_argument("--base-url", required=True, help="OpenAI-compatible base URL, as for run")
    e.add_argument("--model", help="the model that must be listed (default: DIR's frozen model)")
    e.add_argument(
        "--api-key-env", help="name of the environment variable holding the key (or --no-key)"
    )
    add_self_hosted_flags(e)
    e.add_argument(
        "--tokens",
        action="store_true",
        help="count DIR's longest request's prompt tokens through the server's tokenize route "
        "(vLLM or llama.cpp /tokenize) and check it fits the window the server reports; sends "
        "no completion",
    )
    e.add_argument(
        "--allow-insecure-http",
        action="store_true",
        help="allow the key over plain http to a host that is not loopback",
    )
    e.add_argument(
        "--timeout-s",
        type=float,
        default=15.0,
        help="per operation; the whole request gets twice this (default %(default)s)",
    )

    w = command(sub, "sweep", _cmd_sweep)
    w.add_argument("sweep", metavar="SWEEP.json", help="the sweep file")
    add_declaration_flag(w)
    w.add_argument("--no-progress", action="store_true", help="no progress lines")

    r = command(sub, "results", _cmd_results)
    r.add_argument("run_dir", metavar="RUNDIR", help="the run folder")
    r.add_argument("--prepared", help="prepared folder, if it moved since the run")

    a = command(sub, "audit-run", _cmd_audit_run)
    a.add_argument("run_dir", metavar="RUNDIR", help="the run folder")
    a.add_argument("--prepared", help="prepared folder, if it moved since the run")


def add_run_flags(p: argparse.ArgumentParser) -> None:
    """The flags of a run: allowance, live endpoint or simulation, spacing, timeouts, money."""
    from needlepoint.run import options as limits
    from needlepoint.run.options import DEFAULT_TIMEOUT_S

    gap, rate = number(0, limits.MAX_SECONDS), number(0, limits.MAX_RATE)
    p.add_argument("--allow", type=positive_int, required=True, help="most attempts, in total")
    p.add_argument("--base-url", help="OpenAI-compatible base URL, e.g. https://host/v1")
    p.add_argument("--model", help="must equal the model in the frozen bodies")
    p.add_argument("--api-key-env", help="name of the environment variable holding the key")
    add_self_hosted_flags(p)
    p.add_argument(
        "--allow-insecure-http",
        action="store_true",
        help="send the key over plain http to a host that is not loopback (recorded in run.json)",
    )
    p.add_argument("--min-gap-s", type=gap, help="seconds after a completion (protocol: 20)")
    p.add_argument("--override-reason", help="required to lower --min-gap-s; recorded")
    p.add_argument(
        "--timeout-s",
        type=seconds,
        default=DEFAULT_TIMEOUT_S,
        help="per operation; the whole request gets twice this (default %(default)s)",
    )
    p.add_argument(
        "--simulate",
        choices=("perfect", "position", "faulty"),
        help="fake transport; everything derived is labelled simulation",
    )
    p.add_argument(
        "--sim-param",
        action="append",
        metavar="NAME=VALUE",
        help="a position-model parameter (repeatable), e.g. p_middle=0.7",
    )
    p.add_argument("--input-rate", type=rate, help="money per million prompt tokens")
    p.add_argument("--output-rate", type=rate, help="money per million completion tokens")
    p.add_argument(
        "--cost-cap",
        type=number(0, limits.MAX_COST_CAP),
        help="stop before spending more than this",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_declaration_flag(p)


def add_self_hosted_flags(p: argparse.ArgumentParser) -> None:
    """``--no-key`` and ``--self-hosted HOST``: a server you own (docs/runner.md)."""
    p.add_argument(
        "--no-key",
        action="store_true",
        help="send no key: a server you own that needs none (loopback, or the host named by "
        "--self-hosted); recorded in run.json",
    )
    p.add_argument(
        "--self-hosted",
        metavar="HOST",
        help="vouch that HOST, the --base-url's host, is a server you own: it may then run "
        "with --no-key or a short test key",
    )


def add_declaration_flag(p: argparse.ArgumentParser) -> None:
    """``--declaration DECL.json``: the declaration a run is started under (`declare`)."""
    p.add_argument(
        "--declaration",
        metavar="DECL.json",
        help="start under this declaration (needlepoint declare): its SHA-256 goes into run.json "
        "and the journal's first record, before the first request",
    )


def command(
    sub: argparse._SubParsersAction, name: str, func: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    """Add sub-command ``name`` that runs ``func``; its help is the first paragraph of ``func``'s
    docstring and its description the rest, so the words a user reads sit on the code they name.
    """
    doc = (func.__doc__ or "").strip().split("\n\n")
    # argparse re-wraps both texts, so the docstring's own line breaks never reach the terminal.
    text = [" ".join(part.split()) for part in doc]
    parser = sub.add_parser(name, help=text[0] or None, description=" ".join(text[1:]) or None)
    parser.set_defaults(func=func)
    return parser


# Argument types with their ranges: every numeric flag is checked before any work starts.
#
# A value out of range is a usage error (one line naming the flag and the range, exit 2), so
# ``--timeout-s 1e308`` or ``--max-cases 1000000000`` never reaches a sleep, a clock or a search.

# Ranges shared by several commands.
SECONDS = (limits.MIN_TIMEOUT_S, limits.MAX_SECONDS)
MAX_N_CTX = 1 << 20  # tokens of context: far beyond any packaged model's window
MAX_SEED = 2**63 - 1  # numpy's generators take non-negative seeds; a JSON integer stays exact


def whole(low: int, high: int) -> Callable[[str], int]:
    """An integer from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not an integer") from None
        if not low <= value <= high:
            if low == 1 and value < 1:
                raise argparse.ArgumentTypeError("must be a positive integer")
            raise argparse.ArgumentTypeError(f"{value} is outside {low} to {high:,}")
        return value

    return parse


def number(low: float, high: float, *, open_low: bool = False) -> Callable[[str], float]:
    """A finite number from ``low`` to ``high`` (above ``low`` when ``open_low``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a finite number")
        if value < low or value > high or (open_low and value == low):
            side = "(" if open_low else "["
            raise argparse.ArgumentTypeError(f"{value:g} is outside {side}{low:g}, {high:g}]")
        return value

    return parse


positive_int = whole(1, limits.MAX_ALLOW)
seconds = number(*SECONDS)
n_ctx = whole(1, MAX_N_CTX)
seed = whole(0, MAX_SEED)
