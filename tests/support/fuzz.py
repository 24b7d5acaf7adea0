"""Input mutations and the sub-commands that read each input file, for the fuzz tests.

A *fixture* is one folder holding a small prepared folder, a faulty simulated run of it (with
``results.csv``) and the contamination inputs with a frozen context manifest. Each example
copies it, damages one file in one way, and runs every sub-command that reads that file
in-process, capturing what a terminal would see.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.cli.app import INTERNAL_ERROR, main

# A small v2 design, so that verify, audit and a whole run take a fraction of a second.
SMALL = {"version": 2, "cases": 4, "lengths": [12]}
PREPARED_FILES = (
    "protocol.json",
    "requests.jsonl",
    "plan.csv",
    "answer_key.jsonl",
    "manifest.json",
)
RUN_FILES = (
    "run.json",
    "journal.jsonl",
    "journal.head.json",
    "context_manifest.json",
    "results.csv",
)
CONTAMINATION_FILES = ("reference.csv", "discards.csv", "runs.csv", "results.jsonl", "context.json")
# Values of the wrong type, or of the right type but hostile.
ODD_VALUES: tuple[Any, ...] = (
    None,
    True,
    -1,
    0,
    10**400,
    1.5,
    1e308,
    "",
    "x",
    "\ud800",
    "../../escaped",
    [],
    {},
    [[[[[]]]]],
    {"a": {"b": {}}},
)
ODD_CELLS = ("", "-1", "0", "1e400", "nan", "x", "\x00", "../../x", "é" * 3, "9" * 5000, "1.5")


@dataclass(frozen=True)
class Paths:
    root: Path

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

    def file(self, group: str, name: str) -> Path:
        folder = {"prepared": self.prepared, "run": self.run, "contamination": self.inputs}
        return folder[group] / name


def build_fixture(root: Path) -> Paths:
    """The pristine fixture: prepared, run (faulty, with results.csv) and contamination."""
    from needlepoint.contamination.fixture import build_synthetic_workspace

    paths = Paths(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / "small.json").write_text(json.dumps(SMALL), encoding="utf-8")
    _ok(["prepare", "--out", str(paths.prepared), "--protocol", str(root / "small.json")])
    _ok(
        [
            *["run", str(paths.prepared), "--allow", "40", "--run-dir", str(paths.run)],
            *["--simulate", "faulty", "--input-rate", "1", "--output-rate", "2", "--no-progress"],
        ]
    )
    _ok(["results", str(paths.run)])
    build_synthetic_workspace(root / "contamination")
    _ok(
        [
            *["contamination", "manifest", "--root", str(paths.workspace)],
            *["--out", str(paths.inputs / "context.json")],
        ]
    )
    return paths


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
        except SystemExit as exc:  # argparse usage errors
            code = exc.code if isinstance(exc.code, int) else 2
        out.flush()
        err.flush()
    texts = [s.buffer.getvalue().decode("utf-8", "replace") for s in (out, err)]
    return code, texts[0], texts[1]


def commands(paths: Paths, group: str, scratch: Path) -> list[list[str]]:
    """Every sub-command that reads an input of ``group``."""
    p, r, i = str(paths.prepared), str(paths.run), paths.inputs
    ctx, ws = str(i / "context.json"), str(paths.workspace)
    fresh = str(scratch / "fresh-run")
    design = [["verify", p], ["audit", p], ["dry-run", p]]
    run_side = [
        ["results", r],
        ["audit-run", r],
        ["analyze", r, "--no-figures", "--out", str(scratch / "a1")],
        [
            *["analyze", "--results", f"{r}/results.csv", "--prepared", p, "--no-figures"],
            *["--out", str(scratch / "a2")],
        ],
        # Resuming: refused (allowance, or a damaged folder) or it sends the rest.
        [
            *["run", p, "--allow", "64", "--run-dir", r, "--simulate", "faulty", "--no-progress"],
            *["--input-rate", "1", "--output-rate", "2"],
        ],
    ]
    contamination = [
        [
            *[
                "contamination",
                "overlap",
                "--reference",
                str(i / "reference.csv"),
                "--context",
                ctx,
            ],
            *["--discard", str(i / "discards.csv")],
        ],
        ["contamination", "timeline", "--runs", str(i / "runs.csv"), "--context", ctx],
        ["contamination", "canary", "--results", str(i / "results.jsonl")],
        [
            *["contamination", "report", "--reference", str(i / "reference.csv")],
            *["--runs", str(i / "runs.csv"), "--results", str(i / "results.jsonl")],
            *["--context", ctx, "--discard", str(i / "discards.csv"), "--out", str(scratch / "c")],
        ],
        ["contamination", "manifest", "--root", ws, "--out", str(scratch / "m.json")],
    ]
    if group == "prepared":
        fresh_run = ["run", p, "--allow", "3", "--run-dir", fresh, "--simulate", "perfect"]
        return [*design, [*fresh_run, "--no-progress"], *run_side]
    if group == "run":
        return run_side
    return contamination


# -- mutations ---------------------------------------------------------------------------------


def _paths_of(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths_of(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:20]):
            out += _paths_of(v, (*prefix, i))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode(
        "utf-8", "surrogatepass"
    )


def wrong_type(data: bytes, choose: Callable[[int], int], odd: Any) -> bytes:
    """Replace one value of a JSON or JSONL document (or one CSV cell) with ``odd``."""
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    try:
        docs = [json.loads(line) for line in lines if line.strip()]
        whole = None
    except ValueError:
        docs = None
    if docs is None:
        try:
            whole = json.loads(text)
        except ValueError:
            return _wrong_cell(lines, choose, odd)
    if whole is not None:
        paths = _paths_of(whole)
        return _dumps(_replace(whole, paths[choose(len(paths))], odd)) + b"\n"
    if not docs:
        return data
    k = choose(len(docs))
    paths = _paths_of(docs[k])
    docs[k] = _replace(docs[k], paths[choose(len(paths))], odd)
    return b"".join(_dumps(d) + b"\n" for d in docs)


def _wrong_cell(lines: list[str], choose: Callable[[int], int], odd: Any) -> bytes:
    import csv

    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if not rows:
        return b""
    r = choose(len(rows))
    if rows[r]:
        cell = odd if isinstance(odd, str) else ODD_CELLS[choose(len(ODD_CELLS))]
        rows[r][choose(len(rows[r]))] = cell
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue().encode("utf-8", "surrogatepass")


MUTATIONS = (
    "truncate",
    "flip",
    "bom",
    "not_utf8",
    "wrong_type",
    "rechain",
    "deep",
    "empty",
    "delete",
    "directory",
)


def mutate(path: Path, how: str, choose: Callable[[int], int], odd: Any) -> None:
    """Damage one file in place."""
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: choose(len(data) + 1)])
    elif how == "flip":
        b = bytearray(data)
        for _ in range(1 + choose(4)):
            if b:
                at = choose(len(b))
                b[at] ^= 1 << choose(8)
        path.write_bytes(bytes(b))
    elif how == "bom":
        path.write_bytes(b"\xef\xbb\xbf" + data)
    elif how == "not_utf8":
        at = choose(len(data) + 1)
        path.write_bytes(data[:at] + b"\xff\xfe\xc3" + data[at:])
    elif how == "wrong_type":
        path.write_bytes(wrong_type(data, choose, odd))
    elif how == "rechain":
        # A forger's edit: a wrong value, then every hash and the head recomputed to match.
        path.write_bytes(wrong_type(data, choose, odd))
        if path.name == "journal.jsonl":
            rechain(path)
    elif how == "deep":
        at = choose(len(data) + 1)
        path.write_bytes(data[:at] + b"[" * 100_000 + b"]" * 100_000 + data[at:])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "delete":
        path.unlink()
    elif how == "directory":
        path.unlink()
        path.mkdir()
        (path / "inside").write_text("x")


def rechain(path: Path) -> None:
    """Recompute n, prev and journal.head.json over a journal's lines, keeping their values."""
    import hashlib

    from needlepoint.jsonio import canonical_bytes

    prev, lines = "0" * 64, []
    for raw in path.read_bytes().splitlines():
        try:
            record = json.loads(raw)
        except ValueError:
            lines.append(raw)
            continue
        if isinstance(record, dict):
            record.update(n=len(lines), prev=prev)
            try:
                raw = canonical_bytes(record)
            except (ValueError, UnicodeEncodeError):
                raw = _dumps(record)
        lines.append(raw)
        prev = hashlib.sha256(raw).hexdigest()
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    head = {"format": 1, "records": len(lines), "sha256": prev}
    (path.parent / "journal.head.json").write_bytes(_dumps(head) + b"\n")


def copy_fixture(pristine: Paths, dest: Path) -> Paths:
    """A private copy (mtimes kept, which the timeline check reads)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(pristine.root, dest, symlinks=True)
    return Paths(dest)


def bad_outcome(code: int, out: str, err: str) -> str | None:
    """Why a command's result breaks the contract, or None."""
    if code == INTERNAL_ERROR or "internal error" in err:
        return f"reached the last-resort guard: {err.strip()}"
    if "Traceback" in out + err:
        return "printed a traceback"
    if code not in (0, 1, 2, 3):
        return f"exit status {code}"
    if code == 2 and len([line for line in err.splitlines() if line.strip()]) != 1:
        return f"refusal is not one line: {err!r}"
    return None
