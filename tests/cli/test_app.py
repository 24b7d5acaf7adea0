"""The dispatcher imports its command modules by name, in the order `--help` lists them."""

from __future__ import annotations

import ast
import subprocess
import sys
import time
import weakref
from pathlib import Path

import pytest

import needlepoint
from needlepoint.cli import app

APP = Path(needlepoint.__file__).parent / "cli" / "app.py"
# Each command module's sub-commands, in the order `needlepoint --help` shows them.
FIRST_COMMANDS = {
    "design": "prepare",
    "selftest": "self-test",
    "run": "run",
    "analysis": "analyze",
    "pilot": "pilot",
    "study": "declare",
    "contamination": "contamination",
    "interop": "export",
    "local": "pipeline",
}


def test_every_command_module_is_imported_by_name_not_by_a_string() -> None:
    tree = ast.parse(APP.read_text("utf-8"))
    imported = {
        a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "needlepoint.cli"
        for a in node.names
    }
    assert [p.__name__.rpartition(".")[2] for p in app.PROVIDERS] == list(FIRST_COMMANDS)
    assert set(FIRST_COMMANDS) <= imported
    assert "importlib" not in APP.read_text("utf-8")


def test_help_lists_each_modules_commands_in_the_providers_order() -> None:
    sub = next(a for a in app.build_parser()._actions if a.dest == "command")
    commands = list(sub.choices)
    at = [commands.index(first) for first in FIRST_COMMANDS.values()]
    assert at == sorted(at) and at[0] == 0


def test_help_imports_no_heavy_library() -> None:
    # `needlepoint --help` and every refusal before a command runs stay quick: the command
    # modules keep numpy, pandas, scipy and matplotlib inside their functions.
    code = (
        "import sys\nfrom needlepoint.cli.app import build_parser\nbuild_parser()\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'numpy', 'pandas', 'scipy', 'matplotlib', 'jsonschema', 'httpx'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


INTERRUPT_WHILE_LOADING = """
import runpy, sys

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "needlepoint.cli.local":  # one of the command modules app.py imports
            raise KeyboardInterrupt

sys.meta_path.insert(0, Interrupt())
sys.argv = ["needlepoint", "--help"]
runpy.run_module("needlepoint", run_name="__main__")
"""


def test_ctrl_c_while_the_command_modules_load_is_one_line_and_exit_130() -> None:
    # `python -m needlepoint` imports app.py, and with it every command module, inside the
    # guard of needlepoint.cli.main (test_readers interrupts a real analyze at fixed delays).
    out = subprocess.run(
        [sys.executable, "-c", INTERRUPT_WHILE_LOADING], capture_output=True, text=True
    )
    assert (out.returncode, out.stderr) == (130, "needlepoint: interrupted\n")


def _leaves(parser, path=()):
    import argparse

    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, child in action.choices.items():
            yield from _leaves(child, (*path, name))


def test_every_command_s_help_opens_with_a_description() -> None:
    leaves = list(_leaves(app.build_parser()))
    assert len(leaves) > 30
    for path, parser in leaves:
        assert parser.description and len(parser.description) > 15, " ".join(path)
        assert parser.format_help().count(parser.description.split()[0]) >= 1


def test_bare_needlepoint_prints_the_help(capsys) -> None:
    assert app.main([]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: needlepoint") and "COMMAND" in out and err == ""


def test_ctrl_c_says_how_to_resume_where_the_command_resumes(monkeypatch, capsys) -> None:
    def stop(args):
        raise KeyboardInterrupt

    # the functions are bound when the parser is built, inside main
    monkeypatch.setattr("needlepoint.cli.run._cmd_run", stop)
    monkeypatch.setattr("needlepoint.cli.design._cmd_prepare", stop)
    assert app.main(["run", "DIR", "--run-dir", "r", "--allow", "1"]) == 130
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("needlepoint run: interrupted; ")
    assert line.endswith("run the same command again to resume")
    assert app.main(["prepare", "--out", "x"]) == 130
    assert capsys.readouterr().err == "needlepoint prepare: interrupted\n"


@pytest.mark.usefixtures("hears_sigint")
def test_ctrl_c_inside_a_garbage_collector_callback_still_interrupts(monkeypatch, capsys) -> None:
    # Python cannot raise from a weakref callback: it printed "Exception ignored in ..." with a
    # traceback and carried on (seen once as a Ctrl-C during `analyze` in the readers test).
    def collected(args):
        class Thing:
            pass

        def callback(_: object) -> None:
            raise KeyboardInterrupt

        thing = Thing()
        ref = weakref.ref(thing, callback)
        del thing  # the callback runs here, and its KeyboardInterrupt is "unraisable"
        assert ref() is None
        for _ in range(200):  # the interrupt is sent again and arrives in this loop
            time.sleep(0.005)
        return 0

    monkeypatch.setattr("needlepoint.cli.design._cmd_prepare", collected)
    before = sys.unraisablehook
    assert app.main(["prepare", "--out", "x"]) == 130
    assert capsys.readouterr().err == "needlepoint prepare: interrupted\n"
    assert sys.unraisablehook is before  # put back when the command ends
