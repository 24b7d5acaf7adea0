"""What `analyze` and `compare` add from the study record: the declaration chain with its times
(an amendment made after outcomes it governs flagged), and the other runs of the same design and
model on record that were not passed in."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fuzz import run_cli

from needlepoint.analysis.document import analyze_run
from needlepoint.compare.document import compare_runs
from needlepoint.design.prepared import prepare
from needlepoint.run.options import RunOptions
from needlepoint.run.runner import run_protocol
from needlepoint.study.declare import declare, evidence_root


def _run(prepared: Path, run: Path, declaration: Path | None = None, **params) -> None:
    options = RunOptions(
        allow=128,
        simulate="position",
        sim_params=params or None,
        progress="off",
        fsync=False,
        declaration=None if declaration is None else str(declaration),
    )
    run_protocol(prepared, run, options)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A declared run, an amendment made after its outcomes, and an undeclared second run."""
    base = tmp_path_factory.mktemp("record") / "evidence"
    prepare(base / "prepared")
    plan = base.parent / "plan.md"
    plan.write_text("# Plan\n\nOne run.\n", encoding="utf-8")
    declare(plan, base / "declaration.json", base)
    _run(base / "prepared", base / "run", base / "declaration.json")
    declare(plan, base / "amendment.json", base, amends=base / "declaration.json")
    _run(base / "prepared", base / "again", p_middle=0.5)
    return base


def test_analyze_shows_the_chain_flags_the_amendment_and_names_the_other_run(
    root: Path, tmp_path: Path
) -> None:
    out = tmp_path / "analysis"
    code, text, err = run_cli(["analyze", str(root / "run"), "--no-figures", "--out", str(out)])
    assert code == 0, err
    assert "Declaration chain of `run` (oldest first):" in text  # no machine path
    lines = text.splitlines()
    first = next(x for x in lines if x.startswith("- declaration "))
    amendment = next(x for x in lines if x.startswith("- amendment "))
    assert "**the run was started under this one**" in first
    assert "FLAG: made after outcomes it governs" in amendment and "`run` 128" in amendment
    assert "Also on record under `evidence` (same design and model, not passed in):" in text
    again = next(x for x in lines if x.startswith("- `again`"))
    assert "(v1, 128 of 128 attempted):" in again
    summary = (out / "summary.md").read_text("utf-8")
    assert "## The study record" in summary and "FLAG: made after outcomes" in summary
    assert again in summary


def test_the_library_analysis_shows_the_declaration_only_when_there_is_one(root: Path) -> None:
    declared = analyze_run(root / "run", root.parent / "a1", figures=False)
    summary = (declared.out_dir / "summary.md").read_text("utf-8")
    assert "## The study record" in summary
    assert "- declaration `../evidence/declaration.json`" in summary
    plain = analyze_run(root / "again", root.parent / "a2", figures=False)
    assert "## The study record" not in (plain.out_dir / "summary.md").read_text("utf-8")


def test_compare_shows_each_chain_and_the_runs_not_passed_in(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    code, text, err = run_cli(
        ["compare", str(root / "run"), str(root / "again"), "--no-figures", "--out", str(out)]
    )
    assert code == 0, err
    assert "FLAG: made after outcomes it governs" in text
    md = (out / "comparison.md").read_text("utf-8")
    assert "was started without a declaration" in md and "FLAG" in md
    assert "no other run of this design and model" in md
    # Without the root, compare_runs writes only the chains of declared runs.
    lib = compare_runs([root / "run", root / "again"], tmp_path / "lib", figures=False)
    md = (lib.out_dir / "comparison.md").read_text("utf-8")
    assert "Declaration chain of `../../" in md and "Also on record" not in md


def test_the_evidence_root_is_the_nearest_folder_named_evidence(root: Path, tmp_path: Path) -> None:
    assert evidence_root(None, root / "run" / "analysis").resolve() == root.resolve()
    assert evidence_root(None, tmp_path) is None
    assert evidence_root(str(tmp_path), root) == tmp_path
    code, _, err = run_cli(["analyze", str(root / "run"), "--evidence-root", str(tmp_path / "x")])
    assert code == 2 and "--evidence-root" in err and "no such folder" in err
