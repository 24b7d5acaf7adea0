"""Records cross module boundaries as frozen dataclasses, never as ``dict[str, Any]``.

Every public function and method in ``analysis/`` and ``run/`` is inspected: the analysis
document, the run options and settings, run.json, the session record and the power model must
appear by their record types, and a ``dict[str, Any]`` is allowed only where the value is not
one of these records (a protocol, a raw journal line, free-form metadata), each with its reason.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import typing

import pytest

import needlepoint.analysis
import needlepoint.run
from needlepoint.analysis import power, record
from needlepoint.run import options, records

# (module, qualified name, parameter or "return") -> why a plain dict is right there.
ALLOWED = {
    ("analysis.power", "design_index", "protocol"): "the protocol (design/, not this issue)",
    ("analysis.power", "simulate_answers", "protocol"): "the protocol",
    ("analysis.depth.power", "depth_model", "protocol"): "the protocol",
    ("analysis.depth.power", "depth_power_grid", "protocol"): "the protocol",
    ("analysis.power", "power_grid", "protocol"): "the protocol",
    ("analysis.power", "power_row", "return"): "one power.csv row (a pandas row)",
    ("run.runner", "prepared_fields", "return"): "RunRecord's keyword arguments, spread into it",
    ("analysis.power", "power_bytes", "protocol"): "the protocol",
    ("analysis.power", "check_size", "protocol"): "the protocol",
    ("analysis.power", "power_work", "protocol"): "the protocol",
    ("analysis.power", "decide_runs", "cache"): "a memo of resample counts",
    ("analysis.record", "AnalysisParameters.of", "protocol"): "reads the protocol's block",
    ("analysis.depth", "is_depth_design", "protocol"): "the protocol",
    ("analysis.record", "Stratum.to_plain", "return"): "the JSON codec's boundary",
    ("analysis.record", "Stratum.from_plain", "value"): "the JSON codec's boundary",
    ("analysis.record", "PositionRow.to_plain", "return"): "the JSON codec's boundary",
    ("analysis.record", "PositionRow.from_plain", "value"): "the JSON codec's boundary",
    ("analysis.depth.report", "DepthDocument.from_plain", "value"): "the JSON codec's boundary",
    ("run.interpret", "answer_of", "choice"): "one choice of a server's raw response",
    ("run.folder", "git_commit", "return"): "provenance.jsonl, not a settings record",
    ("run.folder", "code_now", "return"): "provenance.jsonl's code, not a settings record",
    ("run.folder", "machine_load", "return"): "provenance.jsonl, not a settings record",
    (
        "run.folder",
        "read_provenance",
        "return",
    ): "provenance.jsonl's free-form lines (describe, decide nothing)",
    ("run.journal", "read_line", "return"): "a raw journal line",
    ("run.records", "OutcomeSummary.of", "record"): "a raw journal line",
    ("run.transport", "Watchdog.trace", "info"): "httpcore's trace event",
    ("run.journal", "Journal.append", "return"): "a raw journal line",
    ("run.records", "decode_body", "record"): "a raw journal line",
    ("run.records", "received_fields", "answer"): "one answer-key line",
    ("run.records", "received_fields", "return"): "an outcome line's fields",
    ("run.folder", "read_context_manifest", "return"): "context_manifest.json",
    ("run.records", "check_context_manifest", "return"): "context_manifest.json",
    ("run.records", "outcome_fields", "usage"): "the server's usage object",
    ("run.records", "outcome_fields", "return"): "an outcome line's fields",
    ("run.records", "interrupted_fields", "return"): "an outcome line's fields",
    ("run.journal", "JournalState.of", "records"): "raw journal lines",
    ("run.journal", "JournalState.add", "record"): "a raw journal line",
    ("run.runner", "Session.append", "return"): "a raw journal line",
    ("run.runner", "Session.received", "return"): "an outcome line's fields",
    ("run.journal", "JournalState.timeline", "return"): "a journal's lines without their bodies",
    ("run.records", "AttemptRecord.of", "record"): "a raw journal line",
    ("run.records", "AttemptRecord.sent", "return"): "an entry of context_manifest.json's sent",
    ("run.records", "StopRecord.of", "record"): "a raw journal line",
    ("run.records", "Limits.limits", "return"): "the Limits fields as keyword arguments",
    ("run.sweep", "SweepRun.from_plain", "value"): "the JSON codec's boundary",
    ("analysis.inputs", "run_context", "records"): "raw journal lines",
    ("analysis.secondary", "rate_of", "return"): "rate fields, spread into a record that has them",
    ("analysis.inputs", "sessions_by_seq", "records"): "raw journal lines",
}


def _public_callables() -> list[tuple[str, str, typing.Any]]:
    out = []
    for pkg in (needlepoint.analysis, needlepoint.run):
        # walk_packages: a subpackage's modules too (analysis/depth/)
        for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{pkg.__name__}."):
            module = importlib.import_module(info.name)
            short = module.__name__.removeprefix("needlepoint.")
            for name, obj in vars(module).items():
                if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                    continue
                if inspect.isfunction(obj):
                    out.append((short, name, obj))
                elif inspect.isclass(obj):
                    for attr, member in vars(obj).items():
                        func = getattr(member, "__func__", member)
                        if inspect.isfunction(func) and not attr.startswith("_"):
                            out.append((short, f"{name}.{attr}", func))
    return out


CALLABLES = _public_callables()


def test_the_scan_sees_the_record_handlers() -> None:
    names = {(m, q) for m, q, _ in CALLABLES}
    assert {
        ("analysis.document", "build_document"),
        ("analysis.report", "summary_markdown"),
        ("run.options", "check_settings"),
        ("run.runner", "run_protocol"),
        ("analysis.power", "sensitivity_lines"),
    } <= names


def test_no_plain_dict_crosses_a_boundary_unless_allowed() -> None:
    found = set()
    for module, qualname, func in CALLABLES:
        for param, annotation in func.__annotations__.items():
            text = str(annotation)
            if "dict[str, Any]" in text or "dict[Any, Any]" in text:
                found.add((module, qualname, param))
    unexpected = sorted(found - set(ALLOWED))
    assert not unexpected, f"dict[str, Any] where a record belongs: {unexpected}"
    # The allowlist shrinks with the code: an entry that no longer applies must go.
    assert not sorted(set(ALLOWED) - found), "stale ALLOWED entries"


def _hints(func: typing.Any) -> dict[str, typing.Any]:
    # Some modules import Settings only for type checking, to keep import time down.
    return typing.get_type_hints(func, localns={"Settings": options.Settings})


@pytest.mark.parametrize(
    "func,param,expected",
    [
        ("analysis.document.build_document", "return", record.AnalysisDocument),
        ("analysis.record.to_json", "doc", record.AnalysisDocument),
        ("analysis.record.from_json", "return", record.AnalysisDocument),
        ("analysis.record.read_document", "return", record.AnalysisDocument),
        ("analysis.report.summary_markdown", "doc", record.AnalysisDocument),
        ("analysis.document.write_figures", "doc", record.AnalysisDocument),
        ("analysis.figures.forest_plot", "primary", record.Primary),
        ("analysis.figures.bootstrap_plot", "primary", record.Primary),
        ("analysis.primary.decide", "params", record.AnalysisParameters),
        ("analysis.primary.decide", "return", record.Decision),
        ("analysis.secondary.secondary", "return", record.Secondary),
        ("analysis.power.decide_runs", "params", record.AnalysisParameters),
        ("analysis.power.power_grid", "model", power.PowerModel | None),
        ("analysis.power.power_grid", "study", power.PowerStudy | None),
        ("analysis.power.sensitivity_lines", "model", power.PowerModel | None),
        ("analysis.power.sensitivity_lines", "study", power.PowerStudy | None),
        ("run.options.check_settings", "options", options.RunOptions),
        ("run.options.check_settings", "return", options.Settings),
        ("run.runner.run_protocol", "options", options.RunOptions),
        ("run.runner.build_run_record", "return", records.RunRecord),
        ("run.folder.write_run_record", "record", records.RunRecord),
        ("run.folder.read_run_record", "return", records.RunRecord),
        ("run.folder.check_resume", "saved", records.RunRecord),
        ("run.results.load_frozen_plan", "run", records.RunRecord),
    ],
)
def test_record_handlers_name_their_record_types(func: str, param: str, expected: type) -> None:
    module, _, name = func.rpartition(".")
    target = getattr(importlib.import_module(f"needlepoint.{module}"), name)
    assert _hints(target)[param] == expected


@pytest.mark.parametrize(
    "cls",
    [
        *(c for c in vars(record).values() if dataclasses.is_dataclass(c)),
        *(c for c in vars(records).values() if dataclasses.is_dataclass(c)),
        options.RunOptions,
        options.Settings,
        power.PowerModel,
        power.PowerStudy,
    ],
    ids=lambda c: c.__name__,
)
def test_records_are_frozen(cls: type) -> None:
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
