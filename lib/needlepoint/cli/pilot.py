"""`needlepoint pilot` and `needlepoint calibrate`: held-out materials choose lengths and a count.

Heavy imports stay inside the command functions so that `needlepoint --help` stays fast. Bad
input is one line and exit 2; a calibration that recommends nothing exits 1.
"""

from __future__ import annotations

import argparse
import math

from needlepoint.cli.run import add_run_flags, run_options
from needlepoint.errors import NeedlepointError


def parse_ints(flag: str, text: str) -> tuple[int, ...]:
    """``12,24,48`` as integers; anything else is one line naming the flag."""
    parts = [t.strip() for t in text.split(",")]
    try:
        values = tuple(int(t) for t in parts)
    except ValueError:
        raise NeedlepointError(f"{flag} {text!r}: expected integers separated by commas") from None
    if len(set(values)) != len(values):
        raise NeedlepointError(f"{flag} {text!r}: a value repeats")
    return values


def parse_band(text: str) -> tuple[float, float]:
    """``LOW,HIGH`` with 0 <= LOW < HIGH <= 1."""
    parts = text.split(",")
    try:
        low, high = (float(t) for t in parts)
    except ValueError:
        raise NeedlepointError(f"--band {text!r}: expected LOW,HIGH, e.g. 0.6,0.95") from None
    if not (math.isfinite(low) and math.isfinite(high) and 0 <= low < high <= 1):
        raise NeedlepointError(f"--band {text!r}: need 0 <= LOW < HIGH <= 1")
    return low, high


def _cmd_pilot(args: argparse.Namespace) -> int:
    from needlepoint.pilot.folder import run_pilot

    lengths = parse_ints("--lengths", args.lengths)
    result = run_pilot(args.protocol, args.out, lengths, args.cases, run_options(args))
    for line in result.lines():
        print(line)
    print(f"wrote {args.out.rstrip('/')}/run/results.csv; next: needlepoint calibrate {args.out}")
    return 0 if result.summary.stop_reason in ("complete", "allowance_spent") else 3


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from needlepoint.pilot.calibrate import CalibrationOptions, calibrate
    from needlepoint.pilot.files import check_new, write_protocol, write_report
    from needlepoint.pilot.report import calibration_lines

    low, high = parse_band(args.band)
    for out in (args.out, args.report):
        if out is not None:
            check_new(out)
    options = CalibrationOptions(
        band_low=low,
        band_high=high,
        effect=args.effect,
        max_cases=args.max_cases,
        max_requests=args.max_requests,
        simulations=args.simulations,
        seed=args.seed,
        version=args.version,
    )
    result = calibrate(args.pilot_dir, options)
    for line in calibration_lines(result.record):
        print(line)
    if args.report:
        write_report(result.record, args.report)
        print(f"wrote {args.report}")
    if args.figures:
        from needlepoint.pilot.steps import write_figures

        folder = args.figures.rstrip("/")
        names = write_figures(args.pilot_dir, result, folder)
        print("wrote " + ", ".join(f"{folder}/{n}" for n in names))
    if result.protocol is None:
        return 1
    write_protocol(result.protocol, args.out)
    print(f"wrote {args.out}; next: needlepoint prepare --protocol {args.out} --out DIR")
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError("must lie in (0, 1]")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    """Add the pilot and calibrate sub-commands."""
    p = sub.add_parser(
        "pilot",
        help="run a design on held-out materials (another seed, no shared names or codes)",
        description="Prepare pilot materials from a derived materials seed that shares no "
        "target name and no code with the design, then run them with every rule of `run`. "
        "Running again on the same --out resumes.",
    )
    p.add_argument("--protocol", help="the design's protocol file (default: the reference v1)")
    p.add_argument("--out", required=True, help="pilot folder: created, or resumed")
    p.add_argument("--lengths", required=True, help="background lengths to try, e.g. 12,24,48")
    p.add_argument("--cases", type=_positive_int, required=True, help="pilot cases")
    add_run_flags(p)
    p.set_defaults(func=_cmd_pilot)

    c = sub.add_parser(
        "calibrate",
        help="choose lengths and a case count from a pilot; write a new protocol version",
        description="Per length: end, middle and refusal accuracy and the failure rate with "
        "exact 95% intervals; keep the lengths inside the band, and recommend the smallest "
        "case count that reaches 80% power. Exit 1 when nothing qualifies (no file written).",
    )
    c.add_argument("pilot_dir", metavar="PILOTDIR", help="the pilot folder (`pilot --out`)")
    c.add_argument("--out", required=True, help="the new protocol file (never overwritten)")
    c.add_argument("--band", default="0.6,0.95", help="end-accuracy band (default %(default)s)")
    c.add_argument(
        "--effect",
        type=_fraction,
        default=0.2,
        help="added middle loss to detect with 80%% power; above the threshold (default 0.2)",
    )
    c.add_argument(
        "--max-cases", type=_positive_int, default=128, help="search bound (default 128)"
    )
    c.add_argument(
        "--max-requests",
        type=_positive_int,
        help="search bound in planned requests (cases x lengths x 8): the run budget",
    )
    c.add_argument("--simulations", type=_positive_int, default=1000, help="runs per count")
    c.add_argument("--seed", type=int, default=20260930, help="power simulation seed")
    c.add_argument("--version", type=_positive_int, help="new version (default: design's + 2)")
    c.add_argument("--report", help="also write the calibration record here (JSON)")
    c.add_argument("--figures", metavar="DIR", help="also draw the accuracy and power figures")
    c.set_defaults(func=_cmd_calibrate)
