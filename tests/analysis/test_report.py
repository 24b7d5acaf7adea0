"""What the reader is told, one function at a time, at each function's interface.

summary.md has one builder: `needlepoint analyze` and the analysis notebook write the same
bytes for the same run (the study record passes its lines down; where the command finds no
evidence root it says so on the terminal and writes what the notebook writes).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.results import make_input

from needlepoint.analysis.document import build_document
from needlepoint.analysis.primary import NOT_EVALUABLE, NOT_SUPPORTED
from needlepoint.analysis.record import Contrast, Effect, LengthSize, ShapeRow
from needlepoint.analysis.report import (
    contrast_text,
    diagnostic_lines,
    effect_rows,
    facts_line,
    interval_text,
    lengths_line,
    p_text,
    q1_lines,
    q2_lines,
    q2_reading,
    record_lines,
    shape_lines,
    size_text,
    study_record_section,
    summary_markdown,
)
from needlepoint.cli import main
from needlepoint.design.prepared import prepare
from needlepoint.run.options import RunOptions
from needlepoint.run.runner import run_protocol
from needlepoint.study.declare import NOT_SEARCHED, declare


def _effect(**fields: object) -> Effect:
    base = dict(
        measure="middle_loss", similarity="low", length=None, condition=None, cases=2,
        estimate=0.5, estimate_exact="1/2", lower=0.25, upper=0.75,
        lower_exact="1/4", upper_exact="3/4",
    )  # fmt: skip
    return Effect(**{**base, **fields})  # type: ignore[arg-type]


def test_rows_leave_the_exact_fractions_to_analysis_json() -> None:
    with_exact, without, none = effect_rows(
        [
            _effect(),
            _effect(estimate_exact=None, lower=None, upper=None, cases=1, condition="B"),
            _effect(estimate=None, estimate_exact=None, lower=None, upper=None, cases=0),
        ]
    )
    assert with_exact == ["middle_loss", "low", "all", 2, "0.5", "[0.25, 0.75]"]
    assert without == ["B", "low", "all", 1, "0.5", "—"]
    assert none == ["middle_loss", "low", "all", 0, "—", "—"]


def test_interval_text_at_each_case() -> None:
    dash = _effect(estimate=None, estimate_exact=None, lower=None, upper=None, cases=0)
    one_sided = _effect(upper=None)  # an interval needs both ends
    assert interval_text(dash) == "—"
    assert interval_text(one_sided) == "0.5 (one case: no interval)"
    assert interval_text(_effect()) == "0.5 [0.25, 0.75]"


def test_size_text_shows_the_spread_only_when_lengths_vary() -> None:
    varied = LengthSize(12, "tokens", "usage", 8, 309, 316.0, 322)
    same = LengthSize(24, "characters", "prompt text", 8, 600, 600.5, 600)
    assert size_text(varied) == "12 records ≈ 316 tokens (309–322)"
    assert size_text(same) == "24 records ≈ 600.5 characters"


def _primary(decision: str, estimate: float | None, lower: float | None) -> SimpleNamespace:
    interval = None if lower is None else SimpleNamespace(lower=lower)
    return SimpleNamespace(
        decision=decision, estimate=estimate, interval=interval, threshold=0.1, reason="R"
    )


def test_q2_reading_at_each_edge_of_the_rule() -> None:
    few = "too few complete cases to answer (R)"
    assert q2_reading(_primary(NOT_EVALUABLE, 0.5, 0.2)) == few
    assert q2_reading(_primary(NOT_SUPPORTED, None, 0.2)) == few
    assert q2_reading(_primary(NOT_SUPPORTED, 0.05, None)) == few
    below = (
        "the added (B + E)/2 − M, 0.05, is below the threshold 0.1 and the interval reaches 0: "
        "the data do not show that near-duplicate names add to it"
    )
    assert q2_reading(_primary(NOT_SUPPORTED, 0.05, 0.0)) == below  # lower exactly 0
    reaches = (
        "near-duplicate names add about 0.1 in these cases, but the interval reaches 0: "
        "the rule does not support a real added loss"
    )
    assert q2_reading(_primary(NOT_SUPPORTED, 0.1, 0.0)) == reaches  # estimate at the threshold
    above = "the added loss is above 0, but 0.05 is below the threshold 0.1"
    assert q2_reading(_primary(NOT_SUPPORTED, 0.05, 0.5)) == above


def _doc(simulation: bool, host: str | None, sessions: int | None, fp: str | None) -> object:
    context = SimpleNamespace(
        endpoint_host=host, sessions=sessions, first_date="2026-12-01", last_date="2026-12-03"
    )
    protocol = SimpleNamespace(model="m-1", body_profile="chat", design_fingerprint=fp)
    return SimpleNamespace(protocol=protocol, context=context, simulation=simulation)


def test_facts_line_at_each_case_of_host_sessions_and_fingerprint() -> None:
    fp = "0123456789abcdef"
    assert facts_line(_doc(False, "api.example", 2, fp)) == (
        "model m-1 (chat profile), endpoint api.example, run 2026-12-01 to 2026-12-03, "
        "2 sessions; design 0123456789ab"
    )
    # A live run whose journal kept no host says so; only a simulation has none by design.
    assert facts_line(_doc(False, None, 1, None)) == (
        "model m-1 (chat profile), endpoint not recorded, run 2026-12-01 to 2026-12-03, "
        "1 session; design unknown"
    )
    assert facts_line(_doc(True, None, None, fp)) == (
        "model m-1 (chat profile), endpoint none: simulated, run 2026-12-01 to 2026-12-03; "
        "design 0123456789ab"
    )
    assert facts_line(_doc(True, "api.example", 0, fp)).startswith(
        "model m-1 (chat profile), endpoint api.example, run 2026-12-01 to 2026-12-03, 0 sessions;"
    )


def test_lengths_line_names_every_source_once_in_order() -> None:
    sizes = [
        SimpleNamespace(length=4, median=100, unit="tokens", minimum=100, maximum=100, source="b"),
        SimpleNamespace(length=8, median=200, unit="tokens", minimum=190, maximum=210, source="a"),
        SimpleNamespace(length=12, median=300, unit="tokens", minimum=300, maximum=300, source="b"),
    ]
    assert lengths_line(SimpleNamespace(lengths=sizes)) == (
        "lengths: 4 records ≈ 100 tokens; 8 records ≈ 200 tokens (190–210); "
        "12 records ≈ 300 tokens (a, b)"
    )
    assert lengths_line(SimpleNamespace(lengths=[])) is None


def _q1_doc(shapes: object, lengths: tuple[int, ...] = (4,)) -> SimpleNamespace:
    rows = [
        _effect(measure="middle loss", similarity="mixed", length=4),
        _effect(measure="middle loss", similarity="low", length=4),
        _effect(measure="by position", similarity="high", length=4),
        _effect(measure="middle loss", similarity="high", length=4),
    ]
    return SimpleNamespace(
        effects=SimpleNamespace(measures=rows, cases=2, shapes=shapes),
        parameters=SimpleNamespace(confidence=0.95),
        context=SimpleNamespace(lengths=[]),
        secondary=SimpleNamespace(accuracy=[SimpleNamespace(length=n) for n in lengths]),
    )


def test_q1_lines_without_a_shape_verdict_give_numbers_and_no_words() -> None:
    """An analysis.json written before shape verdicts: the composite alone never gets words."""
    lines = q1_lines(_q1_doc(None, lengths=(4, 8)))
    assert lines[0] == (
        "Q1, what shape is the position curve? (descriptive, not preregistered: (B + E)/2 − M "
        "over the 2 complete cases, 95% case-cluster intervals; no shape verdict: this "
        "analysis.json predates it, run `analyze` again)"
    )
    # With two lengths each line names its own (a single length would read the same either way).
    assert lines[1:] == [
        "  low similarity, 4 records: middle loss 0.5 [0.25, 0.75]",
        "  high similarity, 4 records: middle loss 0.5 [0.25, 0.75]",
    ]


def _contrast(name: str, estimate: float, lower: float, upper: float, p: float) -> Contrast:
    return Contrast(name, 4, estimate, None, lower, upper, p, None, p, 0)


def test_q1_lines_read_the_shape_with_both_contrasts_and_the_composite() -> None:
    row = ShapeRow(
        "high", 4, _contrast("B − M", 0.5, 0.25, 0.75, 0.0), _contrast("E − M", -0.1, -0.2, 0, 1),
        {"B": "8/8", "M": "4/8", "E": "3/8"}, "decline with position", "why",
    )  # fmt: skip
    # A row whose similarity and length have no composite gets no "middle loss" tail.
    bare = replace(row, length=8)
    shapes = SimpleNamespace(
        method="Holm across the 2 contrasts", rows=[row, bare], disagreements=["D"]
    )
    lines = q1_lines(_q1_doc(shapes, lengths=(4, 8)))
    assert lines[0] == (
        "Q1, what shape is the position curve? (descriptive, not preregistered: B − M and E − M "
        "over the 2 complete cases, 95% case-cluster intervals; a U-shape needs both contrasts "
        "above 0 (intersection-union), each judged by Holm across the 2 contrasts)"
    )
    assert lines[1:] == [
        "  high similarity, 4 records: decline with position (B 8/8, M 4/8, E 3/8): why; no "
        "U-shape. B − M 0.5 [0.25, 0.75] (Holm p < 0.0001), E − M -0.1 [-0.2, 0] (Holm p 1); "
        "middle loss 0.5 [0.25, 0.75]",
        "  high similarity, 8 records: decline with position (B 8/8, M 4/8, E 3/8): why; no "
        "U-shape. B − M 0.5 [0.25, 0.75] (Holm p < 0.0001), E − M -0.1 [-0.2, 0] (Holm p 1)",
        "  Note: D.",
    ]


def test_p_and_contrast_text_at_each_case() -> None:
    assert p_text(None) == "—" and p_text(0.0) == "< 0.0001" and p_text(0.01234) == "0.01234"
    c = _contrast("E − M", 0.25, 0.0, 0.5, 0.5)
    assert contrast_text(c) == "E − M 0.25 [0, 0.5] (Holm p 0.5)"
    assert contrast_text(replace(c, lower=None)) == "E − M 0.25 (one case: no interval)"
    assert contrast_text(replace(c, estimate=None)) == "E − M —"


def test_q2_lines_show_no_value_without_both_estimate_and_interval() -> None:
    for estimate, interval in ((0.2, None), (None, SimpleNamespace(lower=0.0))):
        p = SimpleNamespace(
            decision=NOT_EVALUABLE, estimate=estimate, interval=interval, threshold=0.1, reason="R"
        )
        assert q2_lines(SimpleNamespace(primary=p))[1] == (
            "  —: NOT EVALUABLE. Too few complete cases to answer (R)."
        )


# === summary.md has one builder: the command and the notebook write the same bytes ===========

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "04-analysis.ipynb"


@pytest.fixture(scope="module")
def declared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A declared simulated run, with its prepared folder, where no evidence root holds it."""
    root = tmp_path_factory.mktemp("lab")
    prepare(root / "prepared")
    plan = root / "plan.md"
    plan.write_text("# Plan\n\nOne run.\n", encoding="utf-8")
    declare(plan, root / "declaration.json", root)
    options = RunOptions(
        allow=128,
        simulate="position",
        progress="off",
        fsync=False,
        declaration=str(root / "declaration.json"),
    )
    run_protocol(root / "prepared", root / "run", options)
    return root


def _written(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_the_command_and_the_notebook_write_the_same_files_for_the_same_run(
    declared: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(declared)
    monkeypatch.delenv("NEEDLEPOINT_OUTPUT_ROOT", raising=False)
    assert main(["analyze", "run", "--out", "analysis"]) == 0
    assert capsys.readouterr().out.splitlines()[-2] == NOT_SEARCHED  # said, never written
    by_command = _written(declared / "analysis")
    shutil.rmtree(declared / "analysis")
    # The notebook's own code: its parameters cell, then the cell that analyses the run.
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    assert "analyze_run(" in code[1]
    namespace: dict[str, object] = {}
    for source in code[:2]:
        exec(source, namespace)
    by_notebook = _written(declared / "analysis")
    summary = by_command["summary.md"].decode("utf-8")
    assert "## The study record\n\nDeclaration chain of `run` (oldest first):" in summary
    assert "- declaration `../declaration.json`" in summary
    assert set(by_notebook) == set(by_command) and "analysis.json" in by_command
    assert by_notebook == by_command


def test_without_a_declaration_the_study_record_section_is_left_out(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{}", encoding="utf-8")
    assert record_lines([run], tmp_path) == []
    assert record_lines([run], tmp_path, shown=["r"], undeclared=True) == [
        "`r` was started without a declaration."
    ]
    other = tmp_path / "other"
    other.mkdir()
    (other / "run.json").write_text("{}", encoding="utf-8")
    # Two runs' lines are kept apart by one blank line, and nothing trails the last.
    assert record_lines([run, other], tmp_path, shown=["r", "o"], undeclared=True) == [
        "`r` was started without a declaration.",
        "",
        "`o` was started without a declaration.",
    ]
    assert study_record_section([]) == []
    assert study_record_section(["x"]) == ["## The study record", "", "x", ""]


def test_the_shape_table_shows_both_contrasts_their_holm_p_and_the_verdict() -> None:
    first, last = _contrast("B − M", 0.5, 0.25, 0.75, 0.0), _contrast("E − M", -0.1, -0.2, 0, 1)
    counts = {"B": "8/8", "M": "4/8", "E": "3/8"}
    row = ShapeRow("high", None, first, last, counts, "decline with position", "why")
    one = replace(row, length=4, first=replace(row.first, lower=None, upper=None))
    shapes = SimpleNamespace(method="Holm across the 4 contrasts", rows=[row, one])
    lines = shape_lines(shapes)
    assert lines[0] == "### The shape of the position curve (Q1)"
    assert "Holm across the 4 contrasts; the unadjusted p" in lines[2]
    assert lines[6] == (
        "| high | all | 8/8, 4/8, 3/8 | 0.5 [0.25, 0.75] | < 0.0001 | -0.1 [-0.2, 0] | 1 | "
        "decline with position |"
    )
    assert lines[7].startswith("| high | 4 | 8/8, 4/8, 3/8 | 0.5 | < 0.0001 |")
    # an interval with either bound unknown is no interval: the estimate alone
    for half in ({"lower": None}, {"upper": None}):
        lone = replace(row, first=replace(row.first, **half))
        drawn = shape_lines(SimpleNamespace(method="Holm", rows=[lone]))
        assert drawn[6].startswith("| high | all | 8/8, 4/8, 3/8 | 0.5 | < 0.0001 |")
    assert shape_lines(None) == []


def test_diagnostics_say_when_no_answer_was_wrong_and_set_their_notes_apart(prepared) -> None:
    doc = build_document(make_input(prepared, lambda p: "correct"))
    lines = diagnostic_lines(doc)
    at = lines.index("### Wrong answers (B, M, E) by what they name")
    assert lines[at + 2 : at + 4] == ["No wrong answer at B, M or E.", ""]
    # a results table records no sessions: the note says so, and a blank line ends the list
    note = "- no sessions: a results table records none (analyse the run folder)"
    assert lines[-2:] == [note, ""]
    quiet = replace(doc, diagnostics=replace(doc.diagnostics, notes=()))
    assert diagnostic_lines(quiet) == lines[:-2]  # the last table's own blank line ends it


def test_a_cell_without_a_valid_response_reads_so_in_the_secondary_tables(prepared) -> None:
    spec = lambda p: "unexecuted" if (p.condition, p.similarity) == ("B", "low") else "correct"  # noqa: E731
    md = summary_markdown(build_document(make_input(prepared, spec)))
    table = md.split("### Accuracy (correct / protocol-valid)\n\n")[1].split("\n\n")[0]
    rows = table.splitlines()
    assert rows[2:4] == [
        "| low | 60 | B | no valid response | 8 |",
        "| low | 60 | M | 8/8 (100%) | 0 |",
    ]
    assert rows[6] == "| low | 240 | B | no valid response | 8 |"


def test_a_rate_without_an_accuracy_is_no_valid_response_whatever_the_count() -> None:
    from needlepoint.analysis.record import RefusalRow
    from needlepoint.analysis.report import _rate

    assert _rate(RefusalRow("overall", "all", 0, 0, None, 3)) == "no valid response"
    assert _rate(RefusalRow("overall", "all", 2, 0, None, 0)) == "no valid response"
    assert _rate(RefusalRow("overall", "all", 0, 0, 0.0, 3)) == "no valid response"
    assert _rate(RefusalRow("overall", "all", 4, 3, 0.75, 0)) == "3/4 (75%)"


def test_a_run_without_a_journal_or_a_caveat_says_so(prepared) -> None:
    doc = build_document(make_input(prepared, lambda p: "correct", journal=""))
    md = summary_markdown(replace(doc, caveats=()))
    assert "\n- run fingerprint (journal): `none recorded`\n" in md
    assert md.split("### Caveats\n\n")[1].split("\n\n")[0] == "No caveat applies."


def _usage_lines(md: str) -> list[str]:
    return [line for line in md.splitlines() if line.startswith("- ") and ": total " in line]


def test_reasoning_tokens_are_listed_only_where_the_server_reported_some(prepared) -> None:
    from needlepoint.analysis.record import Total

    doc = build_document(make_input(prepared, lambda p: "correct"))
    sec = doc.secondary
    luc = sec.latency_usage_cost

    def with_reasoning(total: Total | None) -> str:
        changed = replace(luc, reasoning_tokens=total)
        return summary_markdown(replace(doc, secondary=replace(sec, latency_usage_cost=changed)))

    fields = [line.split(":")[0] for line in _usage_lines(with_reasoning(None))]
    assert fields == ["- prompt_tokens", "- completion_tokens", "- cost"]
    assert _usage_lines(with_reasoning(Total(0, 64, 0.0, None))) == _usage_lines(
        with_reasoning(None)
    )
    lines = _usage_lines(with_reasoning(Total(3, 1, 42.0, None)))
    assert lines[2] == "- reasoning_tokens: total unknown (at least 42); 3 known, 1 unknown"
    assert [line.split(":")[0] for line in lines] == [*fields[:2], "- reasoning_tokens", "- cost"]


def test_a_share_of_near_names_is_shown_only_among_wrong_codes(prepared) -> None:
    doc = build_document(make_input(prepared, lambda p: "correct"))
    sec = doc.secondary
    row = replace(sec.errors[0], wrong_code=0, near_distractor=0, near_distractor_share=0.5)
    md = summary_markdown(replace(doc, secondary=replace(sec, errors=(row, *sec.errors[1:]))))
    table = md.split("### Errors by condition and similarity\n\n")[1].split("\n\n")[0]
    assert (
        table.splitlines()[2]
        == f"| {row.condition} | {row.similarity} | {row.valid} | 0 | 0 | 0 | — |"
    )


def test_an_exclusion_without_a_kind_shows_a_dash(prepared) -> None:
    spec = lambda p: "unexecuted" if p.seq == 1 else "correct"  # noqa: E731
    md = summary_markdown(build_document(make_input(prepared, spec)))
    rows = [line for line in md.splitlines() if line.startswith("| 1 | ")]
    assert rows and rows[0].endswith(" | unexecuted | — |")


def test_a_cell_escapes_a_pipe_so_the_table_keeps_its_columns() -> None:
    from needlepoint.analysis.report import cell

    assert cell("a|b") == "a\\|b" and cell("||") == "\\|\\|"
    assert (cell(None), cell(0.123456), cell(7)) == ("—", "0.1235", "7")


def test_record_lines_refuse_names_that_do_not_match_the_runs(tmp_path: Path) -> None:
    run = tmp_path / "r"
    run.mkdir()
    (run / "run.json").write_text("{}", encoding="utf-8")
    assert record_lines([run], tmp_path, shown=["r"]) == []
    with pytest.raises(ValueError, match="zip"):
        record_lines([run], tmp_path, shown=["r", "extra"])
