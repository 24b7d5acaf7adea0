"""The audit's body-profile and design-fingerprint rules, re-derived from PROTOCOL.md.

Part of the independent audit (see audit.py): it does not import the body builder
(``design.profiles``) or the fingerprint (``design.identity``), so a bug there cannot hide by
also being here.
"""

from __future__ import annotations

from typing import Any

from needlepoint.jsonio import canonical_bytes, sha256_hex

# PROTOCOL.md, "Design fingerprint": the design fields, whole. Written out again here rather
# than imported from design.identity: the audit must not share the generator side's code.
DESIGN_KEYS = (
    "analysis",
    "cases",
    "code_pattern",
    "conditions",
    "format",
    "lengths",
    "names",
    "orders",
    "protocol_id",
    "seeds",
    "similarities",
    "templates",
    "unknown",
)
# PROTOCOL.md, "Body profiles": the members each profile's body has besides its text, which are
# copied from protocol.json; a member in brackets is there exactly when protocol.json holds it.
_MEMBERS = {
    "chat": (("model", "temperature", "max_tokens"), ("stop",)),
    "reasoning": (("model", "max_completion_tokens"), ("reasoning_effort", "stop")),
    "completion": (("model", "temperature", "max_tokens", "stop"), ()),
}


def audited_design_fingerprint(protocol: dict[str, Any]) -> str | None:
    """SHA-256 of the canonical JSON of protocol.json's design fields; None when one is missing."""
    if not all(key in protocol for key in DESIGN_KEYS):
        return None
    return sha256_hex(canonical_bytes({key: protocol[key] for key in DESIGN_KEYS}))


def profile_of(protocol: dict[str, Any]) -> str:
    """protocol.json's body profile (``chat`` when it names none); unknown names stay as read."""
    return str(protocol.get("body_profile", "chat"))


def expected_keys(protocol: dict[str, Any]) -> list[str] | None:
    """The sorted member names every body must have; None for an unknown profile."""
    profile = profile_of(protocol)
    if profile not in _MEMBERS:
        return None
    always, optional = _MEMBERS[profile]
    text = "prompt" if profile == "completion" else "messages"
    return sorted([*always, *(k for k in optional if k in protocol), text])


def body_problem(body: Any, protocol: dict[str, Any]) -> str | None:
    """Why a body does not have its profile's shape and protocol values; None when it does."""
    keys = expected_keys(protocol)
    if keys is None:
        return f"unknown body profile {profile_of(protocol)!r}"
    if not isinstance(body, dict) or sorted(body) != keys:
        return f"body keys {sorted(body) if isinstance(body, dict) else body}, expected {keys}"
    for key in keys:
        if key in ("messages", "prompt"):
            continue
        # Compared as canonical bytes: 0, 0.0 and false are different bodies.
        if key not in protocol or canonical_bytes(body[key]) != canonical_bytes(protocol[key]):
            return f"{key} {body[key]!r} is not the protocol's {protocol.get(key)!r}"
    if "messages" in body:
        msgs = body["messages"]
        roles = (
            [m.get("role") if isinstance(m, dict) else None for m in msgs]
            if isinstance(msgs, list)
            else None
        )
        if roles != ["system", "user"] or any(
            sorted(m) != ["content", "role"] or not isinstance(m["content"], str) for m in msgs
        ):
            return "messages must be exactly system then user, each with a string content"
    elif split_prompt(body["prompt"], protocol) is None:
        return "prompt is not system text, a blank line, user text and the answer cue"
    return None


def split_prompt(prompt: Any, protocol: dict[str, Any]) -> tuple[str, str] | None:
    """(system, user) of a completion prompt: system + "\\n\\n" + user + answer_cue."""
    system = protocol.get("templates", {}).get("system")
    cue = protocol.get("answer_cue")
    if not isinstance(prompt, str) or not isinstance(system, str) or not isinstance(cue, str):
        return None
    head = system + "\n\n"
    if not prompt.startswith(head) or not prompt.endswith(cue) or len(prompt) < len(head + cue):
        return None
    return system, prompt[len(head) : len(prompt) - len(cue)]


def texts(body: Any, protocol: dict[str, Any]) -> tuple[str, str] | None:
    """(system text, user text) of a body of either shape; None when it has neither."""
    if not isinstance(body, dict):
        return None
    if "prompt" in body:
        return split_prompt(body["prompt"], protocol)
    try:
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    return (system, user) if isinstance(system, str) and isinstance(user, str) else None
