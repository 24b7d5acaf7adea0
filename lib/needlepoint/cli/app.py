"""The `needlepoint` command line: a thin dispatcher over the library's command providers.

Each provider module exposes ``register(subparsers)``, which adds its sub-commands and sets
``func(args) -> int`` on them. Providers keep heavy imports inside their functions so that
`needlepoint verify` starts quickly.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from needlepoint import __version__
from needlepoint.errors import NeedlepointError

# Order here is the order in `needlepoint --help`.
PROVIDERS = (
    "needlepoint.cli.design",
    "needlepoint.cli.selftest",
    "needlepoint.cli.run",
    "needlepoint.cli.analysis",
    "needlepoint.cli.compare",
    "needlepoint.cli.contamination",
    "needlepoint.cli.pipeline",
    "needlepoint.cli.local",
)


def build_parser() -> argparse.ArgumentParser:
    """Build the full argument parser from every provider."""
    parser = argparse.ArgumentParser(
        prog="needlepoint",
        description="Frozen, audited context-retrieval experiments on LLMs.",
    )
    parser.add_argument("--version", action="version", version=f"needlepoint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in PROVIDERS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one sub-command; user errors become one line on stderr and exit status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except NeedlepointError as exc:
        print(f"needlepoint {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"needlepoint {args.command}: interrupted", file=sys.stderr)
        return 130
