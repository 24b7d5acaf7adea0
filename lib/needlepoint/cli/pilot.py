"""`needlepoint pilot` and `needlepoint calibrate`: held-out materials choose lengths and a count.

Heavy imports stay inside the command functions so that `needlepoint --help` stays fast. Bad
input is one line and exit 2; a calibration that recommends nothing exits 1.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from needlepoint.cli.run import add_run_flags, command, run_options
from needlepoint.errors import NeedlepointError
from needlepoint.pilot.folder import OnRecord, PilotRun

How = TypeVar("How", contravariant=True)


class PilotRunner(Protocol[How]):
    """What ``pilot_command`` runs: ``run_pilot`` (``how``: the run options) or
    ``run_local_pilot`` (``how``: the packaged model served)."""

    def __call__(
        self,
        protocol: str | None,
        out: str,
        lengths: tuple[int, ...],
        cases: int,
        how: How,
        /,
        *,
        version: int | None,
        records: tuple[OnRecord, ...],
        check: Callable[[dict[str, Any]], None] | None,
    ) -> PilotRun: ...


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


def pilot_record(
    args: argparse.Namespace,
) -> tuple[tuple[OnRecord, ...], Callable[[dict[str, Any]], None] | None]:
    """What a new pilot must avoid under the evidence root: the designs run there (for its
    materials), and a version number another design uses (checked on the pilot protocol its
    seed gives, so that a model variant's pilot of the same design may share its version).

    The check runs twice: here on the first candidate seed's protocol, before anything starts
    (a local server included), and again on the chosen seed's, before anything is written.
    """
    from needlepoint.design.protocol import design_fingerprint
    from needlepoint.pilot.folder import PILOT_PURPOSE, derived_seed, load_design, pilot_protocol
    from needlepoint.pilot.record import PILOT_NAME
    from needlepoint.study.declare import evidence_root
    from needlepoint.study.scan import check_version, records_for

    out = Path(args.out)
    if (out / PILOT_NAME).exists():
        return (), None  # a resume: the version and materials were chosen when it was made
    found = evidence_root(args.evidence_root, out.parent)

    def check(protocol: dict[str, Any]) -> None:
        fingerprint = design_fingerprint(protocol)
        pid, version = protocol["protocol_id"], protocol["version"]
        check_version(found, pid, version, fingerprint, exclude=out)

    design = load_design(args.protocol)
    first = derived_seed(design["seeds"]["materials"], PILOT_PURPOSE, 0)
    lengths = parse_ints("--lengths", args.lengths)
    check(pilot_protocol(design, lengths, args.cases, first, None, args.version))
    return records_for(found), check


def _cmd_pilot(args: argparse.Namespace) -> int:
    """run a design on held-out materials (another seed, no shared names or codes)

    Prepare pilot materials from a derived materials seed that shares no target name and no code
    with the design, then run them with every rule of `run`. Running again on the same --out
    resumes.
    """
    from needlepoint.pilot.folder import run_pilot

    return pilot_command(args, run_pilot, lambda: run_options(args))


def pilot_command(args: argparse.Namespace, run: PilotRunner[How], how: Callable[[], How]) -> int:
    """The one body of ``pilot`` and ``local-pilot``: what is on record, then ``run`` (the pilot,
    or the pilot against a packaged model) with what ``how`` builds from the flags, then the
    report."""
    lengths = parse_ints("--lengths", args.lengths)
    records, check = pilot_record(args)
    result = run(
        args.protocol,
        args.out,
        lengths,
        args.cases,
        how(),
        version=args.version,
        records=records,
        check=check,
    )
    return report_pilot(args.out, result)


def report_pilot(out: str, result: PilotRun) -> int:
    """Print a pilot's lines and the next step; 3 when the run stopped before its end."""
    for line in result.lines():
        print(line)
    print(f"wrote {out.rstrip('/')}/run/results.csv; next: needlepoint calibrate {out}")
    return 0 if result.summary.stop_reason in ("complete", "allowance_spent") else 3


def _cmd_calibrate(args: argparse.Namespace) -> int:
    """choose lengths and a case count from a pilot; write a new protocol version

    Per length: end, middle and refusal accuracy and the failure rate with exact 95% intervals; keep
    the lengths inside the band, and recommend the smallest case count that reaches 80% power. Exit
    1 when nothing qualifies (no file written).
    """
    from needlepoint.pilot.calibrate import CalibrationOptions, calibrate
    from needlepoint.pilot.record import read_pilot_record
    from needlepoint.pilot.report import calibration_lines, check_new, write_protocol, write_report
    from needlepoint.study.declare import chain_record, evidence_root
    from needlepoint.study.scan import check_version, records_for

    low, high = parse_band(args.band)
    if args.report is not None and Path(args.report).resolve() == Path(args.out).resolve():
        raise NeedlepointError(
            f"--report {args.report} and --out {args.out} name the same file; give two files"
        )
    for out in (args.out, args.report):
        if out is not None:
            check_new(out)
    # The study record: the pilot's declaration chain; a version and materials seed that no
    # design on record has.
    root = evidence_root(args.evidence_root, args.pilot_dir)
    design = read_pilot_record(args.pilot_dir).design
    version = design.version + 2 if args.version is None else args.version
    check_version(root, design.protocol_id, version)
    run_dir = Path(args.pilot_dir) / "run"
    for line in chain_record([run_dir], root, Path.cwd()):
        print(line)
    options = CalibrationOptions(
        band_low=low,
        band_high=high,
        effect=args.effect,
        max_cases=args.max_cases,
        max_requests=args.max_requests,
        simulations=args.simulations,
        seed=args.seed,
        version=args.version,
        band_per_similarity=not args.pooled_band,
        descriptive_cases=args.descriptive_cases,
    )
    records = records_for(root)
    where = "nothing on record searched" if root is None else f"{len(records)} on record"
    print(f"designs the new version's materials avoid: the pilot, {where}")
    result = calibrate(args.pilot_dir, options, records)
    for line in calibration_lines(result.record):
        print(line)
    if args.report:
        write_report(result.record, args.report)
        print(f"wrote {args.report}")
    if args.figures:
        from needlepoint.notebook.steps import write_figures

        folder = args.figures.rstrip("/")
        names = write_figures(args.pilot_dir, result, folder)
        print("wrote " + ", ".join(f"{folder}/{n}" for n in names))
    if result.protocol is None:
        return 1
    write_protocol(result.protocol, args.out)
    print(f"wrote {args.out}; next: needlepoint prepare --protocol {args.out} --out DIR")
    return 0


def add_pilot_flags(p: argparse.ArgumentParser) -> None:
    """The flags `pilot` and `local-pilot` share: the folder, the pilot's shape and version,
    and the evidence root its materials and version must be fresh against."""
    from needlepoint.cli.run import whole
    from needlepoint.design.schema import MAX_CASES

    p.add_argument("--out", required=True, help="pilot folder: created, or resumed")
    p.add_argument("--lengths", required=True, help="background lengths to try, e.g. 12,24,48")
    p.add_argument("--cases", type=whole(1, MAX_CASES), required=True, help="pilot cases")
    p.add_argument(
        "--version",
        type=whole(1, 2**31 - 1),
        help="the pilot protocol's version (default: design's + 1)",
    )
    add_evidence_root(p)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the pilot and calibrate sub-commands."""
    from needlepoint.cli.run import number, seed, whole
    from needlepoint.design.schema import MAX_REQUESTS
    from needlepoint.pilot.record import MAX_SEARCH_CASES, MAX_SIMULATIONS

    p = command(sub, "pilot", _cmd_pilot)
    p.add_argument("--protocol", help="the design's protocol file (default: the reference v1)")
    add_pilot_flags(p)
    add_run_flags(p)

    c = command(sub, "calibrate", _cmd_calibrate)
    c.add_argument("pilot_dir", metavar="PILOTDIR", help="the pilot folder (`pilot --out`)")
    c.add_argument("--out", required=True, help="the new protocol file (never overwritten)")
    c.add_argument(
        "--band",
        default="0.6,0.95",
        help="end-accuracy band each similarity arm must lie in (default %(default)s)",
    )
    c.add_argument(
        "--pooled-band",
        action="store_true",
        help="read the band on both similarity arms pooled, as calibrations before issue 34 "
        "did: only to re-derive such a calibration",
    )
    c.add_argument(
        "--effect",
        type=number(0, 1, open_low=True),
        default=0.2,
        help="added middle loss to detect with 80%% power; above the threshold (default 0.2)",
    )
    c.add_argument(
        "--max-cases",
        type=whole(1, MAX_SEARCH_CASES),
        default=128,
        help=f"search bound (default %(default)s, at most {MAX_SEARCH_CASES})",
    )
    c.add_argument(
        "--max-requests",
        type=whole(1, MAX_REQUESTS),
        help="search bound in planned requests (cases x lengths x 8): the run budget",
    )
    c.add_argument(
        "--simulations", type=whole(1, MAX_SIMULATIONS), default=1000, help="runs per count"
    )
    c.add_argument("--seed", type=seed, default=20260930, help="power simulation seed")
    c.add_argument(
        "--descriptive-cases",
        type=whole(1, MAX_SEARCH_CASES),
        metavar="N",
        help="when no count reaches the power, still write the version at N cases, labelled "
        "descriptive (declare it before the pilot)",
    )
    c.add_argument(
        "--version", type=whole(1, 2**31 - 1), help="new version (default: design's + 2)"
    )
    c.add_argument("--report", help="also write the calibration record here (JSON)")
    c.add_argument("--figures", metavar="DIR", help="also draw the accuracy and power figures")
    add_evidence_root(c)


def add_evidence_root(p: argparse.ArgumentParser) -> None:
    """``--evidence-root ROOT``: the runs on record (default: the folder named evidence above)."""
    p.add_argument(
        "--evidence-root",
        metavar="ROOT",
        help="the runs on record (default: the nearest folder named evidence holding the "
        "input); versions and materials on record are not reused",
    )
