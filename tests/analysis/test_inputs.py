"""analysis/inputs.py at its own interface: every message in full, every rule at its edge.

A message is pinned whole (``==``, not a search), so a changed word, an extra prefix or a lost
field name is noticed; the rules are tried on both sides of each boundary.

The run's context: which wrong answers name a near name, which source a prompt size comes from
(and every reason a token-count file is passed over: it must belong to these materials, else
the endpoint's usage counts, else the characters), and the endpoint (by its host alone), dates
and sessions a journal gives. A stand-in prepared folder holds only what the context reads
(root, fingerprint, plan, bodies), so each rule is checked on numbers small enough to work out
by hand; the committed Gemma run checks the same against a real journal and tokenizer.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support.mutations import rechain
from support.results import JOURNAL, make_input, make_rows, write_csv

from needlepoint.analysis.inputs import (
    CHARACTERS,
    RESULT_COLUMNS,
    SIMULATED_USAGE,
    TOKENIZER,
    UNVERIFIED_TABLE,
    USAGE,
    Outcome,
    from_results_csv,
    length_sizes,
    near_kind,
    refuse_pooling,
    run_context,
    sessions_by_seq,
    validate_rows,
)
from needlepoint.design.prepared import Prepared, load_prepared
from needlepoint.errors import NeedlepointError

# === validation ===


STATUSES = "('correct', 'error', 'protocol_failure', 'unexecuted')"
PLAN = "does not match the prepared plan"
POOLED = "simulated and live rows are never pooled"
UNEXECUTED = "unexecuted requests must be listed as unexecuted"


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


def test_a_number_of_40_characters_is_read_and_one_of_41_is_refused_unparsed(
    prepared: Prepared,
) -> None:
    # No number inside any limit needs more than 40 characters, so longer text is refused
    # before int() or float() sees it (a 4,000-digit int() is slow).
    rows = edited(prepared, 7, latency_s="0" * 38 + ".5")
    outcomes, _, _ = validate_rows(list(enumerate(rows, start=2)), prepared, "t.csv")
    assert next(o for o in outcomes if o.seq == int(rows[7]["seq"])).latency_s == 0.5
    # A number exactly at its limit is read (the limit is the largest allowed, not the first
    # refused).
    rows = edited(prepared, 7, latency_s="172800")
    outcomes, _, _ = validate_rows(list(enumerate(rows, start=2)), prepared, "t.csv")
    assert next(o for o in outcomes if o.seq == int(rows[7]["seq"])).latency_s == 2 * 86_400
    assert refused(prepared, edited(prepared, 7, prompt_tokens="0" * 40 + "1")) == (
        "t.csv:9: field prompt_tokens: 41 characters, not a number from 0 to 9.0072e+15"
    )


def test_a_wrong_code_is_placed_before_or_after_the_target_only_with_near_codes() -> None:
    from needlepoint.analysis.inputs import near_side

    row = {"status": "error", "response_text": " QX-2001 "}
    answer = {"near_before": 1, "near_codes": ["AB-1000", "QX-2001"]}
    assert near_side(row, answer) == "after"
    assert near_side(row, {**answer, "near_before": 2}) == "before"
    # An answer key without near codes (a design with no near names) places nothing.
    assert near_side(row, {"near_before": 1}) is None
    assert near_side({**row, "status": "correct"}, answer) is None


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
    assert inp.context == run_context(prepared, inp.outcomes, None, simulation=True)
    # A simulated run's token counts are the simulator's, never "reported by the endpoint".
    assert {size.source for size in inp.context.lengths} == {SIMULATED_USAGE}
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


# === what was run where and when ===


FINGERPRINT = "f" * 64
# Two lengths, two requests each; the bodies' texts are 3 + 4 and 10 + 20 characters long.
LENGTH_OF_SEQ = {1: 60, 2: 60, 3: 240, 4: 240}
BODIES = {
    1: {"messages": [{"role": "system", "content": "abc"}, {"role": "user", "content": "defg"}]},
    2: {"prompt": "abc"},
    3: {"prompt": "x" * 10},
    4: {"messages": [{"role": "user", "content": "y" * 20}]},
}
GOOD = [
    {"seq": 1, "length": 60, "prompt_tokens": 10},
    {"seq": 2, "length": 60, "prompt_tokens": 30},
    {"seq": 3, "length": 240, "prompt_tokens": 101},
    {"seq": 4, "length": 240, "prompt_tokens": 100},
]


def stub_prepared(root: Path) -> Any:
    """What length_sizes reads of a prepared folder, and nothing else."""
    plan = [SimpleNamespace(seq=s, length=n) for s, n in LENGTH_OF_SEQ.items()]
    bodies = {s: json.dumps(b).encode() for s, b in BODIES.items()}
    return SimpleNamespace(root=root, fingerprint=FINGERPRINT, plan=plan, bodies=bodies)


def outcomes(tokens: dict[int, int | None]) -> list[Any]:
    """Outcomes in a deliberately unsorted order (240 first), with the given prompt tokens."""
    return [
        SimpleNamespace(length=LENGTH_OF_SEQ[s], prompt_tokens=tokens.get(s)) for s in (4, 3, 2, 1)
    ]


USAGE_TOKENS = {1: 900, 2: 902, 3: 2700, 4: 2701}


def counts_file(root: Path, data: Any) -> None:
    (root / "token_counts.json").write_text(json.dumps(data), "utf-8")


def sizes(root: Path, tokens: dict[int, int | None] = USAGE_TOKENS) -> list[tuple]:
    return [
        (s.length, s.unit, s.source, s.requests, s.minimum, s.median, s.maximum)
        for s in length_sizes(stub_prepared(root), outcomes(tokens))
    ]


BY_USAGE = [
    (60, "tokens", USAGE, 2, 900, 901.0, 902),
    (240, "tokens", USAGE, 2, 2700, 2700.5, 2701),
]


def test_token_counts_of_these_materials_give_each_lengths_size(tmp_path: Path) -> None:
    counts_file(tmp_path, {"prepared_fingerprint": FINGERPRINT, "requests": GOOD})
    assert sizes(tmp_path) == [
        (60, "tokens", TOKENIZER, 2, 10, 20.0, 30),
        (240, "tokens", TOKENIZER, 2, 100, 100.5, 101),
    ]


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ({"prepared_fingerprint": "0" * 64, "requests": GOOD}, "other materials"),
        ({"requests": GOOD}, "no fingerprint"),
        ({"prepared_fingerprint": FINGERPRINT}, "no requests"),
        ({"prepared_fingerprint": FINGERPRINT, "requests": GOOD[:2]}, "a length missing"),
        (
            {"prepared_fingerprint": FINGERPRINT, "requests": [*GOOD[:3], GOOD[3] | {"seq": 9}]},
            "a seq not in the plan",
        ),
        (
            {
                "prepared_fingerprint": FINGERPRINT,
                "requests": [*GOOD[:3], GOOD[3] | {"length": 60}],
            },
            "a seq under another length",
        ),
        (
            {
                "prepared_fingerprint": FINGERPRINT,
                "requests": [*GOOD[:3], GOOD[3] | {"prompt_tokens": True}],
            },
            "a count that is a bool",
        ),
        (
            {
                "prepared_fingerprint": FINGERPRINT,
                "requests": [*GOOD[:3], GOOD[3] | {"prompt_tokens": 100.0}],
            },
            "a count that is a float",
        ),
        (
            {"prepared_fingerprint": FINGERPRINT, "requests": [*GOOD[:3], {"seq": 4}]},
            "a request without its length",
        ),
        ({"prepared_fingerprint": FINGERPRINT, "requests": "many"}, "requests not a list"),
        ([GOOD], "not an object"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_token_counts_not_whole_or_not_ours_fall_back_to_usage(
    tmp_path: Path, data: Any, why: str
) -> None:
    counts_file(tmp_path, data)
    assert sizes(tmp_path) == BY_USAGE, why


def test_an_unreadable_token_count_file_falls_back_to_usage(tmp_path: Path) -> None:
    (tmp_path / "token_counts.json").write_bytes(b"\xff not json")
    assert sizes(tmp_path) == BY_USAGE
    (tmp_path / "token_counts.json").unlink()
    (tmp_path / "token_counts.json").mkdir()  # not a file at all
    assert sizes(tmp_path) == BY_USAGE


def test_a_token_count_file_is_read_up_to_64_mib_and_not_beyond(tmp_path: Path) -> None:
    text = json.dumps({"prepared_fingerprint": FINGERPRINT, "requests": GOOD}).encode()
    limit = 64 * 1024 * 1024  # written out: the rule, not the code's own constant
    (tmp_path / "token_counts.json").write_bytes(text + b" " * (limit - len(text)))
    assert sizes(tmp_path)[0][2] == TOKENIZER
    (tmp_path / "token_counts.json").write_bytes(text + b" " * (limit + 1 - len(text)))
    assert sizes(tmp_path) == BY_USAGE


def test_usage_is_used_only_when_every_length_has_some(tmp_path: Path) -> None:
    # One request of a length without usage still leaves usage; a length without any does not.
    assert sizes(tmp_path, USAGE_TOKENS | {2: None}) == [
        (60, "tokens", USAGE, 1, 900, 900.0, 900),
        (240, "tokens", USAGE, 2, 2700, 2700.5, 2701),
    ]
    assert sizes(tmp_path, USAGE_TOKENS | {3: None, 4: None}) == [
        (60, "characters", CHARACTERS, 2, 3, 5.0, 7),
        (240, "characters", CHARACTERS, 2, 10, 15.0, 20),
    ]


def test_a_usage_of_zero_tokens_is_a_count(tmp_path: Path) -> None:
    assert sizes(tmp_path, USAGE_TOKENS | {1: 0, 2: 0}) == [
        (60, "tokens", USAGE, 2, 0, 0.0, 0),
        BY_USAGE[1],
    ]


ANSWER = {"near_codes": ["AB-1234", "CD-5678"], "near_kinds": ["swap", "qualifier"]}


@pytest.mark.parametrize(
    ("status", "text", "answer", "kind"),
    [
        ("error", "CD-5678", ANSWER, "qualifier"),
        ("error", " \tAB-1234\n", ANSWER, "swap"),  # trimmed as the scorer trims
        ("error", "EF-9012", ANSWER, None),  # a code, but not a near name's
        ("error", "CD-5678 and more", ANSWER, None),
        ("correct", "CD-5678", ANSWER, None),  # only a wrong answer is given a kind
        ("unknown", "CD-5678", ANSWER, None),
        ("error", "CD-5678", {"near_codes": ["CD-5678"], "near_kinds": []}, None),
        ("error", "CD-5678", {}, None),
    ],
)
def test_a_wrong_answer_has_the_kind_of_the_near_name_it_gives(
    status: str, text: str, answer: dict, kind: str | None
) -> None:
    assert near_kind({"status": status, "response_text": text}, answer) == kind


def test_a_runs_dates_are_its_first_and_last_record_days(tmp_path: Path) -> None:
    records = [
        {"type": "session", "time": "2026-12-02T00:00:01Z"},
        {"type": "attempt", "time": "2026-11-30T23:59:59Z"},
        {"type": "outcome", "time": 1764633600},  # not a string: no date is read from it
        {"type": "outcome"},
        {"type": "session", "time": "2026-12-01T12:00:00Z"},
    ]
    c = run_context(
        stub_prepared(tmp_path), outcomes(USAGE_TOKENS), records, "https://h.example/v1"
    )
    assert (c.endpoint_host, c.first_date, c.last_date, c.sessions) == (
        "h.example",
        "2026-11-30",
        "2026-12-02",
        2,
    )
    assert [s.source for s in c.lengths] == [USAGE, USAGE]


def test_a_results_table_has_no_dates_and_no_sessions(tmp_path: Path) -> None:
    c = run_context(stub_prepared(tmp_path), outcomes(USAGE_TOKENS), None)
    assert (c.endpoint_host, c.first_date, c.last_date, c.sessions) == (None, None, None, None)


def test_the_host_is_named_without_user_port_path_or_case(tmp_path: Path) -> None:
    url = "https://user:secret@API.Example.COM:8443/v1?key=secret"
    c = run_context(stub_prepared(tmp_path), outcomes(USAGE_TOKENS), [], url)
    assert (c.endpoint_host, c.sessions, c.first_date) == ("api.example.com", 0, None)


# === the context of real runs ===


EVIDENCE = Path(__file__).resolve().parents[2] / "evidence" / "20261201-local-compare"


def test_the_gemma_run_context_comes_from_its_journal_and_tokenizer() -> None:
    run = EVIDENCE / "runs" / "gemma3"
    from needlepoint.analysis.inputs import from_run

    inp = from_run(run)
    assert inp.context is not None and inp.sessions is not None
    c = inp.context
    assert (c.endpoint_host, c.first_date, c.last_date, c.sessions) == (
        "127.0.0.1", "2026-12-01", "2026-12-01", 2
    )  # fmt: skip
    [size] = c.lengths
    assert (size.unit, size.source, size.requests) == ("tokens", TOKENIZER, 64)
    assert (size.minimum, size.median, size.maximum) == (309, 316.0, 322)
    assert inp.sessions[18] == 1 and inp.sessions[19] == 1 and inp.sessions[20] == 2


def test_sessions_follow_the_session_record_before_each_attempt() -> None:
    records = [
        {"type": "session", "session": 1},
        {"type": "attempt", "seq": 1},
        {"type": "outcome", "seq": 1},
        {"type": "session", "session": 2},
        {"type": "attempt", "seq": 2},
        {"type": "attempt", "seq": 1},  # never happens; the first attempt decides
    ]
    assert sessions_by_seq(records) == {1: 1, 2: 2}


def test_a_sessions_recorded_number_is_the_one_given_and_a_missing_one_counts_on() -> None:
    records = [
        {"type": "attempt", "seq": 9},  # before any session record: session 0
        {"type": "session", "session": 3},
        {"type": "attempt", "seq": 1},
        {"type": "attempt", "seq": "2"},  # not an integer seq: no session is claimed for it
        {"type": "session"},  # no number: the one after the last
        {"type": "attempt", "seq": 2},
    ]
    assert sessions_by_seq(records) == {9: 0, 1: 3, 2: 4}


def test_a_runs_sessions_are_the_numbers_its_journal_records(
    tmp_path: Path, prepared: Prepared
) -> None:
    # The runner numbers sessions 1, 2, ...; a journal may say otherwise, and the record wins.
    from needlepoint import cli
    from needlepoint.analysis.inputs import run_facts

    run_dir = tmp_path / "run"
    argv = ["run", str(prepared.root), "--allow", "4", "--run-dir", str(run_dir)]
    assert cli.main([*argv, "--simulate", "perfect", "--no-progress"]) == 0
    journal = run_dir / "journal.jsonl"
    lines = [json.loads(line) for line in journal.read_bytes().splitlines()]
    assert [r["session"] for r in lines if r["type"] == "session"] == [1]
    for r in lines:
        if r["type"] == "session":
            r["session"] = 7
    journal.write_text("".join(json.dumps(r) + "\n" for r in lines))
    rechain(journal)
    context, sessions = run_facts(run_dir, prepared, make_input(prepared).outcomes)
    assert (context.sessions, sorted(sessions.items())) == (1, [(1, 7), (2, 7), (3, 7), (4, 7)])
    # Unless told the run was simulated, its usage is the endpoint's.
    assert {size.source for size in context.lengths} == {USAGE}


def test_token_counts_of_other_materials_fall_back_to_usage(tmp_path: Path) -> None:
    folder = tmp_path / "gemma3"
    shutil.copytree(EVIDENCE / "prepared" / "gemma3", folder)
    prepared = load_prepared(folder)
    outcomes = make_input(prepared).outcomes  # usage: 900 + 10 × length prompt tokens
    assert length_sizes(prepared, outcomes)[0].source == TOKENIZER
    counts = json.loads((folder / "token_counts.json").read_text("utf-8"))
    for broken in (
        counts | {"prepared_fingerprint": "0" * 64},
        counts | {"requests": [*counts["requests"][:-1], {"seq": 64, "length": 13}]},
        counts | {"requests": "many"},
        [],
    ):
        (folder / "token_counts.json").write_text(json.dumps(broken), "utf-8")
        [size] = length_sizes(prepared, outcomes)
        assert (size.source, size.median) == (USAGE, 1020.0)
    (folder / "token_counts.json").write_bytes(b"\xff not json")
    assert length_sizes(prepared, outcomes)[0].source == USAGE


def test_without_any_token_count_the_prompt_characters_are_given(prepared: Prepared) -> None:
    rows = make_rows(prepared)
    for row in rows:
        row["prompt_tokens"] = "" if row["seq"] == "7" else row["prompt_tokens"]
    from needlepoint.analysis.inputs import validate_rows

    outcomes, _, _ = validate_rows(list(enumerate(rows, start=2)), prepared, "x.csv")
    sizes = length_sizes(prepared, outcomes)
    assert [s.unit for s in sizes] == ["tokens", "tokens"]  # one unknown still leaves usage
    for row in rows:
        row["prompt_tokens"] = ""
    outcomes, _, _ = validate_rows(list(enumerate(rows, start=2)), prepared, "x.csv")
    sizes = length_sizes(prepared, outcomes)
    assert [(s.length, s.unit, s.source, s.requests) for s in sizes] == [
        (60, "characters", CHARACTERS, 64),
        (240, "characters", CHARACTERS, 64),
    ]
    assert sizes[0].maximum < sizes[1].minimum


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://api.example.com:8443/v1?key=secret", "api.example.com"),
        ("http://127.0.0.1:35851/v1", "127.0.0.1"),
        (None, None),
    ],
)
def test_the_endpoint_is_named_by_its_host_alone(prepared: Prepared, url, host) -> None:
    c = run_context(prepared, make_input(prepared).outcomes, [], url)
    assert c.endpoint_host == host and c.sessions == 0 and c.first_date is None


# --- the results.csv reader: each refusal names the file, the line and the field ----------------

HEADER = ",".join(RESULT_COLUMNS) + "\n"
ROW = ",".join(["x"] * len(RESULT_COLUMNS)) + "\n"


def read_all(path: Path) -> list[tuple[int, dict[str, str]]]:
    from needlepoint.analysis.inputs import read_results_csv

    return list(read_results_csv(path))


def refusal(path: Path) -> str:
    with pytest.raises(NeedlepointError) as caught:
        read_all(path)
    return str(caught.value)


def test_every_number_column_has_its_limit() -> None:
    from needlepoint.analysis.inputs import _FLOAT_FIELDS, _INT_FIELDS, NUMBER_LIMITS

    assert sorted(NUMBER_LIMITS) == sorted((*_INT_FIELDS, *_FLOAT_FIELDS))


def test_a_results_table_that_cannot_be_opened_is_named(tmp_path: Path) -> None:
    assert refusal(tmp_path / "none.csv") == f"{tmp_path / 'none.csv'}: file not found"
    (tmp_path / "dir.csv").mkdir()
    assert refusal(tmp_path / "dir.csv") == (
        f"{tmp_path / 'dir.csv'}: is a folder, not a file to read"
    )


def test_a_results_table_named_through_a_link_is_read(tmp_path: Path) -> None:
    (tmp_path / "real.csv").write_text(HEADER + ROW, encoding="utf-8")
    (tmp_path / "link.csv").symlink_to(tmp_path / "real.csv")
    assert [n for n, _ in read_all(tmp_path / "link.csv")] == [2]


def test_a_line_past_the_limit_is_refused_by_its_number_and_one_at_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import needlepoint.analysis.inputs as inputs

    width = len(ROW)  # a row's line, newline included, is exactly the limit
    monkeypatch.setattr(inputs, "MAX_LINE_CHARS", max(width, len(HEADER)))
    at_limit = ROW if width >= len(HEADER) else ROW[:-1] + "x" * (len(HEADER) - width) + "\n"
    path = tmp_path / "r.csv"
    path.write_text(HEADER + at_limit + at_limit, encoding="utf-8")
    assert [n for n, _ in read_all(path)] == [2, 3]
    path.write_text(HEADER + at_limit + at_limit[:-1] + "y\n", encoding="utf-8")
    limit = inputs.MAX_LINE_CHARS
    assert refusal(path) == f"{path}:3: a line longer than {limit} characters (not read)"


def test_an_empty_table_or_a_repeated_column_is_refused_at_line_1(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_bytes(b"")
    assert refusal(path) == f"{path}:1: empty file, expected a header row"
    path.write_text(HEADER.rstrip("\n") + ",seq\n", encoding="utf-8")
    assert refusal(path) == f"{path}:1: field seq: unexpected or repeated column"


def test_a_row_with_a_field_too_many_names_the_last_column(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text(HEADER + ROW + ROW.rstrip("\n") + ",extra\n", encoding="utf-8")
    n = len(RESULT_COLUMNS)
    assert refusal(path) == (
        f"{path}:3: field {RESULT_COLUMNS[-1]}: row has {n + 1} fields, header has {n}"
    )


def test_a_table_that_is_not_utf8_or_not_csv_is_refused_naming_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import csv

    import needlepoint.analysis.inputs as inputs

    path = tmp_path / "r.csv"
    path.write_bytes((HEADER + ROW).encode() + b"\xff\n")
    assert refusal(path) == f"{path}: not UTF-8 (invalid start byte)"
    # A field past the field limit is malformed CSV, named at the line the reader reached.
    before = csv.field_size_limit()
    limit = max(map(len, RESULT_COLUMNS))  # the header's names still fit
    monkeypatch.setattr(inputs, "RESULTS_FIELD_LIMIT", limit)
    try:
        csv.field_size_limit(limit)
        long = '"' + "y" * (limit + 1) + '"'
        path.write_text(HEADER + ROW + long + ROW[1:], encoding="utf-8")
        assert refusal(path) == (
            f"{path}:3: malformed CSV (field larger than field limit ({limit}))"
        )
    finally:
        csv.field_size_limit(before)


def test_an_answer_s_own_line_breaks_are_read_back_as_written(tmp_path: Path) -> None:
    """A quoted field keeps a CR LF inside an answer: no newline translation."""
    path = tmp_path / "r.csv"
    i = RESULT_COLUMNS.index("response_text")
    values = ["x"] * len(RESULT_COLUMNS)
    values[i] = '"a\r\nb\rc"'
    path.write_bytes((HEADER + ",".join(values) + "\n").encode())
    assert read_all(path)[0][1]["response_text"] == "a\r\nb\rc"
