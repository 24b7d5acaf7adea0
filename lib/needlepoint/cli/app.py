"""The `needlepoint` command line: a thin dispatcher over the library's command providers.

Each provider module, imported here by name so that a reader (or a tool) can follow it, exposes
``register(subparsers)``, which adds its sub-commands and sets ``func(args) -> int`` on them.
Providers keep heavy imports inside their functions so that `needlepoint verify` and
`needlepoint --help` start quickly.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any, NoReturn

import needlepoint
from needlepoint import __version__
from needlepoint.cli import (
    analysis,
    contamination,
    design,
    interop,
    local,
    pilot,
    run,
    selftest,
    study,
)
from needlepoint.errors import NeedlepointError, redact_secrets, shown
from needlepoint.safetext import terminal

# Order here is the order in `needlepoint --help`.
PROVIDERS = (
    design,
    selftest,
    run,
    analysis,
    pilot,
    study,
    contamination,
    interop,
    local,
)


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line and exit 2, like every other refusal.

    argparse prints the whole usage block before its message; a script reading stderr (and the
    house rule) wants one line that names the command and where the full usage is. Sub-parsers
    inherit the class, so every sub-command and action gets the same behaviour. The line names
    an unknown flag with the nearest known one, and never repeats a value that looks like a key.
    """

    _seen: Sequence[str] = ()

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # Kept so that a "required" error can name the flag the user mistyped instead.
        self._seen = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        if message.startswith("the following arguments are required"):
            unknown = self._unknown_flags(self._seen)
            if unknown:
                message = self.unknown_message(unknown)
        choice = _INVALID_CHOICE.fullmatch(" ".join(message.split()))
        if choice:
            arg, value, listed = choice.groups()
            options = re.findall(r"'([^']*)'", listed)
            near = difflib.get_close_matches(value, options, n=1, cutoff=0.6)
            # the nearest choice is more help than a list of twenty commands
            rest = f"did you mean {near[0]!r}?" if near else f"choose from {listed}"
            message = f"argument {arg}: invalid choice: {shown(value)} ({rest})"
        self._fail(message)

    def unknown(self, extra: Sequence[str]) -> NoReturn:
        """Arguments left over after parsing: each unknown flag with its nearest known one."""
        self._fail(self.unknown_message(extra))

    def unknown_message(self, extra: Sequence[str]) -> str:
        parts: list[str] = []
        after_flag = False
        for word in extra:
            name = word.split("=", 1)[0]
            if name.startswith("-") and len(name) > 1 and not _NUMBER.fullmatch(name):
                near = difflib.get_close_matches(name, self._known_flags(), n=1, cutoff=0.6)
                hint = f" (did you mean {near[0]}?)" if near else ""
                parts.append(f"unknown flag {name}{hint}")
                after_flag = "=" not in word
            elif after_flag:
                after_flag = False  # the unknown flag's value: not a second problem
            else:
                parts.append(f"unexpected argument {shown(word)}")
        return "; ".join(parts)

    def _known_flags(self) -> list[str]:
        return sorted(o for o in self._option_string_actions if o.startswith("--"))

    def _unknown_flags(self, args: Sequence[str]) -> list[str]:
        known = set(self._option_string_actions)
        out = []
        for word in args:
            name = word.split("=", 1)[0]
            if word == "--":
                break
            if not name.startswith("-") or name in known or _NUMBER.fullmatch(name):
                continue
            # argparse accepts an unambiguous prefix of a long flag (--al for --allow)
            if name.startswith("--") and sum(k.startswith(name) for k in known) == 1:
                continue
            out.append(name)
        return out

    def _fail(self, message: str) -> NoReturn:
        text = terminal(redact_secrets(" ".join(message.split())))
        # A value from argv that is not UTF-8 arrives as surrogate escapes: print them as escapes.
        line = f"{self.prog}: error: {text} (see {self.prog} --help)\n"
        line = line.encode("utf-8", "backslashreplace").decode("utf-8")
        self.exit(2, line)


_NUMBER = re.compile(r"-\d+(\.\d*)?([eE][-+]?\d+)?")
_INVALID_CHOICE = re.compile(r"argument (\S+): invalid choice: '(.*)' \(choose from (.*)\)")


def build_parser() -> argparse.ArgumentParser:
    """Build the full argument parser from every provider."""
    parser = OneLineParser(
        prog="needlepoint",
        description="Frozen, audited context-retrieval experiments on LLMs.",
    )
    parser.add_argument("--version", action="version", version=f"needlepoint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for provider in PROVIDERS:
        provider.register(sub)
    _mark_leaves(parser)
    _describe(parser)
    return parser


def _describe(parser: argparse.ArgumentParser) -> None:
    """Every `needlepoint COMMAND --help` opens with what the command does: a sub-command
    registered with only a one-line ``help`` gets it as its description too."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {c.dest: c.help for c in action._choices_actions}
        for name, child in action.choices.items():
            text = helps.get(name)
            if not child.description and text:
                child.description = text[:1].upper() + text[1:] + "."
            _describe(child)


# Commands that continue where they stopped when run again: Ctrl-C says so.
RESUMABLE = frozenset({"run", "pilot", "local-pilot", "local-run"})


def interrupted_line(command: str) -> str:
    """The one line Ctrl-C leaves: for a command that resumes, how to go on."""
    if command in RESUMABLE:
        return (
            f"needlepoint {command}: interrupted; the request in flight is journalled as "
            "indeterminate and never sent again; run the same command again to resume"
        )
    return f"needlepoint {command}: interrupted"


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


def _interrupt_again(previous: Any, pending: list[threading.Timer]) -> Any:
    """An unraisable hook under which a Ctrl-C that lands in a callback Python cannot raise
    from (a weakref or ``__del__`` run by the garbage collector) still interrupts the command.

    Python would print "Exception ignored in ..." with a traceback and carry on as if no Ctrl-C
    had come. Instead SIGINT is sent again, 10 ms later from a timer thread (sent at once, it
    would land inside this hook, where it cannot be raised either), and the command's own
    handler turns it into one line and exit 130. Anything else goes to the previous hook.
    """

    def hook(args: Any) -> None:
        if args.exc_type is KeyboardInterrupt:
            again = threading.Timer(0.01, os.kill, (os.getpid(), signal.SIGINT))
            again.daemon = True
            pending.append(again)
            again.start()
        else:
            previous(args)

    return hook


def main(argv: Sequence[str] | None = None) -> int:
    """Run one sub-command; user errors become one line on stderr and exit status 2."""
    previous, pending = sys.unraisablehook, []
    sys.unraisablehook = _interrupt_again(previous, pending)
    try:
        return _main(argv)
    finally:
        for again in pending:  # the command ended first: its work is whole, nothing to stop
            again.cancel()
        sys.unraisablehook = previous


def _main(argv: Sequence[str] | None) -> int:
    _usable_streams()
    try:
        parser = build_parser()
        # Loaded: Ctrl-C is a KeyboardInterrupt again, which every command handles (a run
        # journals the request in flight); see needlepoint/__init__.py.
        if signal.getsignal(signal.SIGINT) is needlepoint._quiet_interrupt:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        given = sys.argv[1:] if argv is None else list(argv)
        if not given:  # bare `needlepoint`: what it can do, not a usage error
            parser.print_help()
            return 0
        args, unknown = parser.parse_known_args(given)
    except KeyboardInterrupt:  # Ctrl-C before the command started: one line, not a traceback
        print("needlepoint: interrupted", file=sys.stderr)
        return 130
    if unknown:
        args.command_parser.unknown(unknown)
    for stream in (sys.stdout, sys.stderr):
        # A file name that is not UTF-8 must print as escapes, not end the command.
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        return int(args.func(args) or 0)
    except NeedlepointError as exc:
        # One line whatever the message quotes (a file name with a newline or an ESC in it).
        line = terminal(redact_secrets(str(exc)))
        print(f"needlepoint {args.command}: error: {line}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `needlepoint dry-run DIR --plan | head`: the reader has all it wanted; say nothing.
        with contextlib.suppress(AttributeError, OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:
        line = terminal(redact_secrets(os_error_line(exc)))
        print(f"needlepoint {args.command}: error: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(interrupted_line(args.command), file=sys.stderr)
        return 130
    except Exception as exc:
        # Last resort: one line instead of a traceback, with its own exit status.
        text = terminal(redact_secrets(str(exc).splitlines()[0][:200])) if str(exc) else ""
        print(
            f"needlepoint {args.command}: internal error: {type(exc).__name__}: {text} "
            "(a bug: please report it with the command that caused it)",
            file=sys.stderr,
        )
        return INTERNAL_ERROR
