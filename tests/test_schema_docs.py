"""docs/schema.md states every field of every record, in order: the page and the code agree.

Each `### \\`Name\\` (\\`module\\`)` heading is followed by a table whose first column lists the
fields; this test reads them back and compares them with the dataclass (or column tuple).
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

import pytest

from needlepoint.analysis import record
from needlepoint.compare import record as compare_record
from needlepoint.pilot import calibrate
from needlepoint.pilot import record as pilot_record
from needlepoint.run import declaration, records, sweep

DOC = Path(__file__).resolve().parents[1] / "docs" / "schema.md"
HEADING = re.compile(r"^### `(\w+)` \(`([\w.]+)`\)")
ROW = re.compile(r"^\| `(\w+)` \|")


def documented() -> dict[tuple[str, str], list[str]]:
    """(name, module) -> the fields its table lists, in order."""
    out: dict[tuple[str, str], list[str]] = {}
    current: list[str] | None = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        heading = HEADING.match(line)
        if heading:
            current = out.setdefault((heading[1], heading[2]), [])
        elif line.startswith("#"):
            current = None
        elif current is not None and (row := ROW.match(line)):
            current.append(row[1])
    return out


DOCUMENTED = documented()


def fields_of(name: str, module: str) -> list[str]:
    obj = getattr(importlib.import_module(module), name)
    if dataclasses.is_dataclass(obj):
        return [f.name for f in dataclasses.fields(obj)]
    assert isinstance(obj, tuple), f"{module}.{name} is neither a dataclass nor a column tuple"
    return list(obj)


@pytest.mark.parametrize("key", sorted(DOCUMENTED), ids=lambda k: k[0])
def test_documented_fields_equal_the_record(key: tuple[str, str]) -> None:
    name, module = key
    assert DOCUMENTED[key], f"{name}: no field table under its heading"
    assert DOCUMENTED[key] == fields_of(name, module)


def test_every_record_is_documented() -> None:
    names = {name for name, _ in DOCUMENTED}
    modules = (record, records, compare_record, sweep, declaration)
    for module in (*modules, pilot_record, calibrate):
        found = {
            n
            for n, obj in vars(module).items()
            if dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__
        }
        # Decision's fields are documented as the first six of Primary (checked below);
        # PlannedRun is a SweepRun with its folders resolved, in memory only, never written;
        # Declared is a declaration file read back (its path, SHA-256 and record). Limits are
        # the first eight fields of SessionRecord; a SweepRun is documented by its keys
        # (SWEEP_KEYS). The rest live in memory only: what the journal's fold keeps of a line
        # (the lines themselves: runner.md), a sweep's ends and progress, an audit's findings,
        # and a Calibration: its CalibrationRecord beside the new protocol, each written alone.
        in_memory = {"Decision", "PlannedRun", "Declared", "Limits", "SweepRun", "Calibration"}
        in_memory |= {"AttemptRecord", "StopRecord", "OutcomeSummary", "DeclarationFindings"}
        in_memory |= {"RunEnd", "SweepSummary", "JournalTail"}
        assert found - in_memory <= names, found - names
    required = {"RunOptions", "PositionParams", "PowerModel", "PowerStudy", "POWER_COLUMNS"}
    required |= {"CalibrationOptions"}
    assert required <= names
    assert len(DOCUMENTED) == len(names), "a record is documented twice"


def test_primary_starts_with_the_decision_fields() -> None:
    decision = [f.name for f in dataclasses.fields(record.Decision)]
    assert fields_of("Primary", "needlepoint.analysis.record")[: len(decision)] == decision


def test_the_versions_stated_are_the_ones_written() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert f'`"{record.ANALYSIS_FORMAT}"`, `{record.ANALYSIS_VERSION}`' in text
    assert f"| `run.json` | `format` | `{records.RUN_FORMAT}` |" in text
    comparison = f'`"{compare_record.COMPARISON_FORMAT}"`, `{compare_record.COMPARISON_VERSION}`'
    assert comparison in text
    assert f'`"{sweep.SWEEP_FORMAT}"`, `{sweep.SWEEP_VERSION}`' in text
    pilot = f'`"{pilot_record.PILOT_FORMAT}"`, `{pilot_record.PILOT_VERSION}`'
    calibration = f'`"{calibrate.CALIBRATION_FORMAT}"`, `{calibrate.CALIBRATION_VERSION}`'
    assert pilot in text and calibration in text


def test_the_power_row_has_the_power_columns() -> None:
    from needlepoint.analysis.power import POWER_COLUMNS

    assert fields_of("PowerRow", "needlepoint.pilot.calibrate") == list(POWER_COLUMNS)


def test_architecture_links_the_schema_page() -> None:
    assert "schema.md" in (DOC.parent / "architecture.md").read_text(encoding="utf-8")
