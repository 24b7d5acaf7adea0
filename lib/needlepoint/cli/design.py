"""`needlepoint prepare`, `verify`, `dry-run` and `audit`: the design stage's commands.

Heavy imports stay inside the command functions so that `needlepoint --help` stays fast.
"""

from __future__ import annotations

import argparse

from needlepoint.cli.run import command


def _cmd_prepare(args: argparse.Namespace) -> int:
    """write a prepared folder of frozen requests"""
    from pathlib import Path

    from needlepoint.design.prepared import load_protocol, prepare_protocol
    from needlepoint.design.protocol import design_fingerprint
    from needlepoint.design.verify import prepared_lines
    from needlepoint.study.declare import evidence_root
    from needlepoint.study.scan import check_fresh, check_version

    protocol = load_protocol(args.protocol, model=args.model, body_profile=args.body_profile)
    # The study record: a version number and materials that no other design under the root has.
    root = evidence_root(args.evidence_root, Path(args.out).parent)
    fingerprint = design_fingerprint(protocol)
    check_version(root, protocol["protocol_id"], protocol["version"], fingerprint, Path(args.out))
    protocol, notes = check_fresh(protocol, root, args.reuse_materials)
    out = prepare_protocol(args.out, protocol)
    print("\n".join(prepared_lines(out, str(args.out).rstrip("/") or str(out))))
    for note in notes:
        print(note)
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    """regenerate a prepared folder and compare every byte"""
    from needlepoint.design.verify import verify_prepared

    report = verify_prepared(args.dir)
    for warning in report.warnings:
        print(f"warning: {warning}")
    for problem in report.problems:
        print(f"MISMATCH {problem}")
    status = "OK" if report.ok else "FAILED"
    print(
        f"verify {status}: {report.files_compared} files, {report.bytes_compared} bytes "
        f"regenerated and compared; {len(report.problems)} problems, "
        f"{len(report.warnings)} warnings"
    )
    return 0 if report.ok else 1


def _cmd_dry_run(args: argparse.Namespace) -> int:
    """print the budget (and the plan); no network"""
    from needlepoint.design.verify import dry_run

    ok, lines = dry_run(args.dir, plan=args.plan)
    print("\n".join(lines))
    return 0 if ok else 1


def _cmd_audit(args: argparse.Namespace) -> int:
    """independently audit a prepared folder from its files"""
    from needlepoint.design.audit import audit_prepared

    report = audit_prepared(args.dir)
    print("\n".join(report.lines()))
    return 0 if report.ok else 1


def register(sub: argparse._SubParsersAction) -> None:
    """Add prepare, verify, dry-run and audit."""
    p = command(sub, "prepare", _cmd_prepare)
    p.add_argument("--out", required=True, help="a new or empty folder")
    p.add_argument("--protocol", help="JSON file overriding protocol parameters")
    p.add_argument("--model", help="make a model variant: the same design, for this model name")
    p.add_argument(
        "--body-profile",
        metavar="PROFILE",
        help="make a model variant with this body profile: chat, reasoning or completion",
    )
    p.add_argument(
        "--evidence-root",
        metavar="ROOT",
        help="the runs on record (default: the folder named evidence holding --out): a new "
        "version must not reuse their version number or materials",
    )
    p.add_argument(
        "--reuse-materials",
        metavar="REASON",
        help="allow a new version to reuse target names, codes or requests of a design already "
        "run under the root; the reason is recorded in protocol.json (materials_reuse)",
    )
    p = command(sub, "verify", _cmd_verify)
    p.add_argument("dir", metavar="DIR", help="the prepared folder")
    p = command(sub, "dry-run", _cmd_dry_run)
    p.add_argument("dir", metavar="DIR", help="the prepared folder")
    p.add_argument("--plan", action="store_true", help="also list every planned request")
    p = command(sub, "audit", _cmd_audit)
    p.add_argument("dir", metavar="DIR", help="the prepared folder")
