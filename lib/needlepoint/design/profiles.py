"""Body profiles: the shape of a protocol's frozen request bodies for one kind of endpoint.

- ``chat`` (the default, v1's body): chat completions with ``temperature`` and ``max_tokens``.
- ``reasoning``: chat completions for reasoning models, which refuse ``temperature`` and take
  ``max_completion_tokens``, plus an optional frozen ``reasoning_effort``.
- ``completion``: the legacy completions endpoint for base models: one ``prompt`` built from the
  system and user texts by the rule in PROTOCOL.md, with frozen ``stop`` sequences.

A profile never changes the design (materials, order, templates, scoring, analysis): it is part
of a *model variant*, like the model name. PROTOCOL.md states every rule here.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from needlepoint.design.schema import BODY_FIELDS
from needlepoint.errors import NeedlepointError

PROFILES = ("chat", "reasoning", "completion")
DEFAULT_PROFILE = "chat"
# Path below the base URL that each profile's bodies are posted to.
ENDPOINTS = {
    "chat": "/chat/completions",
    "reasoning": "/chat/completions",
    "completion": "/completions",
}
# What `--body-profile completion` freezes when the protocol names none: answers are one line.
DEFAULT_STOP = ("\n",)
DEFAULT_ANSWER_CUE = "\nAnswer:"
# Separates the system text from the user text in a completion prompt.
PROMPT_SEPARATOR = "\n\n"
MAX_STOP_SEQUENCES = 4

# Body fields absent from v1: a protocol may hold them, the reference never does.
OPTIONAL_FIELDS = (
    "body_profile",
    "max_completion_tokens",
    "reasoning_effort",
    "stop",
    "answer_cue",
)
_REQUIRED = {
    "chat": ("temperature", "max_tokens"),
    "reasoning": ("max_completion_tokens",),
    "completion": ("temperature", "max_tokens", "stop", "answer_cue"),
}
_ALLOWED = {
    "chat": ("temperature", "max_tokens", "stop"),
    "reasoning": ("max_completion_tokens", "reasoning_effort", "stop"),
    "completion": ("temperature", "max_tokens", "stop", "answer_cue"),
}
# Any substring of a code ([A-Z]{2}-[0-9]{4}): a stop sequence like this could cut an answer.
_CODE_PIECE = re.compile(r"[A-Z]{1,2}|[A-Z]{0,2}-[0-9]{0,4}|[0-9]{1,4}")


def body_profile(protocol: dict[str, Any]) -> str:
    """The protocol's body profile; a protocol without ``body_profile`` is ``chat``."""
    return str(protocol.get("body_profile", DEFAULT_PROFILE))


def check_profile_name(profile: Any, where: str = "--body-profile") -> str:
    """The profile name, or a one-line error listing the known ones."""
    if profile not in PROFILES:
        raise NeedlepointError(
            f"{where}: unknown body profile {profile!r}; choose one of {', '.join(PROFILES)}"
        )
    return str(profile)


def allowed_fields(profile: str) -> tuple[str, ...]:
    """The body fields (besides ``model`` and ``body_profile``) a profile's protocol may hold."""
    return _ALLOWED[check_profile_name(profile)]


def completion_prompt(system: str, user: str, answer_cue: str) -> str:
    """The completion profile's prompt: system text, a blank line, user text, the answer cue."""
    return system + PROMPT_SEPARATOR + user + answer_cue


def build_body(protocol: dict[str, Any], system: str, user: str) -> dict[str, Any]:
    """One request body in the protocol's profile; every value copied from the protocol as read."""
    profile = body_profile(protocol)
    body: dict[str, Any] = {"model": protocol["model"]}
    if profile == "completion":
        body["prompt"] = completion_prompt(system, user, protocol["answer_cue"])
    else:
        body["messages"] = [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ]
    for key in _ALLOWED[profile]:
        if key in protocol and key != "answer_cue":
            body[key] = protocol[key]
    return body


def text_chars(body: dict[str, Any]) -> int:
    """Characters of text a body sends: its messages' contents, or its prompt."""
    if "prompt" in body:
        return len(body["prompt"])
    return sum(len(m["content"]) for m in body["messages"])


def budget_field(protocol: dict[str, Any]) -> str:
    """The body field that caps the completion: ``max_tokens`` or ``max_completion_tokens``."""
    return "max_completion_tokens" if body_profile(protocol) == "reasoning" else "max_tokens"


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def validate_body_fields(p: dict[str, Any], where: str) -> None:
    """Refuse body fields that the protocol's profile does not send, or values it cannot send."""
    profile = check_profile_name(p.get("body_profile", DEFAULT_PROFILE), f"{where}: body_profile")
    if p.get("body_profile") == DEFAULT_PROFILE:
        raise NeedlepointError(f"{where}: body_profile chat is the default and is never written")
    for key in _REQUIRED[profile]:
        if key not in p:
            raise NeedlepointError(f"{where}: missing field {key!r} (body profile {profile})")
    for key in BODY_FIELDS[1:]:
        if key in p and key not in _ALLOWED[profile]:
            raise NeedlepointError(f"{where}: field {key!r} is not sent by body profile {profile}")
    budget = budget_field(p)
    if not _positive_int(p[budget]):
        raise NeedlepointError(f"{where}: {budget} must be a positive integer")
    effort = p.get("reasoning_effort", "x")
    if not isinstance(effort, str) or not effort:
        raise NeedlepointError(f"{where}: reasoning_effort must be a non-empty string")
    if "stop" in p:
        _validate_stop(p["stop"], p["unknown"], where)
    cue = p.get("answer_cue", "")
    if not isinstance(cue, str) or re.search(p["code_pattern"], cue):
        raise NeedlepointError(f"{where}: answer_cue must be a string without a code")


def _validate_stop(stop: Any, unknown: str, where: str) -> None:
    if not isinstance(stop, list) or not 1 <= len(stop) <= MAX_STOP_SEQUENCES:
        raise NeedlepointError(f"{where}: stop must be a list of 1 to {MAX_STOP_SEQUENCES} strings")
    for s in stop:
        if not isinstance(s, str) or not s:
            raise NeedlepointError(f"{where}: every stop sequence must be a non-empty string")
        # A stop sequence inside a correct answer would cut it: no answer could be scored right.
        if _CODE_PIECE.fullmatch(s) or s in unknown:
            raise NeedlepointError(f"{where}: stop sequence {s!r} could cut an answer short")
    if len(set(stop)) != len(stop):
        raise NeedlepointError(f"{where}: stop repeats a sequence")


def convert(protocol: dict[str, Any], profile: str) -> dict[str, Any]:
    """The protocol with its body fields in ``profile``, by the rules PROTOCOL.md states.

    The completion budget carries over (``max_tokens`` <-> ``max_completion_tokens``), as do
    ``stop`` and, where the profile takes them, ``temperature`` (0 when there was none),
    ``reasoning_effort`` and ``answer_cue``; completion adds the default stop and cue if needed.
    """
    check_profile_name(profile)
    out = copy.deepcopy(protocol)
    for key in BODY_FIELDS:
        out.pop(key, None)
    budget = protocol.get("max_tokens", protocol.get("max_completion_tokens"))
    if profile == "reasoning":
        out["body_profile"] = profile
        out["max_completion_tokens"] = budget
        if "reasoning_effort" in protocol:
            out["reasoning_effort"] = protocol["reasoning_effort"]
    else:
        out["temperature"] = copy.deepcopy(protocol.get("temperature", 0))
        out["max_tokens"] = budget
    if "stop" in protocol:
        out["stop"] = list(protocol["stop"])
    if profile == "completion":
        out["body_profile"] = profile
        out.setdefault("stop", list(DEFAULT_STOP))
        out["answer_cue"] = protocol.get("answer_cue", DEFAULT_ANSWER_CUE)
    return out


def make_variant(
    protocol: dict[str, Any], model: str | None = None, profile: str | None = None
) -> dict[str, Any]:
    """A model variant of a protocol: another model and/or body profile, the same design."""
    out = copy.deepcopy(protocol)
    if model is not None:
        if not isinstance(model, str) or not model.strip() or model != model.strip():
            raise NeedlepointError(
                f"--model {model!r}: a model name must be non-empty, without surrounding spaces"
            )
        out["model"] = model
    if profile is not None:
        out = convert(out, profile)
    return out
