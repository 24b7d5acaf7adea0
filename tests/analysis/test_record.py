"""analysis.json through its one serialiser and its one reader: exact bytes, strict reading."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from support.results import make_input, middle_loss

from needlepoint.analysis.document import analyze, build_document
from needlepoint.analysis.inputs import from_run
from needlepoint.analysis.record import (
    ANALYSIS_VERSION,
    AnalysisDocument,
    from_json,
    read_document,
    to_json,
)
from needlepoint.analysis.report import record_lines, summary_markdown
from needlepoint.design.prepared import Prepared
from needlepoint.errors import NeedlepointError

EVIDENCE = Path(__file__).resolve().parents[2] / "evidence"
COMMITTED = ["20261130-simulated-reference", "20261130-local-smollm2"]


@pytest.mark.parametrize("folder", COMMITTED)
def test_committed_evidence_reads_back_to_the_same_bytes(folder: str) -> None:
    data = (EVIDENCE / folder / "analysis" / "analysis.json").read_bytes()
    doc = from_json(data)
    assert isinstance(doc, AnalysisDocument)
    assert to_json(doc) == data
    assert from_json(to_json(doc)) == doc


@pytest.mark.parametrize("folder", COMMITTED)
def test_the_analysis_rebuilds_the_committed_document(folder: str) -> None:
    root = EVIDENCE / folder
    doc = build_document(from_run(root / "run", root / "prepared"))
    assert to_json(doc) == (root / "analysis" / "analysis.json").read_bytes()
    assert doc == read_document(root / "analysis" / "analysis.json")
    # The study record's lines, the run named as the notebook that wrote it names it.
    record = record_lines([root / "run"], root / "analysis", shown=["run"])
    summary = (root / "analysis" / "summary.md").read_text("utf-8")
    assert summary_markdown(doc, record) == summary


@pytest.mark.parametrize(
    "spec",
    [
        None,  # ceiling, exact bootstrap
        middle_loss({"S1": ("high",), "S2": ("high",)}),
        lambda p: "unexecuted",  # not evaluable: no interval, every row exploratory
        lambda p: "failure:finish_reason" if p.condition == "M" else "error:bad_format",
    ],
)
def test_round_trip_of_built_documents(prepared: Prepared, spec) -> None:
    doc = build_document(make_input(prepared, spec))
    assert from_json(to_json(doc)) == doc
    assert to_json(from_json(to_json(doc))) == to_json(doc)


def test_written_file_is_the_serialised_document(tmp_path: Path, prepared: Prepared) -> None:
    result = analyze(make_input(prepared), tmp_path, figures=False)
    assert (tmp_path / "analysis.json").read_bytes() == to_json(result.document)
    assert result.document.figures == {}
    assert read_document(tmp_path / "analysis.json") == result.document


def _plain(prepared: Prepared) -> dict:
    return json.loads(to_json(build_document(make_input(prepared))))


@pytest.mark.parametrize("version", [0, 1, 3, "2", None])
def test_another_version_is_refused_in_one_line(prepared: Prepared, version) -> None:
    value = _plain(prepared) | {"version": version}
    with pytest.raises(NeedlepointError) as err:
        from_json(json.dumps(value), "old/analysis.json")
    message = str(err.value)
    assert "\n" not in message
    assert message == (
        f"old/analysis.json: needlepoint-analysis version {version!r} is not supported "
        f"(this needlepoint reads version {ANALYSIS_VERSION})"
    )


def test_another_format_is_refused(prepared: Prepared) -> None:
    value = _plain(prepared) | {"format": "needlepoint-comparison"}
    with pytest.raises(NeedlepointError, match="format 'needlepoint-comparison' is not"):
        from_json(json.dumps(value))
    with pytest.raises(NeedlepointError, match="format None is not"):
        from_json("[1, 2]")
    with pytest.raises(NeedlepointError, match=r"analysis\.json:1: broken JSON"):
        from_json(b"{")


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda d: d["primary"].pop("decision"), "field primary.decision: missing"),
        (lambda d: d["primary"].update(verdict="x"), "field primary.verdict: unknown field"),
        (lambda d: d["primary"].update(complete_cases="8"), "complete_cases: expected int"),
        (lambda d: d["primary"].update(complete_cases=True), "complete_cases: expected int"),
        (
            lambda d: d["primary"].update(threshold=None),
            "field primary.threshold: expected float, got None",
        ),
        (lambda d: d.update(simulation=1), "field simulation: expected bool"),
        (lambda d: d.update(caveats="none"), "field caveats: expected a list"),
        (
            lambda d: d["primary"]["interval"]["distribution"][0].update(weight=0.5),
            r"primary\.interval\.distribution\[0\]\.weight: expected int",
        ),
        (
            lambda d: d["secondary"]["order_balance"]["strata"][0].pop("length"),
            r"strata\[0\]\.length: missing",
        ),
        (
            lambda d: d["secondary"]["order_balance"]["valid_by_position"][0].update(x=1),
            "position keys must be numbers",
        ),
        (lambda d: d["protocol"].update(fingerprint=1), "field protocol.fingerprint: expected"),
        (lambda d: d["protocol"].update(model=1), "field protocol.model: expected"),
        (lambda d: d["run"].update(source=None), "field run.source: expected"),
        (lambda d: d["run"].update(unverified=1), "field run.unverified: expected"),
    ],
)
def test_malformed_fields_are_refused_by_name(prepared: Prepared, edit, message: str) -> None:
    value = _plain(prepared)
    edit(value)
    with pytest.raises(NeedlepointError, match=message) as err:
        from_json(json.dumps(value))
    assert str(err.value).startswith("analysis.json: field ")


def test_read_document_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(NeedlepointError, match=r"missing\.json: file not found"):
        read_document(tmp_path / "missing.json")


def test_the_document_is_frozen(prepared: Prepared) -> None:
    doc = build_document(make_input(prepared))
    with pytest.raises(dataclasses.FrozenInstanceError):
        doc.primary.decision = "supported"  # type: ignore[misc]


def test_the_protocols_analysis_block_is_named_when_malformed() -> None:
    from needlepoint.analysis.record import AnalysisParameters
    from needlepoint.design.protocol import reference_protocol

    protocol = reference_protocol()
    del protocol["analysis"]["confidence"]
    with pytest.raises(NeedlepointError, match=r"protocol analysis\.confidence: missing"):
        AnalysisParameters.of(protocol)


@pytest.mark.parametrize("later", ["design_fingerprint", "model", "body_profile"])
def test_fields_added_later_read_as_none_and_are_written_back_absent(later: str) -> None:
    from needlepoint.analysis.record import ProtocolRef, RunRef

    full = {"id": "p", "version": 1, "fingerprint": "f", "design_fingerprint": "d", "model": "m",
            "body_profile": "chat"}  # fmt: skip
    older = {k: v for k, v in full.items() if k != later}
    ref = ProtocolRef.from_plain(older, "protocol")
    assert getattr(ref, later) is None
    assert ref.to_plain() == older
    assert ProtocolRef.from_plain(full, "protocol").to_plain() == full
    run = RunRef.from_plain({"journal_sha256": None, "source": "s"}, "run")
    assert run.unverified is None and run.to_plain() == {"journal_sha256": None, "source": "s"}
    marked = {"journal_sha256": None, "source": "s", "unverified": "why"}
    assert RunRef.from_plain(marked, "run").to_plain() == marked


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"1": 3}, "rows[0].condition: missing"),
        ({"condition": "A", "x": 1}, "rows[0]: position keys must be numbers, got ['x']"),
        ({"condition": 3, "1": 2}, "rows[0].condition: expected str, got 3"),
        ({"condition": "A", "1": "x"}, "rows[0].1: expected int, got 'x'"),
    ],
)
def test_a_malformed_position_row_is_refused_in_one_line_naming_where(
    value: dict, message: str
) -> None:
    """analysis.json's valid-by-position rows keep their positions as keys beside the condition,
    so the reader checks them by hand: each refusal names the row and the field."""
    from needlepoint.analysis.record import PositionRow

    with pytest.raises(NeedlepointError) as info:
        PositionRow.from_plain(value, "rows[0]")
    assert str(info.value) == message
    row = {"condition": "A", "1": 2, "2": 0}
    assert PositionRow.from_plain(row, "rows[0]").to_plain() == row
