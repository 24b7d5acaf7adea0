"""`needlepoint declare`: the plan, its time, and every journal and analysis then on record; an
amendment cites the declaration it replaces and is flagged when made after outcomes it governs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fuzz import run_cli

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import file_sha256, sha256_hex
from needlepoint.run.declaration import chain, chain_lines, flagged, read_declaration
from needlepoint.run.options import RunOptions
from needlepoint.run.runner import run_protocol
from needlepoint.study.declare import declare

PLAN = "# Plan\n\nThe preregistered rule, one run.\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "evidence"
    folder.mkdir()
    (tmp_path / "plan.md").write_text(PLAN, encoding="utf-8")
    return folder


def _run(prepared: Path, run: Path, declaration: Path | None, allow: int = 6) -> None:
    options = RunOptions(
        allow=allow,
        simulate="perfect",
        progress="off",
        fsync=False,
        declaration=None if declaration is None else str(declaration),
    )
    run_protocol(prepared, run, options)


def test_a_declaration_holds_the_plan_the_time_and_what_was_on_record(
    reference_dir: Path, root: Path
) -> None:
    _run(reference_dir, root / "old-run", None)
    d = declare(root.parent / "plan.md", root / "declaration.json", root)
    r = d.record
    assert (r.format, r.version, r.simulation, r.amends) == (
        "needlepoint-declaration",
        1,
        False,
        None,
    )
    assert r.plan.text == PLAN and r.plan.sha256 == sha256_hex(PLAN.encode())
    assert r.plan.file == "plan.md" and r.root == "."
    [head] = r.heads
    assert (head.path, head.kind, head.attempts, head.outcomes) == ("old-run", "run", 6, 6)
    assert head.records == 14 and head.declaration_sha256 is None and head.last_time
    assert d.sha256 == file_sha256(root / "declaration.json")
    # Written once: never overwritten.
    with pytest.raises(NeedlepointError, match="never overwritten"):
        declare(root.parent / "plan.md", root / "declaration.json", root)


def test_an_amendment_after_outcomes_it_governs_is_flagged(reference_dir: Path, root: Path) -> None:
    first = root / "declaration.json"
    declare(root.parent / "plan.md", first, root)
    _run(reference_dir, root / "run", first)
    # Before any outcome under the first declaration, an amendment is not flagged ...
    early = declare(root.parent / "plan.md", root / "early.json", root)
    assert not flagged(chain(early.path))
    # ... one that cites it after its run's outcomes is.
    amendment = declare(root.parent / "plan.md", root / "amendment.json", root, amends=first)
    assert amendment.record.amends.path == "declaration.json"
    entries = chain(amendment.path)
    assert [e.path.name for e in entries] == ["declaration.json", "amendment.json"]
    [governed] = flagged(entries)[amendment.sha256]
    assert (governed.path, governed.outcomes) == ("run", 6)
    lines = chain_lines(entries, root)
    assert "FLAG: made after outcomes it governs" in lines[1] and "`run` 6" in lines[1]
    assert "FLAG" not in lines[0]


def test_an_amendment_of_an_amendment_that_changed_is_refused(root: Path) -> None:
    first = declare(root.parent / "plan.md", root / "a.json", root).path
    second = declare(root.parent / "plan.md", root / "b.json", root, amends=first).path
    value = json.loads(first.read_text("utf-8"))
    value["plan"]["file"] = "other.md"
    first.write_text(json.dumps(value), encoding="utf-8")
    with pytest.raises(NeedlepointError, match=r"not the \w+ it cites"):
        chain(second)


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "the plan is empty"), (b"\xff\xfe", "not UTF-8"), (b"   \n", "the plan is empty")],
)
def test_a_bad_plan_is_refused(root: Path, content: bytes, message: str) -> None:
    plan = root.parent / "bad.md"
    plan.write_bytes(content)
    with pytest.raises(NeedlepointError, match=message):
        declare(plan, root / "d.json", root)
    assert not (root / "d.json").exists()


def test_a_simulated_clock_is_the_epoch_and_says_so(root: Path) -> None:
    d = declare(root.parent / "plan.md", root / "sim.json", root, simulated=True)
    assert d.record.time == "2026-01-01T00:00:00.000000Z" and d.record.simulation
    assert "simulated clock" in chain_lines([d], root)[0]


def test_the_command_needs_an_evidence_root(tmp_path: Path, root: Path) -> None:
    code, _, err = run_cli(
        ["declare", str(tmp_path / "plan.md"), "--out", str(tmp_path / "d.json")]
    )
    assert code == 2 and "not inside a folder named evidence" in err
    code, out, _ = run_cli(["declare", str(tmp_path / "plan.md"), "--out", str(root / "d.json")])
    assert code == 0 and "sha256" in out and "next: start runs with --declaration" in out
    assert read_declaration(root / "d.json").record.root == "."


def test_a_declaration_with_a_broken_field_is_refused_with_one_line(root: Path) -> None:
    path = declare(root.parent / "plan.md", root / "d.json", root).path
    value = json.loads(path.read_text("utf-8"))
    value["time"] = "yesterday"
    path.write_text(json.dumps(value), encoding="utf-8")
    with pytest.raises(NeedlepointError, match="field time: 'yesterday' is not an ISO-8601"):
        read_declaration(path)
    value["time"], value["root"] = "2026-01-01T00:00:00Z", "/etc"
    path.write_text(json.dumps(value), encoding="utf-8")
    with pytest.raises(NeedlepointError, match="field root: expected a relative path"):
        read_declaration(path)
