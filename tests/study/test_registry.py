"""`needlepoint registry`: every run of every design under a root, grouped by design fingerprint
and model variant, with decisions, completeness, audit and declaration; runs of the same
request bytes compared request by request; runs gone from the tree found in git history."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.fuzz import run_cli

from needlepoint.design.prepared import prepare
from needlepoint.run.options import RunOptions
from needlepoint.run.runner import run_protocol
from needlepoint.study.registry import (
    REPLICATION,
    REPRODUCTION,
    agreement,
    collect,
    kind_of,
    read_entry,
    registry_lines,
)


def _run(prepared: Path, run: Path, allow: int, simulate: str = "perfect", **params) -> None:
    options = RunOptions(
        allow=allow, simulate=simulate, sim_params=params or None, progress="off", fsync=False
    )
    run_protocol(prepared, run, options)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs of one variant (same request bytes), one of another variant, an unrun folder."""
    base = tmp_path_factory.mktemp("registry") / "evidence"
    prepare(base / "a" / "prepared")
    prepare(base / "b" / "prepared", model="other-model")
    prepare(base / "c" / "prepared", model="never-run")
    _run(base / "a" / "prepared", base / "a" / "run1", 128)
    _run(base / "a" / "prepared", base / "a" / "run2", 128, "faulty")
    _run(base / "b" / "prepared", base / "b" / "run", 16)
    return base


def test_runs_are_grouped_by_design_then_variant_with_their_decision(root: Path) -> None:
    reg = collect(root)
    lines = registry_lines(reg)
    text = "\n".join(lines)
    assert lines[0].startswith(f"registry of {root.as_posix()}: 3 prepared folders, 3 runs")
    [design] = [x for x in lines if x.startswith("design ")]  # one design, three variants
    assert "(context-position-similar v1)" in design
    assert text.index("  agnes-3.0-flash (chat)") < text.index("    run a/run1 (SIMULATION)")
    assert text.index("  other-model (chat)") < text.index("    run b/run (SIMULATION)")
    run1 = next(x for x in lines if "run a/run1" in x)
    assert "128 of 128 attempted, 8 of 8 cases complete" in run1
    assert "audit ok" in run1 and "declaration: none" in run1
    assert "  prepared c/prepared: v1, no run" in lines


def test_runs_of_the_same_request_bytes_are_compared_request_by_request(root: Path) -> None:
    a = read_entry(root / "a" / "run1", "a/run1")
    b = read_entry(root / "a" / "run2", "a/run2")
    other = read_entry(root / "b" / "run", "b/run")
    # run2 is faulty: of its 64 attempts, the ones answered at all are compared.
    shared = [k for k in b.answers if k in a.answers]
    same = sum(a.answers[k] == b.answers[k] for k in shared)
    # Another simulator mode answered run2: the same materials elsewhere, not a reproduction.
    assert kind_of(a, b) == REPLICATION and kind_of(a, a) == REPRODUCTION
    assert agreement(a, b) == (
        f"{REPLICATION}: {same} of {len(shared)} shared outcomes identical; decisions "
        f"{'agree' if a.decision == b.decision else 'differ'} ({a.decision}; {b.decision})"
    )
    assert 0 < same < len(shared)  # faulty answers differ from perfect ones, some agree
    assert agreement(a, other) is None  # another model: no request bytes in common
    text = "\n".join(registry_lines(collect(root)))
    assert f"same request bytes, a/run1 and a/run2: {agreement(a, b)}" in text


def test_a_damaged_run_is_listed_with_its_reason_and_the_command_exits_1(
    root: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "evidence"
    shutil.copytree(root, copy)
    (copy / "b" / "run" / "run.json").write_text("{", encoding="utf-8")
    code, out, err = run_cli(["registry", str(copy)])
    assert code == 1 and not err
    assert "  run b/run: unreadable: " in out and "broken JSON" in out
    code, out, _ = run_cli(["registry", str(root)])
    assert code == 0


def test_a_run_that_fails_its_audit_exits_1(root: Path, tmp_path: Path) -> None:
    copy = tmp_path / "evidence"
    shutil.copytree(root, copy)
    (copy / "a" / "run1" / "journal.head.json").unlink()
    code, out, _ = run_cli(["registry", str(copy)])
    assert code == 1 and "audit FAILED" in out


def _git(cwd: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def test_history_lists_a_run_committed_once_and_gone(root: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(root, repo / "evidence")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "runs")
    shutil.rmtree(repo / "evidence" / "a" / "run2")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "drop run2")
    code, out, _ = run_cli(["registry", str(repo / "evidence"), "--history"])
    assert code == 0, out
    assert "history: 1 deleted run journal(s) under" in out
    [line] = [x for x in out.splitlines() if "IN HISTORY ONLY" in x]
    # The faulty simulation stopped after two failures in a row: its decision, as analyze says.
    assert ":a/run2 (SIMULATION): v1, 42 of 128 attempted, 0 of 8 cases complete" in line
    assert "; not evaluable; audit ok; declaration: none" in line
    # The other run of its request bytes is compared with it, too.
    assert "same request bytes, a/run1 and " in out
    # Restored into the tree (another folder), it is no longer "in history only".
    shutil.copytree(root / "a" / "run2", repo / "evidence" / "a" / "run2-restored")
    code, out, _ = run_cli(["registry", str(repo / "evidence"), "--history"])
    assert "IN HISTORY ONLY" not in out and "run a/run2-restored" in out


def test_history_outside_git_is_one_line(root: Path) -> None:
    code, _, err = run_cli(["registry", str(root), "--history"])
    assert code == 2 and len(err.splitlines()) == 1 and "git" in err


def test_a_reproduction_is_the_same_bytes_to_the_same_model_and_server() -> None:
    from needlepoint.study.registry import RunEntry, server_identity

    local = {"local_server": {"server": {"package": "llama-cpp-python", "version": "0.3.36"},
                              "gguf": {"sha256": "a5" * 32}, "n_ctx": 4096}}  # fmt: skip
    here = server_identity("http://127.0.0.1:54515/v1", local)
    assert here == server_identity("http://127.0.0.1:35851/v1", local)  # a new port, same server
    assert here == "local llama-cpp-python 0.3.36, model file a5a5a5a5a5a5, n_ctx 4096"
    assert server_identity("https://api.example/v1", {}) == "https://api.example/v1"
    assert server_identity(None, {}) == ""
    a = RunEntry("a", False, model="m", server=here)
    assert kind_of(a, RunEntry("b", False, model="m", server=here)) == REPRODUCTION
    assert kind_of(a, RunEntry("b", False, model="m", server="https://api.example/v1")) == (
        REPLICATION
    )
    assert kind_of(a, RunEntry("b", False, model="other", server=here)) == REPLICATION
    assert kind_of(RunEntry("a", False, model="m"), RunEntry("b", False, model="m")) == (
        REPLICATION  # an unknown server is never taken for the same one
    )
