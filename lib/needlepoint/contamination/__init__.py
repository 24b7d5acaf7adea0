"""Contamination checks: was the answer already in the agent's automatic context?

Four checks (seed 004) as plain functions returning frozen dataclasses: freeze the context
(`build_manifest`), match the reference against it (`check_overlap`), compare file times with
run times (`check_timeline`), and read the tool-call counts (`check_canary`); `build_report`
combines them into a CI gate. `needlepoint contamination <check>` is the command line.
"""

from needlepoint.contamination.canary import CanaryResult, check_canary
from needlepoint.contamination.context import (
    DEFAULT_INCLUDES,
    Context,
    Manifest,
    build_manifest,
    load_context,
    read_manifest,
    write_manifest,
)
from needlepoint.contamination.fixture import FixturePaths, build_synthetic_workspace
from needlepoint.contamination.inputs import read_discards, read_reference, read_results, read_runs
from needlepoint.contamination.overlap import (
    OverlapResult,
    TimelineResult,
    check_overlap,
    check_timeline,
)
from needlepoint.contamination.report import ContaminationReport, build_report, write_report

__all__ = [
    "DEFAULT_INCLUDES",
    "CanaryResult",
    "ContaminationReport",
    "Context",
    "FixturePaths",
    "Manifest",
    "OverlapResult",
    "TimelineResult",
    "build_manifest",
    "build_report",
    "build_synthetic_workspace",
    "check_canary",
    "check_overlap",
    "check_timeline",
    "load_context",
    "read_discards",
    "read_manifest",
    "read_reference",
    "read_results",
    "read_runs",
    "write_manifest",
    "write_report",
]
