"""The audit passes the reference set and is independent of the generator."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import needlepoint
from needlepoint.cli import main
from needlepoint.design.audit import audit_prepared

FORBIDDEN = {
    "needlepoint.design.generate",
    "needlepoint.design.prepared",
    "needlepoint.design.protocol",
    "needlepoint.design.profiles",
    "needlepoint.design.positions",
}


@pytest.mark.parametrize(
    "module", ["design/audit/__init__.py", "design/audit/positions.py", "design/schema.py"]
)
def test_audit_imports_nothing_from_the_generator(module: str) -> None:
    # The audit, and the documented shapes it checks every file against first.
    tree = ast.parse((Path(needlepoint.__file__).parent / module).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
            imported |= {f"{node.module}.{a.name}" for a in node.names}
    assert not imported & FORBIDDEN, imported & FORBIDDEN


def test_reference_set_passes_every_check(reference_dir: Path) -> None:
    report = audit_prepared(reference_dir)
    assert report.ok
    counts = {c.name: c.count for c in report.checks}
    assert len(counts) >= 20 and all(counts.values())
    assert counts["near_slots"] == 16 * 2 * 6 and counts["case_shuffle"] == 32


def test_audit_cli_prints_every_check(
    reference_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", str(reference_dir)]) == 0
    out = capsys.readouterr().out
    assert "audit OK: 20 checks" in out
    for name in ("near_slots", "equal_length", "case_shuffle", "body_keys"):
        assert name in out


@pytest.mark.parametrize("condition", ["", "X", "b"])
def test_a_plan_row_with_an_unknown_condition_is_a_finding(
    prepared_copy: Path, condition: str
) -> None:
    # Found by the fuzz test: the target's position is looked up by condition, and an unknown
    # one must fail the audit with the seq and the value, not end it with a KeyError.
    plan = prepared_copy / "plan.csv"
    lines = plan.read_text(encoding="utf-8").split("\n")
    cells = lines[1].split(",")
    cells[6] = condition
    lines[1] = ",".join(cells)
    plan.write_text("\n".join(lines), encoding="utf-8")
    report = audit_prepared(prepared_copy)
    assert not report.ok
    failed = {c.name: c for c in report.checks if not c.ok}
    assert f"seq 1: plan condition {condition!r} is not B, M, A or E" in (
        failed["shared_background"].failures
    )
