"""A declaration binds the code (commit, clean flag, constraints.txt) and says where it was
published; `audit-run` flags a run whose sessions ran other code than the declaration bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from needlepoint.cli import main
from needlepoint.design.prepared import prepare
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import file_sha256
from needlepoint.run.audit import audit_run
from needlepoint.run.declaration import CodeRef, current_code, published_place, read_declaration
from needlepoint.run.options import RunOptions
from needlepoint.run.runner import run_protocol
from needlepoint.study.declare import declaration_summary, declare, publishable_line

REPO = Path(__file__).resolve().parents[2]


def _plan(root: Path) -> Path:
    plan = root / "plan.md"
    plan.write_text("# Plan\n\nOne run.\n", encoding="utf-8")
    return plan


def test_current_code_is_this_checkout() -> None:
    code = current_code()
    assert code.constraints_sha256 == file_sha256(REPO / "constraints.txt")
    if (REPO / ".git").exists():
        assert code.commit is not None and len(code.commit) in (40, 64)
        assert code.tree_clean in (True, False)


def test_a_declaration_binds_the_code_and_prints_a_line_to_publish(tmp_path: Path) -> None:
    d = declare(_plan(tmp_path), tmp_path / "d.json", tmp_path, published="https://osf.io/abcde")
    assert d.record.code == current_code()
    assert d.record.published == "https://osf.io/abcde"
    lines = declaration_summary(d, "lab")
    assert any(line.startswith("code: commit ") for line in lines)
    assert "published at https://osf.io/abcde" in lines
    assert "this machine's clock proves nothing to anyone else" in lines[-2]
    assert lines[-1] == publishable_line(d)
    assert lines[-1].startswith(f"needlepoint declaration sha256:{d.sha256} plan sha256:")
    # Read back with its new fields; the bytes are canonical.
    assert read_declaration(tmp_path / "d.json").record == d.record


def test_a_simulated_declaration_binds_no_code_and_keeps_its_old_keys(tmp_path: Path) -> None:
    d = declare(_plan(tmp_path), tmp_path / "d.json", tmp_path, simulated=True)
    assert d.record.code is None and d.record.published is None
    keys = json.loads((tmp_path / "d.json").read_text(encoding="utf-8"))
    assert "code" not in keys and "published" not in keys
    assert not any("proves nothing to anyone else" in line for line in declaration_summary(d, "x"))


@pytest.mark.parametrize("bad", ["", "not a url", "https://x\n", "x" * 2001, "\x00"])
def test_a_published_place_must_be_one_url(bad: str) -> None:
    with pytest.raises(NeedlepointError):
        published_place(bad)


def test_the_command_refuses_a_bad_place_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(
        ["declare", str(_plan(tmp_path)), "--out", str(tmp_path / "d.json"),
         "--evidence-root", str(tmp_path), "--published", "nowhere"]
    )  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and "is not a URL" in err[0]
    assert not (tmp_path / "d.json").exists()


def test_code_differences_in_words() -> None:
    bound = CodeRef("a" * 40, True, "c" * 64)
    assert bound.differs_from(bound) == []
    assert bound.differs_from(CodeRef("b" * 40, True, "c" * 64)) == [
        f"commit {'b' * 12}, not the declared {'a' * 12}"
    ]
    assert bound.differs_from(CodeRef(None, False, "d" * 64)) == [
        "its tracked files were modified",
        f"constraints.txt {'d' * 12}, not the declared {'c' * 12}",
    ]


@pytest.fixture
def declared_run(tmp_path: Path) -> Path:
    prepare(tmp_path / "prepared")
    declare(_plan(tmp_path), tmp_path / "d.json", tmp_path)
    options = RunOptions(
        allow=128, simulate="position", progress="off", fsync=False,
        declaration=str(tmp_path / "d.json"),
    )  # fmt: skip
    run_protocol(tmp_path / "prepared", tmp_path / "run", options)
    return tmp_path / "run"


def _rewrite(run: Path, **code: object) -> None:
    path = run / "provenance.jsonl"
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    start = next(x for x in lines if x.get("event") == "session_start")
    start["code"] = {**start["code"], **code}
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


def test_audit_run_passes_the_declared_code_and_flags_a_changed_commit(declared_run: Path) -> None:
    # The session ran what was declared, from a clean tree (a developer's checkout may not be).
    _rewrite(declared_run, tree_clean=True)
    report = audit_run(declared_run)
    assert report.ok and report.checked.get("code as declared") == 1, report.lines()
    assert not any("other code" in w for w in report.warnings)
    declared_commit = read_declaration(declared_run.parent / "d.json").record.code.commit
    _rewrite(declared_run, commit="f" * 40)
    report = audit_run(declared_run)
    flagged = [w for w in report.warnings if "ran other code than declared" in w]
    if declared_commit is None:  # outside a git checkout there is no commit to compare
        assert not flagged
        return
    assert flagged == [
        f"declaration ../d.json: session 1 ran other code than declared: commit ffffffffffff, "
        f"not the declared {declared_commit[:12]} (git cannot compare the two commits here)"
    ]
    assert any(
        line.startswith("WARNING declaration ../d.json: session 1") for line in report.lines()
    )


@pytest.mark.parametrize(
    ("changed", "note"),
    [
        ([], " (lib, pyproject.toml, constraints.txt identical in the two commits)"),
        (["lib/needlepoint/run/runner.py"], " (1 code file(s) differ between the two commits: "
         "lib/needlepoint/run/runner.py)"),
        ([f"lib/m{i}.py" for i in range(7)], " (7 code file(s) differ between the two commits: "
         "lib/m0.py, lib/m1.py, lib/m2.py, lib/m3.py, lib/m4.py and 2 more)"),
    ],
)  # fmt: skip
def test_a_changed_commit_says_whether_the_code_changed(
    declared_run: Path, monkeypatch: pytest.MonkeyPatch, changed: list[str], note: str
) -> None:
    """A commit that only adds evidence (the declaration itself) runs the same library: git
    says which code files differ, if any, so a reader can tell the two apart."""
    from needlepoint.run import folder

    if read_declaration(declared_run.parent / "d.json").record.code.commit is None:
        pytest.skip("outside a git checkout there is no commit to compare")
    monkeypatch.setattr(folder, "code_changes", lambda old, new: changed)
    _rewrite(declared_run, commit="e" * 40, tree_clean=True)
    flagged = [w for w in audit_run(declared_run).warnings if "ran other code" in w]
    assert len(flagged) == 1 and flagged[0].endswith(note), flagged


def test_only_a_hex_commit_reaches_git() -> None:
    """The commits come from files in a run folder: an option-like value never reaches git."""
    from needlepoint.run.folder import code_changes

    assert code_changes("--output=/tmp/x", "f" * 40) is None
    assert code_changes("f" * 40, "HEAD; rm -rf /") is None


def test_a_hostile_provenance_file_is_skipped_never_read_whole(declared_run: Path) -> None:
    from needlepoint.run.declaration import session_code
    from needlepoint.run.folder import MAX_PROVENANCE_BYTES

    path = declared_run / "provenance.jsonl"
    path.write_text("[" * 100_000 + "\n{not json\n" + json.dumps({"code": "x"}) + "\n")
    assert session_code(declared_run) == []  # nothing readable: nothing compared
    report = audit_run(declared_run)
    assert report.ok and any("provenance.jsonl records none" in w for w in report.warnings)
    with path.open("wb") as f:
        f.truncate(MAX_PROVENANCE_BYTES + 1)
    assert session_code(declared_run) == []
