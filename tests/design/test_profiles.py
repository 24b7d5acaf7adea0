"""Design identity and body profiles: what the design fingerprint covers, and each body shape."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.ids import plain_id

from needlepoint.cli import main
from needlepoint.design import profiles
from needlepoint.design import protocol as protocol_mod
from needlepoint.design.audit import audit_prepared
from needlepoint.design.generate import generate
from needlepoint.design.prepared import load_prepared, load_protocol, prepare
from needlepoint.design.protocol import (
    design_fingerprint,
    load_override,
    reference_protocol,
    validate,
)
from needlepoint.design.schema import DESIGN_FIELDS, EXECUTION_FIELDS, LABEL_FIELDS, VARIANT_FIELDS
from needlepoint.design.verify import verify_prepared
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes, sha256_hex

ROOT = Path(__file__).resolve().parents[2]
V1_DESIGN = "7c932b4a7fb27f1218d71a5dba8ea68e4ca675344f206a1d60d9e409c5999598"
SMALL = {"version": 901, "description": "small", "cases": 4, "lengths": [12]}


def _override(tmp_path: Path, values: dict, name: str = "p.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(values, ensure_ascii=False), encoding="utf-8")
    return path


# --- the design fingerprint ------------------------------------------------------------------


def test_every_protocol_field_is_in_exactly_one_group() -> None:
    groups = [DESIGN_FIELDS, LABEL_FIELDS, EXECUTION_FIELDS, VARIANT_FIELDS]
    every = [f for g in groups for f in g]
    assert len(every) == len(set(every))
    assert set(reference_protocol()) <= set(every)
    optional = set(profiles.OPTIONAL_FIELDS) | set(protocol_mod.OPTIONAL_FIELDS)
    assert set(every) - set(reference_protocol()) == optional


def test_v1_design_fingerprint_is_the_documented_value() -> None:
    assert design_fingerprint(reference_protocol()) == V1_DESIGN
    assert f"`{V1_DESIGN}`" in (ROOT / "PROTOCOL.md").read_text(encoding="utf-8")
    part = {k: reference_protocol()[k] for k in DESIGN_FIELDS}
    assert design_fingerprint(reference_protocol()) == sha256_hex(canonical_bytes(part))


@pytest.mark.parametrize(
    "change",
    [
        {"model": "other-model"},
        {"temperature": 0.7},
        {"max_tokens": 16},
        {"stop": ["\n"]},
        {"runner": {"min_gap_s": 0, "stop_statuses": [429], "max_consecutive_failures": 9}},
        {"description": "another description"},
        {"version": 77},
    ],
    ids=lambda c: next(iter(c)),
)
def test_model_body_runner_and_labels_keep_the_fingerprint(change: dict) -> None:
    assert design_fingerprint(reference_protocol() | change) == V1_DESIGN


@pytest.mark.parametrize("profile", profiles.PROFILES)
def test_every_profile_keeps_the_fingerprint(profile: str) -> None:
    variant = profiles.make_variant(reference_protocol(), "m-2", profile)
    validate(variant)
    assert design_fingerprint(variant) == V1_DESIGN


def test_reasoning_effort_keeps_the_fingerprint() -> None:
    variant = profiles.make_variant(reference_protocol(), "o-x", "reasoning")
    variant["reasoning_effort"] = "low"
    validate(variant)
    assert design_fingerprint(variant) == V1_DESIGN


@pytest.mark.parametrize(
    "path, value",
    [
        (("templates", "user"), "{records}\n{name}?"),
        (("templates", "system"), "Answer."),
        (("templates", "record"), "{name}: {code}"),
        (("seeds", "materials"), 7),
        (("seeds", "order"), 7),
        (("lengths",), [60]),
        (("cases",), 12),
        (("unknown",), "NONE"),
        (("names", "suffix"), "工程"),
        (("analysis", "threshold"), 0.2),
        (("orders",), ["B-M-A-E", "M-E-B-A"]),
    ],
    ids=lambda v: ".".join(v) if isinstance(v, tuple) else plain_id(repr(v)),
)
def test_design_changes_change_the_fingerprint(path: tuple, value: object) -> None:
    p = reference_protocol()
    target = p
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert design_fingerprint(p) != V1_DESIGN


# --- model variants and the v1 rule ----------------------------------------------------------


def test_a_v1_variant_is_still_v1_but_a_design_change_is_not(tmp_path: Path) -> None:
    variant = load_override(_override(tmp_path, {"version": 1, "model": "x-1", "max_tokens": 8}))
    assert variant["version"] == 1 and design_fingerprint(variant) == V1_DESIGN
    runner = {"runner": {"max_consecutive_failures": 8}}
    assert load_override(_override(tmp_path, {"version": 1, **runner}))["version"] == 1
    with pytest.raises(NeedlepointError, match=r"v1 is frozen; templates\.system differs"):
        load_override(_override(tmp_path, {"version": 1, "templates": {"system": "Hi."}}))


def test_variants_convert_and_convert_back() -> None:
    v1 = reference_protocol()
    reasoning = profiles.make_variant(v1, None, "reasoning")
    assert "temperature" not in reasoning and "max_tokens" not in reasoning
    assert reasoning["max_completion_tokens"] == 1024 and reasoning["body_profile"] == "reasoning"
    completion = profiles.make_variant(reasoning, None, "completion")
    assert completion["stop"] == ["\n"] and completion["answer_cue"] == "\nAnswer:"
    assert completion["temperature"] == 0 and completion["max_tokens"] == 1024
    assert profiles.make_variant(completion, None, "chat") == v1 | {"stop": ["\n"]}
    assert profiles.make_variant(reasoning, None, "chat") == v1
    assert profiles.make_variant(v1, None, "chat") == v1


def test_override_file_with_a_profile(tmp_path: Path) -> None:
    path = _override(
        tmp_path,
        {**SMALL, "body_profile": "reasoning", "reasoning_effort": "low", "stop": ["\n\n"]},
    )
    p = load_override(path)
    assert p["max_completion_tokens"] == 1024 and p["reasoning_effort"] == "low"
    assert "temperature" not in p
    bad = _override(tmp_path, {**SMALL, "body_profile": "reasoning", "max_tokens": 9}, "bad.json")
    with pytest.raises(
        NeedlepointError, match="'max_tokens' is not sent by body profile reasoning"
    ):
        load_override(bad)
    bad = _override(tmp_path, {**SMALL, "answer_cue": "A:"}, "bad2.json")
    with pytest.raises(NeedlepointError, match="'answer_cue' is not sent by body profile chat"):
        load_override(bad)
    bad = _override(tmp_path, {**SMALL, "body_profile": "json"}, "bad3.json")
    with pytest.raises(NeedlepointError, match="unknown body profile 'json'"):
        load_override(bad)
    chat = load_override(_override(tmp_path, {**SMALL, "body_profile": "chat"}, "chat.json"))
    assert "body_profile" not in chat  # the default is never written


@pytest.mark.parametrize(
    "stop, why",
    [
        (["-"], "could cut an answer"),
        (["12"], "could cut an answer"),
        (["AB-1"], "could cut an answer"),
        (["UNK"], "could cut an answer"),
        ([], "1 to 4 strings"),
        (["a", "b", "c", "d", "e"], "1 to 4 strings"),
        ([""], "non-empty string"),
        (["\n", "\n"], "repeats"),
        ("\n", "1 to 4 strings"),
    ],
)
def test_stop_sequences_that_could_cut_an_answer_are_refused(stop: object, why: str) -> None:
    p = reference_protocol() | {"version": 5, "stop": stop}
    with pytest.raises(NeedlepointError, match=re.escape(why)):
        validate(p)


@pytest.mark.parametrize(
    "change, why",
    [
        ({"max_completion_tokens": 0}, "max_completion_tokens must be a positive integer"),
        ({"reasoning_effort": ""}, "reasoning_effort must be a non-empty string"),
        ({"temperature": 0}, "'temperature' is not sent by body profile reasoning"),
    ],
)
def test_reasoning_fields_are_checked(change: dict, why: str) -> None:
    p = profiles.make_variant(reference_protocol(), None, "reasoning") | change
    with pytest.raises(NeedlepointError, match=re.escape(why)):
        validate(p)


def test_completion_needs_stop_and_a_cue_without_codes() -> None:
    p = profiles.make_variant(reference_protocol(), None, "completion")
    p.pop("stop")
    with pytest.raises(NeedlepointError, match="missing field 'stop'"):
        validate(p)
    p = profiles.make_variant(reference_protocol(), None, "completion") | {"answer_cue": "AB-1234"}
    with pytest.raises(NeedlepointError, match="answer_cue must be a string without a code"):
        validate(p)


# --- body bytes ------------------------------------------------------------------------------


def _first_body(protocol: dict) -> bytes:
    line = generate(protocol)["requests.jsonl"].split(b"\n")[0]
    return canonical_bytes(json.loads(line)["body"])


def test_chat_body_of_v1_is_unchanged_and_a_stop_joins_it() -> None:
    body = _first_body(reference_protocol())
    assert body.startswith(b'{"max_tokens":1024,"messages":[{"content":"')
    assert body.endswith(b'"role":"user"}],"model":"agnes-3.0-flash","temperature":0}')
    stopped = _first_body(reference_protocol() | {"version": 3, "stop": ["\n"]})
    assert stopped.endswith(b'"model":"agnes-3.0-flash","stop":["\\n"],"temperature":0}')


def test_reasoning_body_bytes() -> None:
    p = profiles.make_variant(reference_protocol(), "o-x", "reasoning") | {
        "reasoning_effort": "low"
    }
    body = _first_body(p)
    assert body.startswith(b'{"max_completion_tokens":1024,"messages":[{"content":"')
    assert body.endswith(b'"role":"user"}],"model":"o-x","reasoning_effort":"low"}')
    assert b"temperature" not in body and b'"max_tokens"' not in body


def test_completion_body_is_the_documented_prompt() -> None:
    v1 = reference_protocol()
    chat = json.loads(_first_body(v1))
    body = _first_body(profiles.make_variant(v1, "base-1", "completion"))
    decoded = json.loads(body)
    system, user = (m["content"] for m in chat["messages"])
    assert decoded["prompt"] == system + "\n\n" + user + "\nAnswer:"
    assert sorted(decoded) == ["max_tokens", "model", "prompt", "stop", "temperature"]
    assert body.startswith(b'{"max_tokens":1024,"model":"base-1","prompt":"')
    assert body.endswith(b'\\nAnswer:","stop":["\\n"],"temperature":0}')


# --- prepared variants: verify, audit, CLI ---------------------------------------------------


@pytest.mark.parametrize("profile", profiles.PROFILES)
def test_variant_folder_verifies_and_audits_with_the_design_fingerprint(
    tmp_path: Path, reference_dir: Path, profile: str
) -> None:
    out = prepare(tmp_path / "v", model="model-b", body_profile=profile)
    assert verify_prepared(out).ok and verify_prepared(out).warnings == []
    report = audit_prepared(out)
    assert report.ok, [c.failures for c in report.checks if not c.ok]
    variant, v1 = load_prepared(out), load_prepared(reference_dir)
    assert variant.manifest["design_fingerprint"] == v1.manifest["design_fingerprint"] == V1_DESIGN
    assert variant.fingerprint != v1.fingerprint
    assert (out / "answer_key.jsonl").read_bytes() == (
        reference_dir / "answer_key.jsonl"
    ).read_bytes()
    protocol = json.loads((out / "protocol.json").read_text(encoding="utf-8"))
    assert protocol["model"] == "model-b"
    assert protocol.get("body_profile", "chat") == profile


def test_variant_of_an_override_file(tmp_path: Path) -> None:
    path = _override(tmp_path, SMALL)
    base = load_protocol(path)
    variant = load_protocol(path, model="m", body_profile="completion")
    assert design_fingerprint(base) == design_fingerprint(variant) != V1_DESIGN
    assert variant["version"] == 901


def test_tampered_design_fingerprint_fails_verify_and_audit(prepared_copy: Path) -> None:
    manifest = json.loads((prepared_copy / "manifest.json").read_text(encoding="utf-8"))
    manifest["design_fingerprint"] = "0" * 64
    (prepared_copy / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert any("design_fingerprint" in p for p in verify_prepared(prepared_copy).problems)
    failed = [c.name for c in audit_prepared(prepared_copy).checks if not c.ok]
    assert failed == ["design_fingerprint"]
    del manifest["design_fingerprint"]  # a folder prepared before the field existed
    (prepared_copy / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    report = verify_prepared(prepared_copy)
    assert report.ok and any(V1_DESIGN in w for w in report.warnings)
    assert audit_prepared(prepared_copy).ok


def test_audit_refuses_a_body_of_another_profile(tmp_path: Path) -> None:
    out = prepare(tmp_path / "c", _override(tmp_path, SMALL), body_profile="completion")
    protocol = json.loads((out / "protocol.json").read_text(encoding="utf-8"))
    protocol["answer_cue"] = "\nA:"  # the bodies no longer end with the frozen cue
    (out / "protocol.json").write_text(json.dumps(protocol, ensure_ascii=False), encoding="utf-8")
    checks = {c.name: c for c in audit_prepared(out).checks}
    assert not checks["body_keys"].ok
    assert "prompt is not system text" in checks["body_keys"].failures[0]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--body-profile", "json"], "unknown body profile 'json'"),
        (["--model", ""], "a model name must be non-empty"),
        (["--model", " gpt "], "without surrounding spaces"),
    ],
)
def test_bad_variant_input_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list, message: str
) -> None:
    assert main(["prepare", "--out", str(tmp_path / "x"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x").exists()


def test_cli_prepares_a_variant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "g"
    argv = ["prepare", "--out", str(out), "--protocol", str(_override(tmp_path, SMALL))]
    assert main([*argv, "--model", "gemma-x", "--body-profile", "completion"]) == 0
    assert main(["verify", str(out)]) == 0 and main(["audit", str(out)]) == 0
    assert "prompt" in json.loads((out / "requests.jsonl").read_text().split("\n")[0])["body"]


# --- convert: what each profile carries over, and nothing shared -----------------------------


def test_convert_carries_reasoning_effort_and_answer_cue_into_a_profile_that_sends_them() -> None:
    reasoning = profiles.make_variant(reference_protocol(), None, "reasoning")
    reasoning["reasoning_effort"] = "high"
    again = profiles.convert(reasoning, "reasoning")
    assert again == reasoning  # the frozen effort is kept, under its own name only
    assert "reasoning_effort" not in profiles.convert(reasoning, "chat")
    completion = profiles.make_variant(reference_protocol(), None, "completion")
    completion["answer_cue"] = "\nA:"
    assert profiles.convert(completion, "completion") == completion  # not the default cue
    assert profiles.convert(reasoning, "completion")["answer_cue"] == profiles.DEFAULT_ANSWER_CUE
    assert "answer_cue" not in profiles.convert(completion, "reasoning")


def _containers(value: object) -> set[int]:
    """Ids of every dict and list inside ``value``, itself included."""
    if isinstance(value, dict):
        return {id(value)}.union(*(_containers(v) for v in value.values()))
    if isinstance(value, list):
        return {id(value)}.union(*(_containers(v) for v in value))
    return set()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)


@settings(derandomize=True, max_examples=40, deadline=None)
@given(
    temperature=JSON_VALUES,
    profile=st.sampled_from(profiles.PROFILES),
    model=st.sampled_from([None, "m-2"]),
)
def test_a_variant_shares_no_list_or_dict_with_its_source(
    temperature: object, profile: str, model: str | None
) -> None:
    # A variant is frozen on its own: editing it (or the source) must never reach the other.
    source = reference_protocol() | {"temperature": [temperature], "stop": ["\n"]}
    for variant in (
        profiles.convert(source, profile),
        profiles.make_variant(source, model),
        profiles.make_variant(source, model, profile),
    ):
        assert not _containers(variant) & _containers(source)


# --- text_chars and the stop-sequence count --------------------------------------------------


@pytest.mark.parametrize("profile", profiles.PROFILES)
def test_text_chars_counts_the_prompt_or_the_messages(profile: str) -> None:
    p = profiles.make_variant(reference_protocol(), None, profile)
    body = profiles.build_body(p, "Sys.", "User?")
    sent = "Sys.\n\nUser?\nAnswer:" if profile == "completion" else "Sys.User?"
    assert profiles.text_chars(body) == len(sent)


def test_four_stop_sequences_are_the_most_allowed() -> None:
    four = ["\n", "\n\n", "###", "Q:"]
    validate(reference_protocol() | {"version": 5, "stop": four})
    with pytest.raises(NeedlepointError, match=re.escape("stop must be a list of 1 to 4 strings")):
        validate(reference_protocol() | {"version": 5, "stop": [*four, "\t"]})
