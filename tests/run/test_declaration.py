"""A run started under a declaration proves in its own journal that the declaration came first.

The declaration file's SHA-256 is in run.json and in the journal's first record, which the
runner writes before the first request; `audit-run` checks it against the file, so a declaration
changed by one byte afterwards fails the audit, by name.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from support.runner import KEY_ENV, SENTINEL, live, records, server_for

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import file_sha256
from needlepoint.run.audit import audit_run
from needlepoint.run.declaration import read_declaration
from needlepoint.run.options import RunOptions
from needlepoint.run.runner import run_protocol
from needlepoint.schema import document_bytes
from needlepoint.study.declare import declare


def _declare(root: Path, name: str = "declaration.json", **kw) -> Path:
    plan = root / "plan.md"
    plan.write_text("# Plan\n\nOne run, analysed by the preregistered rule.\n", encoding="utf-8")
    out = root / name
    declare(plan, out, root, **kw)
    return out


def _simulated(prepared: Path, run: Path, declaration: Path | None, allow: int = 8):
    options = RunOptions(
        allow=allow,
        simulate="perfect",
        progress="off",
        declaration=None if declaration is None else str(declaration),
    )
    return run_protocol(prepared, run, options)


def test_the_first_record_carries_the_declaration_before_the_first_request(
    reference_dir: Path, tmp_path: Path
) -> None:
    decl = _declare(tmp_path)
    sha = file_sha256(decl)
    run = tmp_path / "run"
    _simulated(reference_dir, run, decl)
    first, second = records(run)[:2]
    assert first["type"] == "session" and first["declaration_sha256"] == sha
    assert second["type"] == "attempt"  # nothing was sent before the declaration was recorded
    saved = json.loads((run / "run.json").read_text("utf-8"))["declaration"]
    assert saved == {"path": "../declaration.json", "sha256": sha}
    report = audit_run(run)
    assert report.ok, report.lines()
    assert report.checked["declaration in the first record"] == 1
    assert report.checked["declaration sha256"] == 1


def test_one_byte_changed_in_the_declaration_fails_the_audit_by_name(
    reference_dir: Path, tmp_path: Path
) -> None:
    decl = _declare(tmp_path)
    run = tmp_path / "run"
    _simulated(reference_dir, run, decl)
    data = bytearray(decl.read_bytes())
    data[data.index(b"One run")] = ord("A")  # the plan text, one byte
    decl.write_bytes(bytes(data))
    report = audit_run(run)
    assert not report.ok
    assert any(
        p.startswith("declaration ../declaration.json: SHA-256") and "changed since" in p
        for p in report.problems
    ), report.problems
    decl.unlink()
    assert any("declaration ../declaration.json: missing" in p for p in audit_run(run).problems)


def test_a_resume_must_name_the_same_declaration(reference_dir: Path, tmp_path: Path) -> None:
    decl = _declare(tmp_path)
    other = _declare(tmp_path, "other.json")
    run = tmp_path / "run"
    _simulated(reference_dir, run, decl, allow=4)
    for wrong in (other, None):
        with pytest.raises(NeedlepointError, match="field declaration is"):
            _simulated(reference_dir, run, wrong, allow=8)
    _simulated(reference_dir, run, decl, allow=8)
    sessions = [r for r in records(run) if r["type"] == "session"]
    assert [s["declaration_sha256"] for s in sessions] == [file_sha256(decl)] * 2
    assert audit_run(run).ok


def test_a_run_without_declaration_is_unchanged(reference_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    _simulated(reference_dir, run, None)
    assert "declaration" not in json.loads((run / "run.json").read_text("utf-8"))
    assert "declaration_sha256" not in records(run)[0]
    report = audit_run(run)
    assert report.ok and not any("declaration" in k for k in report.checked)


def test_a_session_citing_a_declaration_run_json_lacks_is_a_problem(
    reference_dir: Path, tmp_path: Path
) -> None:
    decl = _declare(tmp_path)
    run = tmp_path / "run"
    _simulated(reference_dir, run, decl)
    record = json.loads((run / "run.json").read_text("utf-8"))
    del record["declaration"]
    (run / "run.json").write_text(json.dumps(record), encoding="utf-8")
    assert any("does not record" in p for p in audit_run(run).problems)


def test_a_declaration_that_already_lists_the_run_is_a_problem(
    reference_dir: Path, tmp_path: Path
) -> None:
    """A declaration that knows the run folder's journal was written after the run began."""
    run = tmp_path / "run"
    _simulated(reference_dir, run, None, allow=4)
    decl = _declare(tmp_path, "late.json")  # lists run/ with its records
    shutil.rmtree(run)  # the run is redone in the same folder, under the late declaration
    _simulated(reference_dir, run, decl)
    problems = audit_run(run).problems
    assert any("lists this run's journal with 10 records" in p for p in problems), problems


def test_a_live_run_refuses_a_simulated_clock_and_checks_the_time(
    reference_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SENTINEL)
    simulated = _declare(tmp_path, "sim.json", simulated=True)
    with server_for(reference_dir) as server:
        with pytest.raises(NeedlepointError, match="simulated clock"):
            live(reference_dir, tmp_path / "r1", server, allow=2, declaration=str(simulated))
        real = _declare(tmp_path, "real.json")
        live(reference_dir, tmp_path / "r2", server, allow=2, declaration=str(real))
        report = audit_run(tmp_path / "r2")
        assert report.ok and report.checked["declaration before the first session"] == 1
        # A declaration stamped after the run's start (as a forger would date it) fails.
        d = read_declaration(real).record
        future = tmp_path / "future.json"
        future.write_bytes(document_bytes(dataclasses.replace(d, time="2999-01-01T00:00:00Z")))
        live(reference_dir, tmp_path / "r3", server, allow=2, declaration=str(future))
    problems = audit_run(tmp_path / "r3").problems
    assert any("after the run's first session" in p for p in problems), problems


def test_a_damaged_declaration_is_refused_before_anything_is_sent(
    reference_dir: Path, tmp_path: Path
) -> None:
    decl = _declare(tmp_path)
    value = json.loads(decl.read_text("utf-8"))
    value["plan"]["text"] += "edited"
    decl.write_text(json.dumps(value), encoding="utf-8")
    with pytest.raises(NeedlepointError, match=r"plan\.sha256: does not match"):
        _simulated(reference_dir, tmp_path / "run", decl)
    assert not (tmp_path / "run" / "journal.jsonl").exists()


def test_every_run_of_a_sweep_is_started_under_its_declaration(
    reference_dir: Path, tmp_path: Path
) -> None:
    from needlepoint.cli.app import main

    (tmp_path / "prepared").symlink_to(reference_dir)
    decl = _declare(tmp_path)
    runs = [
        {
            "name": n,
            "prepared": "prepared",
            "run_dir": f"runs/{n}",
            "allow": 8,
            "simulate": "perfect",
        }
        for n in ("a", "b")
    ]
    sweep = {"format": "needlepoint-sweep", "version": 1, "runs": runs}
    path = tmp_path / "SWEEP.json"
    path.write_text(json.dumps(sweep), encoding="utf-8")
    assert main(["sweep", str(path), "--no-progress", "--declaration", str(decl)]) == 0
    for name in ("a", "b"):
        run = tmp_path / "runs" / name
        saved = json.loads((run / "run.json").read_text("utf-8"))["declaration"]
        assert saved == {"path": "../../declaration.json", "sha256": file_sha256(decl)}
        assert records(run)[0]["declaration_sha256"] == file_sha256(decl)
        assert audit_run(run).ok
    # A damaged declaration refuses the whole sweep before any run starts.
    decl.write_text("{", encoding="utf-8")
    assert main(["sweep", str(path), "--no-progress", "--declaration", str(decl)]) == 2
