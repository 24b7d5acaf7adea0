"""Body profiles at each function's interface: names, bodies, budgets, exact refusals."""

from __future__ import annotations

import re
from typing import Any

import pytest

from needlepoint.design import profiles
from needlepoint.errors import NeedlepointError

CHAT: dict[str, Any] = {
    "model": "m-1",
    "temperature": 0,
    "max_tokens": 1024,
    "unknown": "UNKNOWN",
    "code_pattern": "[A-Z]{2}-[0-9]{4}",
    "cases": 4,
}
REASONING: dict[str, Any] = {
    **{k: v for k, v in CHAT.items() if k not in ("temperature", "max_tokens")},
    "body_profile": "reasoning",
    "max_completion_tokens": 512,
}
COMPLETION: dict[str, Any] = {
    **CHAT,
    "body_profile": "completion",
    "stop": ["\n"],
    "answer_cue": "\nAnswer:",
}


def refusal(call: Any) -> str:
    with pytest.raises(NeedlepointError) as info:
        call()
    return str(info.value)


def test_body_profile_defaults_to_chat_and_reads_the_field() -> None:
    assert profiles.body_profile({}) == "chat"
    assert profiles.body_profile({"body_profile": "completion"}) == "completion"


def test_check_profile_name_names_where_and_every_known_profile() -> None:
    assert profiles.check_profile_name("reasoning") == "reasoning"
    assert refusal(lambda: profiles.check_profile_name("json")) == (
        "--body-profile: unknown body profile 'json'; choose one of chat, reasoning, completion"
    )
    assert refusal(lambda: profiles.check_profile_name(None, "p.json: body_profile")) == (
        "p.json: body_profile: unknown body profile None; choose one of chat, reasoning, completion"
    )


def test_allowed_fields_are_the_profiles_own_and_a_bad_name_is_refused() -> None:
    assert profiles.allowed_fields("chat") == ("temperature", "max_tokens", "stop")
    assert profiles.allowed_fields("reasoning") == (
        "max_completion_tokens",
        "reasoning_effort",
        "stop",
    )
    with pytest.raises(NeedlepointError, match="unknown body profile 'x'"):
        profiles.allowed_fields("x")


@pytest.mark.parametrize(
    ("base", "extra"),
    [
        (CHAT, {"stop": ["\n"]}),
        (REASONING, {"reasoning_effort": "low", "stop": ["\n"]}),
        (COMPLETION, {}),
    ],
)
def test_every_allowed_field_of_every_profile_is_accepted_and_sent(
    base: dict[str, Any], extra: dict[str, Any]
) -> None:
    # Each field a profile allows passes validation, and every one but the cue goes into the body.
    protocol = base | extra
    profile = profiles.body_profile(protocol)
    allowed = profiles.allowed_fields(profile)
    assert set(allowed) <= set(protocol)
    profiles.validate_body_fields(protocol, "p")
    body = profiles.build_body(protocol, "S", "U")
    assert {k: body[k] for k in allowed if k != "answer_cue"} == {
        k: protocol[k] for k in allowed if k != "answer_cue"
    }
    assert "answer_cue" not in body


def test_completion_prompt_joins_system_user_and_cue() -> None:
    assert profiles.completion_prompt("S", "U", "\nA:") == "S\n\nU\nA:"


def test_a_chat_body_holds_the_messages_and_the_chat_fields_only() -> None:
    body = profiles.build_body(CHAT | {"stop": ["\n"]}, "Sys.", "User?")
    assert body == {
        "model": "m-1",
        "messages": [
            {"role": "system", "content": "Sys."},
            {"role": "user", "content": "User?"},
        ],
        "temperature": 0,
        "max_tokens": 1024,
        "stop": ["\n"],
    }
    assert list(body) == ["model", "messages", "temperature", "max_tokens", "stop"]


def test_a_reasoning_body_sends_its_budget_and_effort() -> None:
    body = profiles.build_body(REASONING | {"reasoning_effort": "low"}, "S", "U")
    assert body == {
        "model": "m-1",
        "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
        "max_completion_tokens": 512,
        "reasoning_effort": "low",
    }


def test_a_completion_body_sends_one_prompt_and_never_the_cue() -> None:
    body = profiles.build_body(COMPLETION, "S", "U")
    assert body == {
        "model": "m-1",
        "prompt": "S\n\nU\nAnswer:",
        "temperature": 0,
        "max_tokens": 1024,
        "stop": ["\n"],
    }


def test_text_chars_counts_the_prompt_or_every_message() -> None:
    assert profiles.text_chars({"prompt": "abcd", "messages": [{"content": "x"}]}) == 4
    assert profiles.text_chars({"messages": [{"content": "ab"}, {"content": "cde"}]}) == 5


def test_budget_field_is_max_completion_tokens_only_for_reasoning() -> None:
    assert profiles.budget_field(REASONING) == "max_completion_tokens"
    assert profiles.budget_field(CHAT) == "max_tokens"
    assert profiles.budget_field(COMPLETION) == "max_tokens"


@pytest.mark.parametrize(
    ("profile", "protocol"),
    [("chat", CHAT), ("reasoning", REASONING), ("completion", COMPLETION)],
)
def test_each_valid_profile_passes(profile: str, protocol: dict[str, Any]) -> None:
    profiles.validate_body_fields(protocol, "p.json")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"body_profile": "json"}, "p: body_profile: unknown body profile 'json'; choose one of "
         "chat, reasoning, completion"),
        ({"body_profile": "chat"}, "p: body_profile chat is the default and is never written"),
        ({"max_tokens": None}, "p: max_tokens must be a positive integer"),
        ({"max_tokens": 0}, "p: max_tokens must be a positive integer"),
        ({"max_tokens": -1}, "p: max_tokens must be a positive integer"),
        ({"max_tokens": True}, "p: max_tokens must be a positive integer"),
        ({"max_tokens": 1.0}, "p: max_tokens must be a positive integer"),
        ({"reasoning_effort": "low"}, "p: field 'reasoning_effort' is not sent by body "
         "profile chat"),
        ({"answer_cue": "A:"}, "p: field 'answer_cue' is not sent by body profile chat"),
        ({"max_completion_tokens": 5}, "p: field 'max_completion_tokens' is not sent by body "
         "profile chat"),
        ({"stop": "\n"}, "p: stop must be a list of 1 to 4 strings"),
    ],
)  # fmt: skip
def test_chat_refusals_name_the_place_and_the_field(change: dict, message: str) -> None:
    assert refusal(lambda: profiles.validate_body_fields(CHAT | change, "p")) == message


def test_a_missing_required_field_names_the_profile() -> None:
    chat = {k: v for k, v in CHAT.items() if k != "temperature"}
    assert refusal(lambda: profiles.validate_body_fields(chat, "p")) == (
        "p: missing field 'temperature' (body profile chat)"
    )
    cueless = {k: v for k, v in COMPLETION.items() if k != "answer_cue"}
    assert refusal(lambda: profiles.validate_body_fields(cueless, "p")) == (
        "p: missing field 'answer_cue' (body profile completion)"
    )


@pytest.mark.parametrize(
    ("base", "field"),
    [
        (CHAT, "temperature"),
        (CHAT, "max_tokens"),
        (REASONING, "max_completion_tokens"),
        (COMPLETION, "temperature"),
        (COMPLETION, "max_tokens"),
        (COMPLETION, "stop"),
        (COMPLETION, "answer_cue"),
    ],
)
def test_every_required_field_of_every_profile_is_refused_when_missing(
    base: dict[str, Any], field: str
) -> None:
    # Each profile's required set, field by field: a budget left out would otherwise surface as
    # a KeyError further down, and a completion body without its temperature would be accepted.
    profile = base.get("body_profile", "chat")
    body = {k: v for k, v in base.items() if k != field}
    assert refusal(lambda: profiles.validate_body_fields(body, "p")) == (
        f"p: missing field {field!r} (body profile {profile})"
    )


def test_the_smallest_budget_and_a_one_character_effort_are_accepted() -> None:
    profiles.validate_body_fields(CHAT | {"max_tokens": 1}, "p")
    profiles.validate_body_fields(REASONING | {"reasoning_effort": "x"}, "p")


@pytest.mark.parametrize("effort", ["", None, 3])
def test_reasoning_effort_must_be_a_non_empty_string(effort: Any) -> None:
    assert refusal(
        lambda: profiles.validate_body_fields(REASONING | {"reasoning_effort": effort}, "p")
    ) == ("p: reasoning_effort must be a non-empty string")


def test_reasoning_refuses_the_chat_budget_and_temperature() -> None:
    assert refusal(lambda: profiles.validate_body_fields(REASONING | {"temperature": 0}, "p")) == (
        "p: field 'temperature' is not sent by body profile reasoning"
    )
    assert refusal(
        lambda: profiles.validate_body_fields(REASONING | {"max_completion_tokens": 0}, "p")
    ) == ("p: max_completion_tokens must be a positive integer")


@pytest.mark.parametrize("cue", ["Answer AB-1234:", 7, None])
def test_the_answer_cue_must_be_a_string_without_a_code(cue: Any) -> None:
    assert refusal(
        lambda: profiles.validate_body_fields(COMPLETION | {"answer_cue": cue}, "p")
    ) == ("p: answer_cue must be a string without a code")


@pytest.mark.parametrize(
    ("stop", "message"),
    [
        ([], "p: stop must be a list of 1 to 4 strings"),
        (["a", "b", "c", "d", "e"], "p: stop must be a list of 1 to 4 strings"),
        (("\n",), "p: stop must be a list of 1 to 4 strings"),
        ([""], "p: every stop sequence must be a non-empty string"),
        ([5], "p: every stop sequence must be a non-empty string"),
        (["AB"], "p: stop sequence 'AB' could cut an answer short"),
        (["B-12"], "p: stop sequence 'B-12' could cut an answer short"),
        (["1234"], "p: stop sequence '1234' could cut an answer short"),
        (["KNOW"], "p: stop sequence 'KNOW' could cut an answer short"),
        (["\n", "x", "\n"], "p: stop repeats a sequence"),
    ],
)
def test_stop_refusals_are_exact(stop: Any, message: str) -> None:
    assert refusal(lambda: profiles.validate_body_fields(COMPLETION | {"stop": stop}, "p")) == (
        message
    )


def test_one_and_four_stop_sequences_are_accepted() -> None:
    profiles.validate_body_fields(COMPLETION | {"stop": ["\n"]}, "p")
    profiles.validate_body_fields(COMPLETION | {"stop": ["\n", "x", "y", "ab"]}, "p")


def test_convert_to_reasoning_moves_the_budget_and_drops_temperature() -> None:
    out = profiles.convert(CHAT | {"stop": ["\n"]}, "reasoning")
    assert out == {
        "model": "m-1",
        "unknown": "UNKNOWN",
        "code_pattern": "[A-Z]{2}-[0-9]{4}",
        "cases": 4,
        "body_profile": "reasoning",
        "max_completion_tokens": 1024,
        "stop": ["\n"],
    }


def test_convert_to_chat_keeps_temperature_or_sets_zero() -> None:
    out = profiles.convert(REASONING | {"reasoning_effort": "low"}, "chat")
    assert out == {k: v for k, v in CHAT.items()} | {"max_tokens": 512}
    assert profiles.convert(CHAT | {"temperature": 0.7}, "chat")["temperature"] == 0.7


def test_convert_to_completion_adds_the_default_stop_and_cue_or_keeps_its_own() -> None:
    out = profiles.convert(CHAT, "completion")
    assert out == CHAT | {"body_profile": "completion", "stop": ["\n"], "answer_cue": "\nAnswer:"}
    own = profiles.convert(CHAT | {"stop": ["#"], "answer_cue": "\nA:"}, "completion")
    assert (own["stop"], own["answer_cue"]) == (["#"], "\nA:")


def test_convert_refuses_an_unknown_profile_and_leaves_the_source_alone() -> None:
    source = COMPLETION | {"stop": ["\n"]}
    with pytest.raises(NeedlepointError, match=re.escape("unknown body profile 'json'")):
        profiles.convert(source, "json")
    profiles.convert(source, "reasoning")["stop"].append("x")
    assert source["stop"] == ["\n"]


def test_make_variant_changes_only_what_it_is_given() -> None:
    assert profiles.make_variant(CHAT) == CHAT
    assert profiles.make_variant(CHAT, "m-2") == CHAT | {"model": "m-2"}
    assert profiles.make_variant(CHAT, None, "reasoning")["model"] == "m-1"
    assert profiles.make_variant(CHAT, "m-3", "reasoning")["body_profile"] == "reasoning"


@pytest.mark.parametrize("model", ["", " ", " m", "m ", 5])
def test_make_variant_refuses_a_blank_or_padded_model(model: Any) -> None:
    assert refusal(lambda: profiles.make_variant(CHAT, model)) == (
        f"--model {model!r}: a model name must be non-empty, without surrounding spaces"
    )


def test_a_protocol_without_a_cue_passes_whatever_its_code_pattern() -> None:
    profiles.validate_body_fields(CHAT | {"code_pattern": "[A-Z]{4}"}, "p")
    profiles.validate_body_fields(CHAT | {"code_pattern": ".+"}, "p")


def test_convert_to_reasoning_carries_the_effort() -> None:
    out = profiles.convert(REASONING | {"reasoning_effort": "high"}, "reasoning")
    assert out == REASONING | {"reasoning_effort": "high"}
    assert "reasoning_effort" not in profiles.convert(REASONING, "reasoning")


@pytest.mark.parametrize("profile", profiles.PROFILES)
def test_a_converted_or_variant_protocol_shares_nothing_with_its_source(profile: str) -> None:
    source = CHAT | {"names": {"places": ["Ash"]}, "temperature": {"t": [0]}}
    for out in (profiles.convert(source, profile), profiles.make_variant(source, "m-9", profile)):
        out["names"]["places"].append("Elm")
        if "temperature" in out:
            out["temperature"]["t"].append(1)
    out = profiles.make_variant(source, "m-9")
    out["names"]["places"].append("Oak")
    assert source["names"] == {"places": ["Ash"]} and source["temperature"] == {"t": [0]}
