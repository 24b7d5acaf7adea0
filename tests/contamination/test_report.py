"""The combined report and CI gate: fixture shape, determinism, and exit codes 0 / 1 / 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.contamination import context_file, reference, result, results, runs

from needlepoint.cli import app as cli
from needlepoint.cli import contamination as contamination_commands
from needlepoint.contamination import (
    build_report,
    build_synthetic_workspace,
    check_canary,
    check_overlap,
    check_timeline,
    load_context,
    read_discards,
    read_reference,
    read_results,
    read_runs,
    write_report,
)


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch):
    """The real `needlepoint` entry point with only this provider, so others cannot break it."""
    monkeypatch.setattr(cli, "PROVIDERS", (contamination_commands,))
    return lambda *argv: cli.main(["contamination", *map(str, argv)])


def test_fixture_reproduces_the_shape_of_seed_004(tmp_path: Path) -> None:
    p = build_synthetic_workspace(tmp_path / "fx")
    ctx = load_context(p.workspace)
    c = check_canary(read_results(p.results))
    clean, inside = c.summary
    assert (clean.condition, clean.questions, clean.exact) == ("clean-room", 4, 0)
    assert (inside.condition, inside.questions, inside.exact, inside.tool_calls) == (
        "inside",
        2,
        2,
        0,
    )
    assert len(c.leaks) == 2 and not c.dead_canary
    o = check_overlap(read_reference(p.reference), ctx, read_discards(p.discards))
    assert (len(o.present_ids), o.reference_count, len(o.discarded)) == (7, 20, 1)
    assert len(o.matches) == 8
    t = check_timeline(read_runs(p.runs), ctx)
    newer = {h.file for h in t.artifacts}
    assert newer == {"memory/session-2025-03-14.md"}
    (artifact,) = t.artifacts
    assert (artifact.run_id, artifact.minutes_after_start) == ("r1", 53.0)
    assert [x.run_id for x in t.poisoned] == ["r2"]


def test_fixture_rebuilds_itself_but_refuses_foreign_folders(tmp_path: Path) -> None:
    p = build_synthetic_workspace(tmp_path / "fx")
    (p.workspace / "memory" / "stray.md").write_text("left over\n")
    build_synthetic_workspace(tmp_path / "fx")
    assert not (p.workspace / "memory" / "stray.md").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("x")
    with pytest.raises(Exception, match="refusing"):
        build_synthetic_workspace(tmp_path / "mine")
    assert (tmp_path / "mine" / "keep.txt").exists()


def test_report_bytes_are_deterministic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outputs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        p = build_synthetic_workspace("fx")
        report = build_report(p.reference, p.runs, p.results, p.workspace, p.discards)
        json_path, md_path = write_report(report, "out")
        outputs.append((json_path.read_bytes(), md_path.read_bytes()))
    assert outputs[0] == outputs[1]
    doc = json.loads(outputs[0][0])
    assert doc["format"] == "contamination-report/1"
    assert [f["kind"] for f in doc["gate"]["findings"]] == ["leak", "leak", "poisoned-rerun"]
    assert str(tmp_path) not in outputs[0][0].decode() + outputs[0][1].decode()


def clean_inputs(tmp_path: Path) -> dict[str, Path]:
    """A workspace and inputs with nothing to find; each gate test spoils exactly one thing."""
    ws = tmp_path / "ws"
    context_file(ws, "CLAUDE.md", "Answer with the code only.\n", "2025-03-01T00:00:00Z")
    context_file(ws, "memory/m.md", "nothing relevant, 1975\n", "2025-03-02T00:00:00Z")
    return {
        "ws": ws,
        "ref": reference(tmp_path / "ref.csv", {"R1": "OM-3642", "R2": "975"}),
        "runs": runs(
            tmp_path / "runs.csv",
            [
                ("r1", "ref", "2025-03-14T11:15:00Z", "13/20"),
                ("r2", "ref", "2025-03-14T14:30:00Z", "14/20"),
            ],
        ),
        "results": results(
            tmp_path / "results.jsonl",
            [
                result(run_id="cr", condition="clean-room", answer="UNKNOWN", tool_calls=0),
                result(run_id="in", tool_calls=2),
            ],
        ),
    }


def gate(run_cli, f: dict[str, Path], out: Path) -> int:
    return run_cli(
        "report", "--reference", f["ref"], "--runs", f["runs"], "--results", f["results"],
        "--context", f["ws"], "--out", out,
    )  # fmt: skip


def test_gate_passes_on_a_clean_workspace(tmp_path: Path, run_cli) -> None:
    f = clean_inputs(tmp_path)
    assert gate(run_cli, f, tmp_path / "out") == 0
    doc = json.loads((tmp_path / "out" / "contamination.json").read_text())
    assert doc["gate"] == {"passed": True, "exit_code": 0, "findings": [], "notices": []}
    assert "**Gate: PASSED**" in (tmp_path / "out" / "contamination.md").read_text()


def spoil_overlap(f: dict[str, Path]) -> None:
    context_file(f["ws"], "memory/m.md", "distance 975 km\n", "2025-03-02T00:00:00Z")


def spoil_leak(f: dict[str, Path]) -> None:
    results(
        f["results"],
        [result(run_id="cr", condition="clean-room", answer="?"), result(tool_calls=0)],
    )


def spoil_canary(f: dict[str, Path]) -> None:
    results(f["results"], [result(run_id="cr", condition="clean-room"), result(run_id="in")])


def spoil_tool_calls(f: dict[str, Path]) -> None:
    results(
        f["results"],
        [result(run_id="cr", condition="clean-room", answer="?"), result(tool_calls=...)],
    )


def spoil_timeline(f: dict[str, Path]) -> None:
    context_file(f["ws"], "memory/run.md", "r1 scored 13/20\n", "2025-03-14T12:08:00Z")


@pytest.mark.parametrize(
    ("spoil", "kind"),
    [
        (spoil_overlap, "leak"),
        (spoil_leak, "leak"),
        (spoil_canary, "dead-canary"),
        (spoil_tool_calls, "no-tool-calls"),
        (spoil_timeline, "poisoned-rerun"),
    ],
)
def test_gate_fails_with_exit_1_on_each_finding(tmp_path: Path, run_cli, spoil, kind: str) -> None:
    f = clean_inputs(tmp_path)
    spoil(f)
    assert gate(run_cli, f, tmp_path / "out") == 1
    doc = json.loads((tmp_path / "out" / "contamination.json").read_text())
    assert doc["gate"]["exit_code"] == 1
    assert [x["kind"] for x in doc["gate"]["findings"]] == [kind]


def test_file_after_the_last_run_is_a_notice_not_a_failure(tmp_path: Path, run_cli) -> None:
    f = clean_inputs(tmp_path)
    context_file(f["ws"], "memory/run.md", "r2 scored 14/20\n", "2025-03-14T15:00:00Z")
    assert gate(run_cli, f, tmp_path / "out") == 0
    notices = json.loads((tmp_path / "out" / "contamination.json").read_text())["gate"]["notices"]
    assert notices == [
        "memory/run.md was written 30 min after run r2 started and holds its results: "
        "take it out of the automatic context before any rerun"
    ]


@pytest.mark.parametrize(
    ("break_it", "expected"),
    [
        (lambda f: f["ref"].unlink(), "ref.csv: file not found"),
        (lambda f: f["runs"].write_bytes(b"format,run_id\n\xff\n"), "runs.csv:2: not UTF-8"),
        (
            lambda f: f["results"].write_text('{"format": "contamination-results/1"}\n'),
            "results.jsonl:1: field run_id: missing",
        ),
        (
            lambda f: f["ref"].write_text("format,id,question,answer\nx,y\n"),
            "ref.csv:2: expected 4",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, run_cli, capsys: pytest.CaptureFixture[str], break_it, expected: str
) -> None:
    f = clean_inputs(tmp_path)
    break_it(f)
    assert gate(run_cli, f, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_single_checks_exit_codes(tmp_path: Path, run_cli) -> None:
    p = build_synthetic_workspace(tmp_path / "fx")
    manifest = tmp_path / "m.json"
    assert run_cli("manifest", "--root", p.workspace, "--out", manifest) == 0
    assert run_cli("overlap", "--reference", p.reference, "--context", manifest) == 1
    assert run_cli("timeline", "--runs", p.runs, "--context", manifest) == 1
    assert run_cli("canary", "--results", p.results) == 1
    f = clean_inputs(tmp_path / "clean")
    assert run_cli("overlap", "--reference", f["ref"], "--context", f["ws"]) == 0
    assert run_cli("timeline", "--runs", f["runs"], "--context", f["ws"]) == 0
    assert run_cli("canary", "--results", f["results"]) == 0


def test_manifest_to_stdout_and_problems_to_stderr(
    tmp_path: Path, run_cli, capsys: pytest.CaptureFixture[str]
) -> None:
    p = build_synthetic_workspace(tmp_path / "fx")
    (p.workspace / "memory" / "gone.md").symlink_to("nowhere")
    assert run_cli("manifest", "--root", p.workspace, "--include", "memory/**") == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert [f["path"] for f in doc["files"]] == [
        "memory/project-facts.md",
        "memory/session-2025-03-14.md",
    ]
    assert "memory/gone.md: dangling-symlink" in err


def test_module_entry_point_has_no_traceback_on_bad_input(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "needlepoint",
            "contamination",
            "canary",
            "--results",
            tmp_path / "x",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert out.stderr.strip().endswith("x: file not found") and "Traceback" not in out.stderr
