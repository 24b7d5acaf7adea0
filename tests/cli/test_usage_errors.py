"""Usage errors of every sub-command are one line on stderr with exit 2, like any refusal.

The parser is walked, so a sub-command added later (pilot, calibrate, local-compare, ...) is
covered without listing it here: each of its typed options gets a value of the wrong type, each
option with choices a value outside them, and a call without its required arguments.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
from support.ids import plain_id

from needlepoint.cli.app import OneLineParser, build_parser, main

BAD_VALUE = "abc\udcff"  # not a number, not a choice, and not UTF-8 (a surrogate escape)


def leaf_parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every sub-command that runs something, with the words that name it."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [(path, parser)]
    out = []
    for name, child in subs[0].choices.items():
        out += leaf_parsers(child, (*path, name))
    return out


def usage_cases() -> list[tuple[str, list[str]]]:
    """For each sub-command: every typed option given a bad value, every option with choices
    given one outside them, the command without its required arguments, and an unknown flag."""
    cases = []
    for path, parser in leaf_parsers(build_parser()):
        name = " ".join(path)
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0:
                continue
            flag = action.option_strings[-1]
            typed = action.type is not None and action.type not in (str, Path)
            if typed or action.choices is not None:
                cases.append((name, [*path, flag, BAD_VALUE]))
        # (argparse marks a "*" positional required, yet accepts it empty.)
        if any(a.required and a.nargs != "*" for a in parser._actions):
            cases.append((name, list(path)))
        cases.append((name, [*path, "--no-such-flag"]))
    return cases


CASES = usage_cases()


def test_every_sub_command_is_walked() -> None:
    names = {name for name, _ in CASES}
    for expected in ("power", "run", "contamination overlap", "local-model serve", "self-test"):
        assert expected in names
    # Every sub-command gets at least one case besides the unknown flag where it has arguments.
    assert len(CASES) > 2 * len(names)


@pytest.mark.parametrize(("name", "argv"), CASES, ids=[plain_id(" ".join(a)) for _, a in CASES])
def test_a_usage_error_is_one_line_and_exit_2(
    name: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    assert info.value.code == 2 and out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "usage:" not in err and "Traceback" not in err
    prog = f"needlepoint {name}"
    assert err.startswith(f"{prog}: error: ") and err.endswith(f" (see {prog} --help)\n"), err


def test_the_console_script_prints_the_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "needlepoint", "power", "--seed", "abc"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "needlepoint power: error: argument --seed: invalid int value: 'abc' "
        "(see needlepoint power --help)\n"
    )


def test_help_still_prints_the_full_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["power", "--help"])
    assert info.value.code == 0 and capsys.readouterr().out.startswith("usage: needlepoint power")


def test_sub_parsers_inherit_the_one_line_error() -> None:
    assert all(isinstance(p, OneLineParser) for _, p in leaf_parsers(build_parser()))


def test_every_argument_has_help_text() -> None:
    """`--evidence-root`, `--notebooks`, a bare `DIR`: each says what it is in --help."""
    missing = [
        f"{' '.join(path)} {a.option_strings[0] if a.option_strings else a.dest}"
        for path, parser in leaf_parsers(build_parser())
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction) and not a.help
    ]
    assert missing == []
