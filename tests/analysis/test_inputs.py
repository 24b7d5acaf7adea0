"""analysis/inputs.py at its own interface: every message in full, every rule at its edge.

A message is pinned whole (``==``, not a search), so a changed word, an extra prefix or a lost
field name is noticed; the rules are tried on both sides of each boundary.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
from support.results import JOURNAL, make_input, make_prepared, make_rows, write_csv

from needlepoint.analysis.context import run_context
from needlepoint.analysis.inputs import (
    RESULT_COLUMNS,
    UNVERIFIED_TABLE,
    Outcome,
    from_results_csv,
    refuse_pooling,
    validate_rows,
)
from needlepoint.design.prepared import Prepared
from needlepoint.errors import NeedlepointError

STATUSES = "('correct', 'error', 'protocol_failure', 'unexecuted')"
PLAN = "does not match the prepared plan"
POOLED = "simulated and live rows are never pooled"
UNEXECUTED = "unexecuted requests must be listed as unexecuted"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    return make_prepared(tmp_path_factory)


def refused(prepared: Prepared, rows: list[dict[str, str]], name: str = "t.csv") -> str:
    with pytest.raises(NeedlepointError) as info:
        validate_rows(list(enumerate(rows, start=2)), prepared, name)
    return str(info.value)


def edited(prepared: Prepared, index: int, **fields: str) -> list[dict[str, str]]:
    rows = make_rows(prepared)
    rows[index].update(fields)
    return rows


@pytest.mark.parametrize(
    ("index", "fields", "message"),
    [
        (4, {"status": "maybe"}, f"t.csv:6: field status: 'maybe' is not one of {STATUSES}"),
        (2, {"seq": "999"}, "t.csv:4: field seq: 999 is not in the prepared plan"),
        (9, {"seq": "abc"}, "t.csv:11: field seq: not an integer: 'abc'"),
        (3, {"seq": "1"}, "t.csv:5: field seq: 1 repeats line 2"),
        (
            1,
            {"case": "S9"},
            f"t.csv:3: field case: 'S9' {PLAN} ('S4'); wrong prepared folder or another protocol?",
        ),
        (1, {"order": "x"}, f"t.csv:3: field order: 'x' {PLAN} ('B-M-A-E'); wrong prepared "
         "folder or another protocol?"),
        (1, {"block": "9"}, f"t.csv:3: field block: '9' {PLAN} (1); wrong prepared folder or "
         "another protocol?"),
        (5, {"kind": "near_distractor_code"},
         "t.csv:7: field kind: 'near_distractor_code' is not allowed with status correct"),
        (6, {"status": "error", "kind": ""},
         "t.csv:8: field kind: '' is not allowed with status error"),
        (6, {"status": "protocol_failure", "kind": "absent_code"},
         "t.csv:8: field kind: 'absent_code' is not allowed with status protocol_failure"),
        (6, {"status": "unexecuted", "kind": "x"},
         "t.csv:8: field kind: 'x' is not allowed with status unexecuted"),
        (6, {"status": "error", "kind": "absent_code"},
         "t.csv:8: field status: recorded error/absent_code but the response text scores as "
         "correct/-"),
        (6, {"response_text": "no idea"},
         "t.csv:8: field status: recorded correct/- but the response text scores as "
         "error/bad_format"),
        (7, {"latency_s": "-1"}, "t.csv:9: field latency_s: must be finite and >= 0, got '-1'"),
        (7, {"latency_s": "x"}, "t.csv:9: field latency_s: not a number: 'x'"),
        (7, {"cost": "nan"}, "t.csv:9: field cost: must be finite and >= 0, got 'nan'"),
        (7, {"cost": "-inf"}, "t.csv:9: field cost: must be finite and >= 0, got '-inf'"),
        (7, {"prompt_tokens": "1.5"}, "t.csv:9: field prompt_tokens: not a number: '1.5'"),
        (7, {"completion_tokens": "-1"},
         "t.csv:9: field completion_tokens: must be finite and >= 0, got '-1'"),
        (7, {"reasoning_tokens": "1e3"}, "t.csv:9: field reasoning_tokens: not a number: '1e3'"),
        (7, {"http_status": "2x"}, "t.csv:9: field http_status: not a number: '2x'"),
        (2, {"simulation": "yes"}, "t.csv:4: field simulation: must be true or false"),
        (2, {"simulation": "True"}, "t.csv:4: field simulation: must be true or false"),
        (12, {"simulation": "false"},
         f"t.csv:14: field simulation: false but line 2 says true; {POOLED}"),
        (12, {"journal_sha256": "cd" * 32},
         "t.csv:14: field journal_sha256: differs from line 2; rows of different runs are never "
         "pooled"),
        (12, {"journal_sha256": ""},
         "t.csv:14: field journal_sha256: differs from line 2; rows of different runs are never "
         "pooled"),
        (0, {"journal_sha256": "xyz"}, "t.csv:2: field journal_sha256: not a SHA-256 hex digest"),
    ],
)  # fmt: skip
def test_each_refusal_names_file_line_and_field_in_full(
    prepared: Prepared, index: int, fields: dict[str, str], message: str
) -> None:
    assert refused(prepared, edited(prepared, index, **fields)) == message


RESPONSE_FIELDS = ["response_text", "http_status", "prompt_tokens", "completion_tokens",
                   "reasoning_tokens", "latency_s"]  # fmt: skip


@pytest.mark.parametrize("field", RESPONSE_FIELDS)
def test_an_unexecuted_row_may_record_no_response_at_all(prepared: Prepared, field: str) -> None:
    rows = make_rows(prepared, {9: "unexecuted"})
    validate_rows(list(enumerate(rows, start=2)), prepared, "t.csv")  # empty fields: fine
    rows[8][field] = "1"
    assert refused(prepared, rows) == (
        "t.csv:10: field status: unexecuted but a response is recorded"
    )


def test_a_missing_field_is_named(prepared: Prepared) -> None:
    for column in RESULT_COLUMNS:
        rows = make_rows(prepared)
        del rows[3][column]
        assert refused(prepared, rows) == f"t.csv:5: field {column}: missing"


@pytest.mark.parametrize(
    ("dropped", "message"),
    [
        ([10], f"t.csv: field seq: planned seq 11 has no row (1 missing); {UNEXECUTED}"),
        ([20, 10], f"t.csv: field seq: planned seq 11 has no row (2 missing); {UNEXECUTED}"),
    ],
)
def test_every_planned_seq_needs_a_row(
    prepared: Prepared, dropped: list[int], message: str
) -> None:
    rows = make_rows(prepared)
    for i in dropped:
        rows.pop(i)
    assert refused(prepared, rows) == message


def test_an_empty_plan_and_table_is_no_rows(prepared: Prepared) -> None:
    empty = dataclasses.replace(prepared, plan=())
    assert refused(empty, []) == "t.csv: no rows"


@pytest.mark.parametrize("digest", ["AB" * 32, "a" * 63, "a" * 65, "g" * 64])
def test_a_journal_digest_is_64_lowercase_hex_or_nothing(prepared: Prepared, digest: str) -> None:
    assert refused(prepared, make_rows(prepared, journal=digest)) == (
        "t.csv:2: field journal_sha256: not a SHA-256 hex digest"
    )


def test_what_validation_returns(prepared: Prepared) -> None:
    rows = make_rows(prepared, {2: "error:near_distractor_code", 6: "unexecuted"})
    rows[0]["response_text"] = f"The code is {prepared.answer_key[1]['expected']}."
    rows[0].update(status="error", kind="extra_text")
    rows[6].update(latency_s="", cost="", prompt_tokens="0", completion_tokens="", http_status="")
    order = list(enumerate(rows, start=2))
    random.Random(5).shuffle(order)
    outcomes, simulation, journal = validate_rows(order, prepared, "t.csv")
    assert [o.seq for o in outcomes] == [p.seq for p in prepared.plan]
    assert (simulation, journal) == (True, JOURNAL)
    first, second, sixth, seventh = outcomes[0], outcomes[1], outcomes[5], outcomes[6]
    assert (first.status, first.kind, first.lenient) == ("error", "extra_text", True)
    assert (second.status, second.kind, second.lenient) == ("error", "near_distractor_code", False)
    assert (sixth.status, sixth.http_status, sixth.latency_s) == ("unexecuted", None, None)
    assert (seventh.prompt_tokens, seventh.cost, seventh.http_status) == (0, None, None)
    assert outcomes[3] == Outcome(
        seq=4, block=1, pair=1, case="S4", length=60, similarity="low", condition="E",
        order="B-M-A-E", status="correct", kind="", http_status=200, latency_s=1.04,
        prompt_tokens=1500, completion_tokens=4, reasoning_tokens=None, cost=0.00004, lenient=True,
    )  # fmt: skip
    live = validate_rows(list(enumerate(make_rows(prepared, simulation=False, journal=""), 2)),
                         prepared, "t.csv")  # fmt: skip
    assert live[1:] == (False, None)


def test_the_protocols_unknown_token_is_the_one_scored(prepared: Prepared) -> None:
    # "NONE" where a code is expected: a false unknown under a protocol whose token it is.
    other = dataclasses.replace(prepared, protocol={**prepared.protocol, "unknown": "NONE"})
    rows = make_rows(other)
    rows[0].update(status="error", kind="false_unknown", response_text="NONE")
    validate_rows(list(enumerate(rows, start=2)), other, "t.csv")
    assert refused(prepared, rows) == (
        "t.csv:2: field status: recorded error/false_unknown but the response text scores as "
        "error/bad_format"
    )


@pytest.mark.parametrize(
    ("status", "kind", "valid", "category"),
    [
        ("correct", "", True, "valid"),
        ("error", "bad_format", True, "valid"),
        ("protocol_failure", "indeterminate_timeout", False, "indeterminate"),
        ("protocol_failure", "http_status", False, "protocol_failure"),
        ("unexecuted", "", False, "unexecuted"),
    ],
)
def test_validity_and_category(status: str, kind: str, valid: bool, category: str) -> None:
    o = Outcome(1, 1, 1, "S1", 60, "low", "B", "B-M-A-E", status, kind,
                None, None, None, None, None, None)  # fmt: skip
    assert (o.valid, o.category, o.lenient) == (valid, category, False)


def test_a_results_table_is_read_and_marked_unverified(tmp_path: Path, prepared: Prepared) -> None:
    path = write_csv(tmp_path / "results.csv", make_rows(prepared))
    inp = from_results_csv(path, prepared.root)
    assert (inp.protocol, inp.fingerprint) == (prepared.protocol, prepared.fingerprint)
    assert (inp.simulation, inp.journal_sha256, inp.source) == (True, JOURNAL, "results table")
    assert (
        inp.unverified
        == UNVERIFIED_TABLE
        == (
            "its rows and simulation flag come from a results table and were not verified against "
            "a run journal"
        )
    )
    assert len(inp.outcomes) == len(prepared.plan)
    # A table has no journal: no endpoint, dates or sessions, but the prompt size per length
    # (which the headline names) still comes from the prepared folder.
    assert inp.context == run_context(prepared, inp.outcomes, None)
    assert inp.context.sessions is None and inp.context.endpoint_host is None
    assert [size.length for size in inp.context.lengths] == sorted(
        {p.length for p in prepared.plan}
    )


def test_pooling_is_refused_with_the_whole_reason(prepared: Prepared) -> None:
    sim, live = make_input(prepared), make_input(prepared, simulation=False)
    other = dataclasses.replace(sim, fingerprint="f" * 64)
    cases = [
        ([sim, other], "b.csv: protocol fingerprint ffffffffffff differs from a.csv "
         f"({sim.fingerprint[:12]}); runs of different protocols are never pooled"),
        ([live, sim], "b.csv: simulated and live runs are never pooled (a.csv is live)"),
        ([sim, live], "b.csv: simulated and live runs are never pooled (a.csv is simulated)"),
        ([sim, sim],
         "b.csv: the preregistered analysis covers one run; analyse each run on its own"),
        ([sim, sim, other], "c.csv: protocol fingerprint ffffffffffff differs from a.csv "
         f"({sim.fingerprint[:12]}); runs of different protocols are never pooled"),
    ]  # fmt: skip
    for inputs, message in cases:
        with pytest.raises(NeedlepointError) as info:
            refuse_pooling(inputs, ["a.csv", "b.csv", "c.csv"][: len(inputs)])
        assert str(info.value) == message
    refuse_pooling([sim], ["a.csv"])
    refuse_pooling([], [])


def test_pooling_needs_a_name_for_every_input(prepared: Prepared) -> None:
    sim = make_input(prepared)
    with pytest.raises(ValueError, match="zip"):
        refuse_pooling([sim, sim], ["a.csv"])


@pytest.fixture(scope="module")
def simulated_run(tmp_path_factory: pytest.TempPathFactory, prepared: Prepared) -> Path:
    from needlepoint import cli

    run_dir = tmp_path_factory.mktemp("run") / "run"
    argv = ["run", str(prepared.root), "--allow", "128", "--run-dir", str(run_dir)]
    assert cli.main([*argv, "--simulate", "perfect", "--no-progress"]) == 0
    return run_dir


def test_a_run_is_read_from_its_journal_with_the_prepared_folder_given(
    tmp_path: Path, prepared: Prepared, simulated_run: Path
) -> None:
    import shutil

    from needlepoint.analysis.inputs import from_run

    inp = from_run(simulated_run)
    assert (inp.source, inp.simulation, inp.unverified) == ("run journal", True, None)
    assert len(inp.journal_sha256 or "") == 64 and len(inp.outcomes) == 128
    # A prepared folder given explicitly is the one read, not the one run.json names.
    moved = Path(shutil.copytree(prepared.root, tmp_path / "moved"))
    assert from_run(simulated_run, moved).outcomes == inp.outcomes
    shutil.rmtree(moved)
    with pytest.raises(NeedlepointError) as info:
        from_run(simulated_run, moved)
    assert str(info.value).startswith(f"{moved}: ")


def test_a_main_run_is_not_a_pilot(simulated_run: Path) -> None:
    from needlepoint.analysis.inputs import from_run

    with pytest.raises(NeedlepointError) as info:
        from_run(simulated_run, pilot=True)
    assert (
        str(info.value)
        == f"{simulated_run}: is not a pilot (run.json extra.pilot does not mark one)"
    )


def test_a_re_chained_journal_row_is_named_by_its_line_in_the_re_derived_table(
    tmp_path: Path, simulated_run: Path
) -> None:
    import json
    import shutil

    from support.mutations import rechain

    from needlepoint.analysis.inputs import from_run

    run = Path(shutil.copytree(simulated_run, tmp_path / "run"))
    journal = run / "journal.jsonl"
    records = [json.loads(line) for line in journal.read_text("utf-8").splitlines()]
    seventh = [r for r in records if r["type"] == "outcome"][6]
    seventh["classification"] |= {"status": "error", "kind": "bad_format"}
    journal.write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
    rechain(journal)
    with pytest.raises(NeedlepointError) as info:
        from_run(run)
    assert str(info.value) == (
        f"run/results (re-derived from the journal):{seventh['seq'] + 1}: field status: recorded "
        "error/bad_format but the response text scores as correct/-"
    )


def test_a_pilots_prepared_folder_is_never_read_as_a_main_run(
    tmp_path: Path, prepared: Prepared
) -> None:
    from needlepoint.design.prepared import prepare_protocol

    protocol = {**prepared.protocol, "version": 2, "rationale": {"kind": "pilot"}}
    folder = prepare_protocol(tmp_path / "pilot", protocol)
    rows = make_rows(dataclasses.replace(prepared, root=folder))
    with pytest.raises(NeedlepointError) as info:
        from_results_csv(write_csv(tmp_path / "results.csv", rows), folder)
    assert str(info.value) == (
        f"{folder}: is a pilot (its protocol's rationale says so): pilots run on held-out "
        "materials to calibrate a design and are never analysed as a main run; use needlepoint "
        "calibrate"
    )


def test_a_journal_digest_holds_lowercase_hex_digits_only(prepared: Prepared) -> None:
    rows = make_rows(prepared)[:1]
    one = dataclasses.replace(prepared, plan=prepared.plan[:1])
    for c in map(chr, range(0x20, 0x7F)):
        rows[0]["journal_sha256"] = c * 64
        if c in "0123456789abcdef":
            validate_rows([(2, rows[0])], one, "t.csv")
        else:
            assert refused(one, rows).endswith("field journal_sha256: not a SHA-256 hex digest")


def test_a_protocol_without_an_unknown_token_scores_with_unknown(prepared: Prepared) -> None:
    protocol = {k: v for k, v in prepared.protocol.items() if k != "unknown"}
    bare = dataclasses.replace(prepared, protocol=protocol)
    rows = make_rows(bare)
    rows[0].update(status="error", kind="false_unknown", response_text="UNKNOWN")
    validate_rows(list(enumerate(rows, start=2)), bare, "t.csv")
