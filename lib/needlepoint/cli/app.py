"""The `needlepoint` command line: a thin dispatcher over the library's command providers.

Each provider module exposes ``register(subparsers)``, which adds its sub-commands and sets
``func(args) -> int`` on them. Providers keep heavy imports inside their functions so that
`needlepoint verify` starts quickly.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

import needlepoint
from needlepoint import __version__
from needlepoint.errors import NeedlepointError

# Order here is the order in `needlepoint --help`.
PROVIDERS = (
    "needlepoint.cli.design",
    "needlepoint.cli.selftest",
    "needlepoint.cli.run",
    "needlepoint.cli.analysis",
    "needlepoint.cli.compare",
    "needlepoint.cli.pilot",
    "needlepoint.cli.study",
    "needlepoint.cli.contamination",
    "needlepoint.cli.pipeline",
    "needlepoint.cli.local",
)


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line and exit 2, like every other refusal.

    argparse prints the whole usage block before its message; a script reading stderr (and the
    house rule) wants one line that names the command and where the full usage is. Sub-parsers
    inherit the class, so every sub-command and action gets the same behaviour.
    """

    def error(self, message: str) -> NoReturn:
        text = " ".join(message.split())
        # A value from argv that is not UTF-8 arrives as surrogate escapes: print them as escapes.
        line = f"{self.prog}: error: {text} (see {self.prog} --help)\n"
        line = line.encode("utf-8", "backslashreplace").decode("utf-8")
        self.exit(2, line)


def build_parser() -> argparse.ArgumentParser:
    """Build the full argument parser from every provider."""
    parser = OneLineParser(
        prog="needlepoint",
        description="Frozen, audited context-retrieval experiments on LLMs.",
    )
    parser.add_argument("--version", action="version", version=f"needlepoint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in PROVIDERS:
        importlib.import_module(name).register(sub)
    _mark_leaves(parser)
    return parser


def _mark_leaves(parser: argparse.ArgumentParser) -> None:
    """Give every runnable sub-command's namespace its own parser, so that an unknown argument
    (found only after the sub-command has parsed) is reported by that sub-command."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        parser.set_defaults(command_parser=parser)
    for action in subs:
        for child in action.choices.values():
            _mark_leaves(child)


# Exit status of the last-resort guard: an error no check foresaw (BSD's EX_SOFTWARE). Tests
# assert that no input reaches it; every known bad input is a NeedlepointError (exit 2).
INTERNAL_ERROR = 70


def os_error_line(exc: OSError) -> str:
    """An operating-system error as ``PATH: reason`` (no permission, missing parent, ...)."""
    where = exc.filename if exc.filename is not None else "operating system"
    other = f" -> {exc.filename2}" if exc.filename2 is not None else ""
    return f"{where}{other}: {exc.strerror or type(exc).__name__}"


def _usable_streams() -> None:
    """Replace a closed or missing stdout/stderr (``2>&-``) by the null device, so that a
    progress bar or an error line cannot end the command with an exception."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or getattr(stream, "closed", False):
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115


def main(argv: Sequence[str] | None = None) -> int:
    """Run one sub-command; user errors become one line on stderr and exit status 2."""
    _usable_streams()
    try:
        parser = build_parser()
        # Loaded: Ctrl-C is a KeyboardInterrupt again, which every command handles (a run
        # journals the request in flight); see needlepoint/__init__.py.
        if signal.getsignal(signal.SIGINT) is needlepoint._quiet_interrupt:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        args, unknown = parser.parse_known_args(argv)
    except KeyboardInterrupt:  # Ctrl-C before the command started: one line, not a traceback
        print("needlepoint: interrupted", file=sys.stderr)
        return 130
    if unknown:
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    for stream in (sys.stdout, sys.stderr):
        # A file name that is not UTF-8 must print as escapes, not end the command.
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        return int(args.func(args) or 0)
    except NeedlepointError as exc:
        print(f"needlepoint {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"needlepoint {args.command}: error: {os_error_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"needlepoint {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        # Last resort: one line instead of a traceback, with its own exit status.
        text = str(exc).splitlines()[0][:200] if str(exc) else ""
        print(
            f"needlepoint {args.command}: internal error: {type(exc).__name__}: {text} "
            "(a bug: please report it with the command that caused it)",
            file=sys.stderr,
        )
        return INTERNAL_ERROR
