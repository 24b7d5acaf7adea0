"""The fuzz fixture and, in one place, every sub-command that reads a fuzzed input file.

A *fixture* is one folder holding a small prepared folder, a faulty simulated run of it (with
``results.csv``), a second run of the same design (for ``compare``), a two-run sweep file, the
contamination inputs with a frozen context manifest, and a simulated pilot (for ``calibrate``).
Each example copies it, damages one file (``support.mutations``), and runs in-process every
command in ``COMMANDS`` that reads that file's group, capturing what a terminal would see.

A new sub-command is added to ``COMMANDS`` with the groups it reads (or to ``NO_INPUT``); a test
fails until it is in one. Commands that would serve a packaged model meet ``no_servers()``.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from needlepoint.cli.app import INTERNAL_ERROR, main

# A small v2 design, so that verify, audit and a whole run take a fraction of a second.
SMALL = {"version": 2, "cases": 4, "lengths": [12]}
PREPARED_FILES = ("protocol.json", "requests.jsonl", "plan.csv", "answer_key.jsonl")
PREPARED_FILES += ("manifest.json",)
RUN_FILES = ("run.json", "journal.jsonl", "journal.head.json", "context_manifest.json")
RUN_FILES += ("results.csv",)
CONTAMINATION_FILES = ("reference.csv", "discards.csv", "runs.csv", "results.jsonl", "context.json")
# The fixture's run was started under this declaration (`declare`), made from this plan.
DECLARATION_FILES = ("declaration.json", "plan.md")
PILOT_FILES = ("pilot.json", "design.json", "prepared/protocol.json", "prepared/requests.jsonl")
PILOT_FILES += ("run/run.json", "run/journal.jsonl", "run/journal.head.json", "run/results.csv")
GROUPS = {
    "prepared": PREPARED_FILES,
    "run": RUN_FILES,
    "contamination": CONTAMINATION_FILES,
    "sweep": ("SWEEP.json",),
    "declaration": DECLARATION_FILES,
    "pilot": PILOT_FILES,
    # A real inspect_ai log of the fixture's design, exported and run by `inspect eval`
    # (tests/data/inspect/README.md): what `import inspect` reads.
    "inspect": ("inspect.json",),
    # Agent transcripts the canary counts tool calls from (support.transcripts), and their results.
    "transcripts": (
        "transcripts/results.jsonl",
        "transcripts/t/claude/inside/in-session-a.jsonl",
        "transcripts/t/claude/inside/in-session-b/subagents/agent-a1b2c3.jsonl",
        "transcripts/t/codex/sessions/2025/03/14/rollout-2025-03-14T11-00-00-0199.jsonl",
    ),
}
INSPECT_LOG = Path(__file__).resolve().parents[1] / "data" / "inspect" / "small-design.eval"
# What a command that would serve a packaged model meets in the fuzz instead of a server: no
# test ever starts one (the llama.cpp extra may be installed where the tests run).
NO_SERVER = "fuzz: the input was accepted; no server is started in tests"


@dataclass(frozen=True)
class Paths:
    """Where a fixture's inputs are; ``pristine`` is the undamaged original of a copy."""

    root: Path
    pristine: Path | None = None

    @property
    def prepared(self) -> Path:
        return self.root / "prepared"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def inputs(self) -> Path:
        return self.root / "contamination" / "inputs"

    @property
    def workspace(self) -> Path:
        return self.root / "contamination" / "workspace"

    @property
    def pilot(self) -> Path:
        return self.root / "pilot"

    def file(self, group: str, name: str) -> Path:
        folder = {"prepared": self.prepared, "run": self.run, "contamination": self.inputs}
        folder["pilot"] = self.pilot
        return folder.get(group, self.root) / name


@dataclass(frozen=True)
class Command:
    """One sub-command as the fuzz runs it: its name, the groups it reads, its arguments."""

    name: str
    reads: tuple[str, ...]
    argv: Callable[[Paths, Path], list[str]]  # (paths, scratch folder) -> argv


def _resume(s: Paths, _: Path) -> list[str]:
    # Resuming: refused (allowance spent, or a damaged folder) or it sends the rest.
    return [
        *["run", str(s.prepared), "--allow", "64", "--run-dir", str(s.run)],
        *["--simulate", "faulty", "--input-rate", "1", "--output-rate", "2", "--no-progress"],
        *["--declaration", str(s.root / "declaration.json")],
    ]


def _ctx(s: Paths) -> str:
    return str(s.inputs / "context.json")


def _transcript_flags(s: Paths) -> list[str]:
    t = s.root / "transcripts" / "t"
    return [
        f"--transcripts=cr-1=claude-code:{t}/claude/clean-room/cr-session.jsonl",
        f"--transcripts=in-1=claude-code:{t}/claude/inside",
        f"--transcripts=in-2=codex:{t}/codex/sessions",
    ]


def _protocol(s: Paths) -> str:
    return f"{s.prepared}/protocol.json"


P, R, C, S = ("prepared",), ("prepared", "run"), ("contamination",), ("sweep",)
D = ("declaration",)
PI = ("pilot",)
ALL = ("prepared", "run", "contamination", "sweep", "declaration", "pilot", "inspect")
ALL += ("transcripts",)
T = ("transcripts",)
IN = ("prepared", "inspect")
PILOT_SHAPE = ["--lengths", "12", "--cases", "4"]
# In the order they run on one damaged copy: readers first, then what writes into the copy
# (results, a resumed run), so every reader meets the damage as it was made.
COMMANDS: tuple[Command, ...] = (
    Command("evidence-diff", ALL, lambda s, _: ["evidence-diff", str(s.pristine), str(s.root)]),
    Command("verify", P, lambda s, _: ["verify", str(s.prepared)]),
    Command("audit", P, lambda s, _: ["audit", str(s.prepared)]),
    Command("dry-run", P, lambda s, _: ["dry-run", str(s.prepared)]),
    Command(
        "check-endpoint",
        P,
        # reads the prepared folder's frozen model, then finds no key: it never connects
        lambda s, _: [
            *["check-endpoint", str(s.prepared), "--base-url", "http://127.0.0.1:9/v1"],
            *["--api-key-env", "NEEDLEPOINT_FUZZ_UNSET_KEY"],
        ],
    ),
    Command(
        "prepare",
        P,
        lambda s, w: [
            *["prepare", "--out", str(w / "p2")],
            *["--protocol", f"{s.prepared}/protocol.json"],
        ],
    ),
    Command(
        "power",
        P,
        lambda s, _: [
            *["power", "--prepared", str(s.prepared), "--cases", "4", "--simulations", "10"],
            *["--effects", "0,0.2"],
        ],
    ),
    Command(
        "run",
        P,
        lambda s, w: [
            *["run", str(s.prepared), "--allow", "3", "--run-dir", str(w / "fresh")],
            *["--simulate", "perfect", "--no-progress"],
        ],
    ),
    Command("audit-run", (*R, *D), lambda s, _: ["audit-run", str(s.run)]),
    Command(
        "analyze",
        (*R, *D),
        lambda s, w: [
            *["analyze", str(s.run), "--no-figures", "--out", str(w / "a1")],
            *["--evidence-root", str(s.root)],
        ],
    ),
    Command("registry", (*R, *D), lambda s, _: ["registry", str(s.root)]),
    Command("registry", R, lambda s, w: ["registry", str(s.root), "--grid", str(w / "grid")]),
    Command(
        "declare",
        ("run", *D),
        lambda s, w: [
            *["declare", str(s.root / "plan.md"), "--out", str(w / "amendment.json")],
            *["--amends", str(s.root / "declaration.json"), "--evidence-root", str(s.root)],
        ],
    ),
    Command(
        "analyze",
        R,
        lambda s, w: [
            *["analyze", "--results", f"{s.run}/results.csv", "--prepared", str(s.prepared)],
            *["--no-figures", "--out", str(w / "a2")],
        ],
    ),
    Command(
        "compare",
        R,
        lambda s, w: [
            *["compare", str(s.run), str(s.root / "run2"), "--no-figures"],
            *["--out", str(w / "cmp")],
        ],
    ),
    Command(
        "calibrate",
        PI,
        lambda s, w: [
            *["calibrate", str(s.pilot), "--out", str(w / "v.json"), "--report", str(w / "r.json")],
            *["--simulations", "20", "--max-cases", "8", "--figures", str(w / "fig")],
        ],
    ),
    Command(
        "pilot",
        P,
        lambda s, w: [
            *["pilot", "--protocol", _protocol(s), "--out", str(w / "pilot"), *PILOT_SHAPE],
            *["--allow", "8", "--simulate", "perfect", "--no-progress"],
        ],
    ),
    # Every command that would serve a packaged model refuses bad input before it serves one.
    Command(
        "local-run",
        P,
        lambda s, w: ["local-run", str(s.prepared), "--run-dir", str(w / "lr"), "--allow", "4"],
    ),
    Command(
        "local-pilot",
        P,
        lambda s, w: [
            *["local-pilot", "--protocol", _protocol(s), "--out", str(w / "lp"), *PILOT_SHAPE],
            *["--allow", "8", "--no-progress"],
        ],
    ),
    Command(
        "local-compare",
        P,
        lambda s, w: [
            *["local-compare", "--label", "fuzz", "--protocol", _protocol(s)],
            *["--evidence-root", str(w / "lc"), "--no-notebooks", "--no-progress"],
        ],
    ),
    Command(
        "local-pipeline",
        P,
        lambda s, w: [
            *["local-pipeline", "--label", "fuzz", "--protocol", _protocol(s)],
            *["--evidence-root", str(w / "lpe"), "--date", "20261201"],
        ],
    ),
    Command(
        "local-model tokenize-check",
        P,
        lambda s, _: ["local-model", "tokenize-check", str(s.prepared)],
    ),
    Command(
        "export inspect",
        P,
        lambda s, w: ["export", "inspect", str(s.prepared), "--out", str(w / "t")],
    ),
    Command(
        "import inspect",
        IN,
        lambda s, w: [
            *["import", "inspect", str(s.root / "inspect.json"), "--prepared", str(s.prepared)],
            *["--out", str(w / "imported")],
        ],
    ),
    Command("results", R, lambda s, _: ["results", str(s.run)]),
    Command("run", (*R, *D), _resume),
    Command(
        "pilot",
        PI,
        lambda s, _: [
            *["pilot", "--protocol", f"{s.pilot}/design.json", "--out", str(s.pilot)],
            *[*PILOT_SHAPE, "--allow", "32", "--simulate", "position", "--no-progress"],
        ],
    ),
    Command("sweep", S, lambda s, _: ["sweep", str(s.root / "SWEEP.json"), "--no-progress"]),
    Command(
        "contamination overlap",
        C,
        lambda s, _: [
            *["contamination", "overlap", "--reference", str(s.inputs / "reference.csv")],
            *["--context", _ctx(s), "--discard", str(s.inputs / "discards.csv")],
        ],
    ),
    Command(
        "contamination timeline",
        C,
        lambda s, _: [
            *["contamination", "timeline", "--runs", str(s.inputs / "runs.csv")],
            *["--context", _ctx(s)],
        ],
    ),
    Command(
        "contamination canary",
        C,
        lambda s, _: ["contamination", "canary", "--results", str(s.inputs / "results.jsonl")],
    ),
    Command(
        "contamination report",
        C,
        lambda s, w: [
            *["contamination", "report", "--reference", str(s.inputs / "reference.csv")],
            *["--runs", str(s.inputs / "runs.csv"), "--results", str(s.inputs / "results.jsonl")],
            *["--context", _ctx(s), "--discard", str(s.inputs / "discards.csv")],
            *["--out", str(w / "c")],
        ],
    ),
    Command(
        "contamination canary",
        T,
        lambda s, _: [
            *["contamination", "canary", "--results", str(s.root / "transcripts/results.jsonl")],
            *_transcript_flags(s),
        ],
    ),
    Command(
        "contamination report",
        (*C, *T),
        lambda s, w: [
            *["contamination", "report", "--reference", str(s.inputs / "reference.csv")],
            *["--runs", str(s.inputs / "runs.csv")],
            *["--results", str(s.root / "transcripts/results.jsonl")],
            *["--context", _ctx(s), "--out", str(w / "ct"), *_transcript_flags(s)],
        ],
    ),
    Command(
        "contamination manifest",
        C,
        lambda s, w: [
            *["contamination", "manifest", "--root", str(s.workspace)],
            *["--out", str(w / "m.json")],
        ],
    ),
)
# Sub-commands that read no input file the fixture holds: they run once on the pristine
# fixture (and in the flag fuzz), with the same contract.
NO_INPUT: tuple[Command, ...] = (
    Command("self-test", (), lambda s, _: ["self-test"]),
    Command("local-model locate", (), lambda s, _: ["local-model", "locate"]),
    Command("local-model serve", (), lambda s, w: ["local-model", "serve", "--log", str(w / "l")]),
    Command(
        "pipeline",
        (),
        lambda s, w: [
            *["pipeline", "--label", "fuzz", "--evidence-root", str(w / "pe")],
            *["--notebooks", str(w / "no-notebooks"), "-p", "allow", "4"],
        ],
    ),
)


# Sub-commands the fuzz does not run, each with the reason: none since issue 22.
NOT_FUZZED: dict[str, str] = {}
# A command that would serve a model, and the reader whose refusal it must share: when that
# reader refuses a damaged copy, the command refuses it too, before any server starts.
REFUSES_BEFORE_SERVING = {
    "local-run": "verify",
    "local-pilot": "prepare",
    "local-compare": "prepare",
    "local-pipeline": "prepare",
}


@contextlib.contextmanager
def no_servers() -> Iterator[None]:
    """Make every way of starting a packaged model's server refuse with NO_SERVER."""
    from unittest import mock

    from needlepoint.errors import NeedlepointError

    def refuse(*args: object, **kwargs: object) -> None:
        raise NeedlepointError(NO_SERVER)

    with (
        mock.patch("needlepoint.local.server.served_model", refuse),
        mock.patch("needlepoint.cli.local.served_model", refuse),
    ):
        yield


def commands(paths: Paths, group: str, scratch: Path) -> list[list[str]]:
    """The argv of every sub-command that reads an input of ``group``, in running order."""
    return [c.argv(paths, scratch) for c in COMMANDS if group in c.reads]


def build_fixture(root: Path) -> Paths:
    """The pristine fixture (see the module docstring)."""
    from needlepoint.contamination.fixture import build_synthetic_workspace

    paths = Paths(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    _ok(["prepare", "--out", str(paths.prepared), "--protocol", str(root / "small.json")])
    (root / "plan.md").write_text("# Plan\n\nOne faulty simulated run.\n", encoding="utf-8")
    declaration = str(root / "declaration.json")
    _ok(["declare", str(root / "plan.md"), "--out", declaration, "--evidence-root", str(root)])
    _ok(
        [
            *["run", str(paths.prepared), "--allow", "40", "--run-dir", str(paths.run)],
            *["--simulate", "faulty", "--input-rate", "1", "--output-rate", "2", "--no-progress"],
            *["--declaration", declaration],
        ]
    )
    _ok(["results", str(paths.run)])
    _ok(
        [
            *["run", str(paths.prepared), "--allow", "40", "--run-dir", str(root / "run2")],
            *["--simulate", "position", "--no-progress"],
        ]
    )
    runs = [
        {"name": name, "prepared": "prepared", "run_dir": f"sweep-{name}", "allow": 2}
        for name in ("s", "t")
    ]
    sweep = {"format": "needlepoint-sweep", "version": 1, "runs": runs}
    for entry in runs:
        entry["simulate"] = "perfect"
    (root / "SWEEP.json").write_text(json.dumps(sweep, indent=1), encoding="utf-8")
    _ok(
        [
            *["pilot", "--protocol", str(root / "small.json"), "--out", str(paths.pilot)],
            *[*PILOT_SHAPE, "--allow", "32", "--simulate", "position", "--no-progress"],
        ]
    )
    _json_log(INSPECT_LOG, root / "inspect.json")
    from support import transcripts

    transcripts.transcripts(root / "transcripts" / "t")
    transcripts.results(root / "transcripts" / "results.jsonl")
    build_synthetic_workspace(root / "contamination")
    _ok(
        [
            *["contamination", "manifest", "--root", str(paths.workspace)],
            *["--out", str(paths.inputs / "context.json")],
        ]
    )
    return paths


def _json_log(source: Path, target: Path) -> None:
    """The committed .eval log rewritten by inspect as a .json log: text the mutations can
    damage field by field (a zip only breaks as a whole)."""
    from inspect_ai.log import read_eval_log, write_eval_log

    write_eval_log(read_eval_log(str(source)), str(target), format="json")


def _ok(argv: list[str]) -> None:
    code, out, err = run_cli(argv)
    assert code in (0, 1), (argv, code, out, err)


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """Run one command in-process with terminal-like (strict UTF-8) output streams."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # usage errors (one line, see test_usage_errors.py)
            code = exc.code if isinstance(exc.code, int) else 2
        out.flush()
        err.flush()
    texts = [s.buffer.getvalue().decode("utf-8", "replace") for s in (out, err)]
    return code, texts[0], texts[1]


def copy_fixture(pristine: Paths, dest: Path) -> Paths:
    """A private copy (mtimes kept, which the timeline check reads)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(pristine.root, dest, symlinks=True)
    return Paths(dest, pristine=pristine.root)


# Commands that run requests, whose exit 3 says a stop rule fired.
STOPPING = ("run", "sweep", "pilot", "local-run", "local-pilot", "local-compare")


def bad_outcome(argv: list[str], code: int, out: str, err: str) -> str | None:
    """Why a command's result breaks the contract, or None.

    The contract: exit 0 (done), 1 (a check failed) or 2 (refused, in one line on stderr), and
    3 for the commands that run requests (STOPPING: a stop rule fired); never a traceback, never the
    last-resort guard (exit 70).
    """
    if code == INTERNAL_ERROR or "internal error" in err:
        return f"reached the last-resort guard: {err.strip()}"
    if "Traceback" in out + err:
        return "printed a traceback"
    if code not in (0, 1, 2, 3) or (code == 3 and argv[0] not in STOPPING):
        return f"exit status {code}"
    if code == 2 and len([line for line in err.splitlines() if line.strip()]) != 1:
        return f"refusal is not one line: {err!r}"
    if UNSAFE_OUTPUT.search(out + err):
        return f"printed a control character a terminal acts on: {(out + err)[:300]!r}"
    return None


# What a terminal acts on (issue 39): C0 controls except the line end and tab, DEL, C1 controls,
# line and paragraph separators, bidirectional controls. Values are escaped (safetext.terminal).
UNSAFE_OUTPUT = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
