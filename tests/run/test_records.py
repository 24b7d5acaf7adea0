"""The run folder's records: run.json and the journal's session record as typed records whose
bytes are the evidence's; every journal record against its schema; and outcome records that can
always be journalled, with the fold readers keep of them."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.runner import records

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes
from needlepoint.run.folder import RUN_NAME, json_bytes, read_run_record
from needlepoint.run.options import DEFAULT_TIMEOUT_S, RunOptions, check_settings
from needlepoint.run.records import (
    BODY_ENCODINGS,
    RECORD_TYPES,
    RunRecord,
    SessionRecord,
    decode_body,
    encode_body,
    interrupted_fields,
    outcome_fields,
    record_problem,
)
from needlepoint.run.runner import run_protocol
from needlepoint.run.scoring import classify
from needlepoint.run.simulate import PositionParams
from needlepoint.run.transport import REDACTED, Exchange, Scrubber
from needlepoint.schema import from_plain, to_plain

EVIDENCE = Path(__file__).resolve().parents[2] / "evidence"
RUNS = [EVIDENCE / f / "run" for f in ("20261130-simulated-reference", "20261130-local-smollm2")]
ENVELOPE = ("format", "n", "prev", "type")


@pytest.mark.parametrize("run_dir", RUNS, ids=lambda p: p.parent.name)
def test_committed_run_json_reads_back_to_the_same_bytes(run_dir: Path) -> None:
    record = read_run_record(run_dir)
    assert isinstance(record, RunRecord)
    assert json_bytes(to_plain(record)) == (run_dir / RUN_NAME).read_bytes()


@pytest.mark.parametrize("run_dir", RUNS, ids=lambda p: p.parent.name)
def test_committed_session_records_round_trip(run_dir: Path) -> None:
    sessions = [r for r in records(run_dir) if r["type"] == "session"]
    assert sessions
    for line in sessions:
        fields = {k: v for k, v in line.items() if k not in ENVELOPE}
        session = from_plain(SessionRecord, fields, "session")
        assert canonical_bytes(to_plain(session)) == canonical_bytes(fields)


def test_dropped_tail_is_written_only_when_there_is_one() -> None:
    base = SessionRecord(
        session=1, time="t", run_json_sha256="a" * 64, package_version="0.1.0", allow=8,
        min_gap_s=20.0, override_reason=None, timeout_s=120.0, deadline_s=240.0,
        input_rate=None, output_rate=None, cost_cap=None,
    )  # fmt: skip
    assert "dropped_tail_sha256" not in base.to_plain()
    torn = dataclasses.replace(base, dropped_tail_sha256="b" * 64)
    assert torn.to_plain()["dropped_tail_sha256"] == "b" * 64
    assert from_plain(SessionRecord, torn.to_plain(), "session") == torn


def test_simulated_run_json_is_built_from_the_options(reference_dir: Path, tmp_path: Path) -> None:
    options = RunOptions(allow=3, simulate="position", sim_params={"p_edge": 0.5}, progress="off")
    run_protocol(reference_dir, tmp_path / "run", options)
    record = read_run_record(tmp_path / "run")
    assert record.simulation and record.simulate is not None
    assert record.simulate.params == PositionParams(p_edge=0.5)
    assert record.allow == 3 and record.timeout_s == DEFAULT_TIMEOUT_S
    assert record.deadline_s == 2 * DEFAULT_TIMEOUT_S and record.extra == {}


def test_check_settings_takes_one_options_record(reference_dir: Path) -> None:
    options = RunOptions(allow=5, simulate="perfect", run_meta={"note": "x"}, fsync=False)
    s = check_settings(reference_dir, options)
    assert (s.allow, s.simulate, s.run_meta, s.fsync, s.progress) == (
        5,
        "perfect",
        {"note": "x"},
        False,
        "auto",
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.allow = 6  # type: ignore[misc]
    with pytest.raises(NeedlepointError, match="--allow must be a positive integer"):
        check_settings(reference_dir, RunOptions(allow=0, simulate="perfect"))


@pytest.fixture
def run_copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(RUNS[0], tmp_path / "run"))


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda d: d.update(format=2), r"run\.json: field format: expected 1"),
        (lambda d: d.pop("allow"), r"run\.json: field allow: missing"),
        (lambda d: d.update(git={}), r"run\.json: field git: unknown field"),
        (lambda d: d.update(allow="128"), r"run\.json: field allow: expected int"),
        (lambda d: d["simulate"].update(mode=None), r"field simulate\.mode: expected str"),
        (lambda d: d["cost"].pop("cap"), r"field cost\.cap: missing"),
    ],
)
def test_malformed_run_json_is_refused_in_one_line(run_copy: Path, edit, message: str) -> None:
    value = json.loads((run_copy / RUN_NAME).read_text("utf-8"))
    edit(value)
    (run_copy / RUN_NAME).write_bytes(json_bytes(value))
    with pytest.raises(NeedlepointError, match=message) as err:
        read_run_record(run_copy)
    assert "\n" not in str(err.value)


ABSENT = object()  # the field is left out
NOT_SHA = "expected a lower-case hex SHA-256 digest"
TIME = "2026-11-30T10:00:00+00:00"
SHA = "a" * 64
HEAD = {"n": 0, "prev": "0" * 64}
VALID: dict[str, dict[str, Any]] = {
    "session": {
        "type": "session", **HEAD, "session": 1, "time": TIME, "run_json_sha256": SHA,
        "package_version": "0.1.0", "allow": 1, "min_gap_s": 0, "override_reason": None,
        "timeout_s": 0, "deadline_s": 0, "input_rate": None, "output_rate": None,
        "cost_cap": None,
    },
    "attempt": {"type": "attempt", **HEAD, "seq": 1, "request_sha256": SHA, "time": TIME,
                "gap_s": None},
    "outcome": {
        "type": "outcome", **HEAD, "seq": 1, "time": TIME, "http_status": 200, "error": None,
        "error_detail": "", "body": "{}", "body_encoding": "utf-8", "body_truncated": False,
        "headers": {"content-type": "application/json"}, "latency_s": 0, "usage": None,
        "cost": 0, "recovered": False,
        "classification": {"status": "correct", "kind": "", "response_text": "AB-1234"},
    },
    "stop": {"type": "stop", **HEAD, "time": TIME, "reason": "done", "detail": ""},
}  # fmt: skip


def problem(kind: str, **changes: Any) -> str | None:
    record = dict(VALID[kind])
    for name, value in changes.items():
        if value is ABSENT:
            del record[name]
        else:
            record[name] = value
    found = record_problem(record, "journal.jsonl:3")
    prefix = "journal.jsonl:3: field "
    if found is not None:
        assert found.startswith(prefix), found
        return found.removeprefix(prefix)
    return None


@pytest.mark.parametrize("kind", RECORD_TYPES)
def test_valid_records_of_each_type_pass(kind: str) -> None:
    assert problem(kind) is None


def test_the_record_types_and_encodings_are_the_documented_ones() -> None:
    assert RECORD_TYPES == ("session", "attempt", "outcome", "stop")
    assert BODY_ENCODINGS == ("utf-8", "base64")
    shown = "'session', 'attempt', 'outcome', 'stop'"
    assert problem("stop", type="note") == f"type: 'note' is not one of {shown}"
    assert problem("stop", type=ABSENT) == "type: missing"
    assert record_problem([], "j:1") == "j:1: field document: expected an object, found a list"


@pytest.mark.parametrize(
    ("changes", "found"),
    [
        ({"n": ABSENT}, "n: missing or mistyped"),
        ({"n": "0"}, "n: missing or mistyped"),
        ({"n": True}, "n: missing or mistyped"),
        ({"prev": None}, "prev: missing or mistyped"),
        ({"prev": ABSENT}, "prev: missing or mistyped"),
        ({"n": 7, "prev": ""}, None),  # the chain, not the schema, checks their values
    ],
)
def test_every_record_has_an_integer_n_and_a_string_prev(changes: dict, found: str | None) -> None:
    for kind in RECORD_TYPES:
        assert problem(kind, **changes) == found


def below(name: str, value: object, low: object) -> str:
    return f"{name}: {value!r} is below the minimum {low}"


@pytest.mark.parametrize(
    ("changes", "found"),
    [
        ({"session": 0}, below("session", 0, 1)),
        ({"session": 2}, None),
        ({"session": 1.0}, "session: expected an integer, found a number"),
        ({"session": ABSENT}, "session: missing"),
        ({"time": "yesterday"}, "time: 'yesterday' is not an ISO-8601 time"),
        ({"time": "9" * 50}, f"time: {'9' * 40!r} is not an ISO-8601 time"),
        ({"time": "2026-11-30"}, None),
        ({"time": 5}, "time: expected a string, found a number"),
        ({"run_json_sha256": "A" * 64}, f"run_json_sha256: {NOT_SHA}"),
        ({"run_json_sha256": "a" * 63}, f"run_json_sha256: {NOT_SHA}"),
        ({"run_json_sha256": ABSENT}, "run_json_sha256: missing"),
        ({"package_version": None}, "package_version: expected a string, found null"),
        ({"allow": 0}, below("allow", 0, 1)),
        ({"allow": ABSENT}, "allow: missing"),
        ({"min_gap_s": -0.5}, below("min_gap_s", -0.5, 0)),
        ({"min_gap_s": 0.5}, None),
        ({"min_gap_s": None}, "min_gap_s: expected a finite number, found null"),
        ({"override_reason": ABSENT}, None),
        ({"override_reason": "slow server"}, None),
        ({"override_reason": 1}, "override_reason: expected a string, found a number"),
        ({"timeout_s": -1}, below("timeout_s", -1, 0)),
        ({"timeout_s": ABSENT}, "timeout_s: missing"),
        ({"deadline_s": -1}, below("deadline_s", -1, 0)),
        ({"deadline_s": None}, "deadline_s: expected a finite number, found null"),
        ({"input_rate": -1}, below("input_rate", -1, 0)),
        ({"input_rate": ABSENT}, None),
        ({"output_rate": -1}, below("output_rate", -1, 0)),
        ({"output_rate": ABSENT, "cost_cap": 0}, None),
        ({"cost_cap": -1}, below("cost_cap", -1, 0)),
        ({"cost_cap": "1"}, "cost_cap: expected a finite number, found a string"),
        ({"dropped_tail_sha256": SHA}, None),
        ({"dropped_tail_sha256": "x"}, f"dropped_tail_sha256: {NOT_SHA}"),
        ({"dropped_tail_sha256": None}, "dropped_tail_sha256: expected a string, found null"),
        ({"declaration_sha256": SHA}, None),
        ({"declaration_sha256": "x"}, f"declaration_sha256: {NOT_SHA}"),
        ({"declaration_sha256": None}, "declaration_sha256: expected a string, found null"),
        # written only by a run with requests in flight at once: absent means one at a time
        ({"concurrency": 2}, None),
        ({"concurrency": 1}, below("concurrency", 1, 2)),
        ({"concurrency": "2"}, "concurrency: expected an integer, found a string"),
        ({"concurrency": None}, "concurrency: expected an integer, found null"),
    ],
)  # fmt: skip
def test_session_fields(changes: dict, found: str | None) -> None:
    assert problem("session", **changes) == found


@pytest.mark.parametrize(
    ("changes", "found"),
    [
        ({"seq": 0}, below("seq", 0, 1)),
        ({"seq": ABSENT}, "seq: missing"),
        ({"request_sha256": "b" * 65}, f"request_sha256: {NOT_SHA}"),
        ({"request_sha256": ABSENT}, "request_sha256: missing"),
        ({"time": "x"}, "time: 'x' is not an ISO-8601 time"),
        ({"time": ABSENT}, "time: missing"),
        ({"gap_s": -1}, below("gap_s", -1, 0)),
        ({"gap_s": 0}, None),
        ({"gap_s": ABSENT}, None),
    ],
)  # fmt: skip
def test_attempt_fields(changes: dict, found: str | None) -> None:
    assert problem("attempt", **changes) == found


@pytest.mark.parametrize(
    ("changes", "found"),
    [
        ({"seq": 0}, below("seq", 0, 1)),
        ({"time": "x"}, "time: 'x' is not an ISO-8601 time"),
        ({"http_status": 99}, below("http_status", 99, 100)),
        ({"http_status": 100}, None),
        ({"http_status": 999}, None),
        ({"http_status": 1000}, "http_status: 1000 is above the maximum 999"),
        ({"http_status": None}, None),
        ({"http_status": ABSENT}, None),
        ({"error": "timeout"}, None),
        ({"error": 1}, "error: expected a string, found a number"),
        ({"error_detail": None}, "error_detail: expected a string, found null"),
        ({"error_detail": ABSENT}, "error_detail: missing"),
        ({"body": None}, "body_encoding: must be null exactly when body is null"),
        ({"body": None, "body_encoding": None}, None),
        ({"body_encoding": None}, "body_encoding: must be null exactly when body is null"),
        ({"body_encoding": "base64"}, None),
        ({"body_encoding": "latin-1"},
         "body_encoding: 'latin-1' is not one of 'utf-8', 'base64', None"),
        ({"body": 1}, "body: expected a string, found a number"),
        ({"body_truncated": 0}, "body_truncated: expected true or false, found a number"),
        ({"body_truncated": ABSENT}, "body_truncated: missing"),
        ({"headers": None}, "headers: expected an object, found null"),
        ({"headers": {"x-a": "1", "x-b": 2}}, "headers.x-b: expected a string"),
        ({"headers": {}}, None),
        ({"latency_s": -0.1}, below("latency_s", -0.1, 0)),
        ({"latency_s": None}, None),
        ({"usage": {"prompt_tokens": 1}}, None),
        ({"usage": []}, "usage: expected an object, found a list"),
        ({"usage": ABSENT}, None),
        ({"cost": -1}, below("cost", -1, 0)),
        ({"cost": ABSENT}, None),
        ({"recovered": None}, "recovered: expected true or false, found null"),
        ({"recovered": True}, None),
        ({"classification": ABSENT}, "classification: missing"),
        ({"classification": "correct"}, "classification: expected an object, found a string"),
        ({"classification": {"status": "fine", "kind": "", "response_text": ""}},
         "classification.status: 'fine' is not one of 'correct', 'error', 'protocol_failure', "
         "'unexecuted'"),
        ({"classification": {"status": "unexecuted", "kind": "", "response_text": ""}}, None),
        ({"classification": {"status": "error", "kind": None, "response_text": ""}},
         "classification.kind: expected a string, found null"),
        ({"classification": {"status": "error", "kind": "x"}},
         "classification.response_text: missing"),
    ],
)  # fmt: skip
def test_outcome_fields(changes: dict, found: str | None) -> None:
    assert problem("outcome", **changes) == found


@pytest.mark.parametrize(
    ("changes", "found"),
    [
        ({"time": "x"}, "time: 'x' is not an ISO-8601 time"),
        ({"reason": ""}, "reason: must not be empty"),
        ({"reason": ABSENT}, "reason: missing"),
        ({"reason": None}, "reason: expected a string, found null"),
        ({"detail": ""}, None),
        ({"detail": ABSENT}, "detail: missing"),
    ],
)
def test_stop_fields(changes: dict, found: str | None) -> None:
    assert problem("stop", **changes) == found


def exchange(body: bytes | None) -> Exchange:
    return Exchange(200, body, None, "", 0.1234567, False, {"x-id": "1"})


def test_an_interrupted_outcome_has_every_field_of_an_ordinary_one() -> None:
    c = classify(http_status=None, transport_error="interrupted", body=None, answer={}, model="")
    assert interrupted_fields(7, "2026-01-01T00:00:00Z", "killed mid-request", True) == {
        "seq": 7,
        "time": "2026-01-01T00:00:00Z",
        "http_status": None,
        "error": "interrupted",
        "error_detail": "killed mid-request",
        "body": None,
        "body_encoding": None,
        "body_truncated": False,
        "headers": {},
        "latency_s": None,
        "usage": None,
        "cost": None,
        "recovered": True,
        "classification": {
            "status": "protocol_failure",
            "kind": "indeterminate_interrupted",
            "response_text": "",
        },
    }
    assert c.kind == "indeterminate_interrupted"
    ordinary = outcome_fields(7, "t", exchange(b"{}"), c, None, None)
    assert set(ordinary) == set(interrupted_fields(7, "t", "d", False))
    assert interrupted_fields(7, "t", "d", False)["recovered"] is False


def test_an_ordinary_outcome_records_the_exchange() -> None:
    c = classify(http_status=200, transport_error=None, body=b"{}", answer={}, model="m")
    fields = outcome_fields(3, "t", exchange(b"{}"), c, 0.5, {"prompt_tokens": 1})
    assert fields == {
        "seq": 3,
        "time": "t",
        "http_status": 200,
        "error": None,
        "error_detail": "",
        "body": "{}",
        "body_encoding": "utf-8",
        "body_truncated": False,
        "headers": {"x-id": "1"},
        "latency_s": 0.123457,
        "usage": {"prompt_tokens": 1},
        "cost": 0.5,
        "recovered": False,
        "classification": {"status": "protocol_failure", "kind": "no_choices", "response_text": ""},
    }


@pytest.mark.parametrize(
    ("body", "text", "encoding"),
    [
        (None, None, None),
        (b"", "", "utf-8"),
        ('{"a":"é"}'.encode(), '{"a":"é"}', "utf-8"),
        (b"\xff\xfe\x00x", "//4AeA==", "base64"),
        (b"caf\xe9", "Y2Fm6Q==", "base64"),
    ],
)
def test_bodies_round_trip_through_the_journal(
    body: bytes | None, text: str | None, encoding: str | None
) -> None:
    assert encode_body(body) == (text, encoding)
    assert decode_body({"body": text, "body_encoding": encoding}) == body


def test_a_record_without_an_encoding_is_read_as_utf8() -> None:
    assert decode_body({"body": "é"}) == "é".encode()
    assert decode_body({"body_encoding": "base64"}) is None


def test_the_key_is_scrubbed_inside_lists_and_everything_else_is_kept() -> None:
    scrub = Scrubber("sk-secret")
    record = {"error_detail": ["sent sk-secret", 3, None, {"h": [b"sk-secret!"]}], "n": 2.5}
    assert scrub(record) == {
        "error_detail": [f"sent {REDACTED}", 3, None, {"h": [REDACTED.encode() + b"!"]}],
        "n": 2.5,
    }
    assert Scrubber(None)(record) is record


@pytest.mark.parametrize(("chars", "kept"), [(4095, True), (4096, True), (4097, False)])
def test_an_answer_of_up_to_4096_characters_is_kept_in_memory_and_a_longer_one_is_not(
    chars: int, kept: bool
) -> None:
    # Beyond this a reader fetches the text from the journal line again (memory stays bounded).
    from needlepoint.run.records import OutcomeSummary

    text = "é" * chars  # characters, not bytes: two bytes each in UTF-8
    record = {"seq": 1, "classification": {"response_text": text}}
    assert OutcomeSummary.of(record).response_text == (text if kept else None)


def test_an_outcome_summary_keeps_every_field_but_the_body_and_headers() -> None:
    from needlepoint.run.records import OutcomeSummary

    record = {
        "type": "outcome",
        "seq": 7,
        "time": "2026-12-01T00:02:00Z",
        "http_status": 200,
        "latency_s": 1.5,
        "cost": 0.25,
        "recovered": True,
        "classification": {"status": "correct", "kind": "exact", "response_text": "OM-3642"},
        "usage": {
            "prompt_tokens": 9,
            "completion_tokens": 2,
            "completion_tokens_details": {"reasoning_tokens": 1},
        },
        "body_b64": "e30=",
        "headers": {"x-id": "1"},
    }
    got = OutcomeSummary.of(record, at="here")
    assert (got.seq, got.time, got.http_status, got.latency_s, got.cost, got.recovered) == (
        7, "2026-12-01T00:02:00Z", 200, 1.5, 0.25, True,
    )  # fmt: skip
    assert (got.status, got.kind, got.response_text, got.at) == (
        "correct",
        "exact",
        "OM-3642",
        "here",
    )
    assert (got.prompt_tokens, got.completion_tokens, got.reasoning_tokens) == (9, 2, 1)
    assert got.has_usage


@pytest.mark.parametrize(
    ("count", "kept"),
    [(3, 3), (0, 0), (True, None), (False, None), (3.0, None), ("3", None), (None, None)],
)
def test_a_token_count_is_kept_only_as_an_integer_that_is_not_a_bool(
    count: object, kept: int | None
) -> None:
    # json reads true as a bool, which Python counts as the integer 1: a count it never was.
    from needlepoint.run.records import OutcomeSummary

    record = {"seq": 1, "usage": {"prompt_tokens": count, "completion_tokens": count}}
    got = OutcomeSummary.of(record)
    assert (got.prompt_tokens, got.completion_tokens) == (kept, kept)
    assert OutcomeSummary.of({"seq": 1, "usage": [count]}).prompt_tokens is None


CONTEXT = {
    "format": 1,
    "prepared_dir": "../prepared",
    "prepared_manifest_sha256": "a" * 64,
    "prepared_files": {"plan.csv": "b" * 64},
    "sent": [{"seq": 1, "request_sha256": "c" * 64, "time": "2026-12-01T00:00:00Z"}],
    "journal_records": 3,
    "journal_sha256": "d" * 64,
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sent": [3]}, "ctx: field sent[0]: expected an object, found a number"),
        (
            {"sent": [{"seq": "1", "request_sha256": "c" * 64, "time": "t"}]},
            "ctx: field sent[0].seq: expected an integer, found a string",
        ),
        (
            {"sent": [{"seq": 1, "request_sha256": "c" * 63, "time": "t"}]},
            "ctx: field sent[0].request_sha256: ",
        ),
        ({"sent": [{"seq": 1, "request_sha256": "c" * 64}]}, "ctx: field sent[0].time: "),
        # Every entry is checked to be an object before any entry's fields are read.
        ({"sent": [{}, 3]}, "ctx: field sent[1]: expected an object, found a number"),
        ({"prepared_files": {"plan.csv": "b"}}, "ctx: field prepared_files.plan.csv: "),
        ({"journal_records": -1}, "ctx: field journal_records: "),
    ],
)
def test_a_malformed_context_manifest_is_refused_naming_the_field(
    change: dict, message: str
) -> None:
    """context_manifest.json lists every body sent; a bad entry is named down to its index and
    field, so a reader of a tampered folder knows where to look."""
    from needlepoint.run.records import check_context_manifest

    assert check_context_manifest(dict(CONTEXT), "ctx") == CONTEXT
    # A run stopped before its first request sent nothing and journalled nothing: still valid.
    empty = {**CONTEXT, "sent": [], "journal_records": 0}
    assert check_context_manifest(empty, "ctx") == empty
    with pytest.raises(NeedlepointError) as info:
        check_context_manifest({**CONTEXT, **change}, "ctx")
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_a_stop_record_keeps_its_journal_line_number_time_reason_and_detail() -> None:
    """Readers fold stop records by journal line (``n``) and say why each session ended."""
    from needlepoint.run.records import StopRecord

    record = {**VALID["stop"], "n": 7, "reason": "http_429", "detail": "rate limited"}
    stop = StopRecord.of(record)
    assert stop == StopRecord(n=7, time=TIME, reason="http_429", detail="rate limited")
