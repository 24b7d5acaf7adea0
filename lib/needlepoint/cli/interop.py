"""`needlepoint export inspect` and `needlepoint import inspect`: a frozen design run by inspect_ai.

`export inspect PREPARED --out DIR` writes a self-contained inspect_ai task file; `import inspect
LOG --prepared PREPARED --out RUNDIR` reads inspect's log back, verifies it per sample and writes
a run folder labelled as executed elsewhere (docs/interop.md). What is printed depends only on
the inputs: no durations and no absolute paths.
"""

from __future__ import annotations

import argparse

from needlepoint.cli.run import command


def _cmd_export(args: argparse.Namespace) -> int:
    """an inspect_ai task file, one sample per request"""
    from needlepoint.interop.export import export_inspect

    path = export_inspect(args.prepared, args.out)
    print(f"wrote {path.name} to the --out folder: one sample per frozen request")
    print(
        "run it with: inspect eval needlepoint_task.py --model PROVIDER/MODEL "
        "-M max_retries=0 --max-samples 1 --max-connections 1 --no-fail-on-error"
    )
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    """an inspect_ai .eval or .json log"""
    from needlepoint.interop.inspect_import import import_inspect

    record = import_inspect(args.log, args.prepared, args.out)
    for line in record.lines():
        print(line)
    print("wrote run.json, journal.jsonl, results.csv, import.json and import.md to --out")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `export` and `import` with their `inspect` targets."""
    e = sub.add_parser(
        "export",
        help="a frozen design as a task of another harness (inspect_ai)",
        description="Write a prepared folder as a self-contained inspect_ai task file.",
    )
    targets = e.add_subparsers(dest="target", metavar="HARNESS")
    targets.required = True
    p = command(targets, "inspect", _cmd_export)
    p.add_argument("prepared", metavar="PREPARED", help="the prepared folder")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for needlepoint_task.py")

    i = sub.add_parser(
        "import",
        help="another harness's log of an exported task, verified, as a run folder",
        description="Read an inspect_ai log with inspect's own reader, verify every sample "
        "against the prepared folder and write a run folder that analyze, compare and "
        "registry read, labelled as executed by inspect_ai.",
    )
    targets = i.add_subparsers(dest="target", metavar="HARNESS")
    targets.required = True
    p = command(targets, "inspect", _cmd_import)
    p.add_argument("log", metavar="LOG", help="the inspect log (.eval or .json)")
    p.add_argument("--prepared", required=True, metavar="DIR", help="the prepared folder")
    p.add_argument("--out", required=True, metavar="RUNDIR", help="the run folder to write")
