"""`needlepoint check-endpoint`: whether an endpoint would take a run, before a run spends on it.

A wrong port used to cost the first planned request (journalled as ``connect_error``) and tied
the run folder to that URL. This check sends nothing from any plan and writes nothing: it
applies the runner's rule for the key (TLS, or a loopback host), reads the key from the
environment as the runner does, and asks ``GET {base}/models`` once, with the same client
(no retries, no proxies, the same timeouts, deadline and body bound). From the answer it says
whether the server was reached, whether the key was accepted and whether the model is listed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from needlepoint.run.options import (
    check_key_env_name,
    check_no_key,
    check_self_hosted,
    is_loopback,
    own_server,
    parse_base_url,
    read_key,
    short_key_warning,
)
from needlepoint.safetext import Scrubber, terminal

MODELS_PATH = "/models"
# A model list is small; a larger answer is not one.
MAX_MODELS_BYTES = 4 * 1024 * 1024
SHOWN_MODELS = 5


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, whether it passed, and what was seen."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class EndpointReport:
    """Every check made, in order; a failed check ends the list (later ones need it)."""

    base_url: str
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def lines(self) -> list[str]:
        sent = "nothing from a plan is sent"
        if any(c.name == "tokens" for c in self.checks):  # --tokens: one prompt, tokenized only
            sent = "the longest request's prompt is tokenized, no completion is sent"
        out = [f"check-endpoint {self.base_url} ({sent}; nothing is written)"]
        out += [f"{'ok  ' if c.ok else 'FAIL'}  {c.name}: {c.detail}" for c in self.checks]
        verdict = (
            "OK: reachable, key accepted, model listed"
            if self.ok
            else f"FAILED at {next(c.name for c in self.checks if not c.ok)}"
        )
        out.append(f"check-endpoint {verdict}")
        # Ids and error text come from the server: each value prints as one inert line.
        return [terminal(line) for line in out]


def _transport_check(base_url: str, allow_insecure_http: bool) -> Check:
    parts = parse_base_url(base_url)  # as `run` parses it: bad input is one line, exit 2
    host = parts.hostname
    if parts.scheme == "https":
        return Check("transport", True, f"https to {host} (its certificate is checked)")
    if is_loopback(host):
        return Check("transport", True, f"plain http to {host}, a loopback host: this machine")
    if allow_insecure_http:
        return Check("transport", True, f"plain http to {host}, allowed by --allow-insecure-http")
    return Check(
        "transport",
        False,
        f"plain http to {host}, which is not loopback: the key would travel unencrypted; use "
        "https, a loopback host (127.0.0.0/8, ::1, localhost), or --allow-insecure-http "
        "(nothing was sent)",
    )


def _listed(body: bytes) -> list[str] | None:
    """The model ids of an OpenAI-style ``{"data": [{"id": ...}]}`` answer; None if not one."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    data = value.get("data") if isinstance(value, dict) else None
    if not isinstance(data, list):
        return None
    return [str(m["id"]) for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]


def check_endpoint(
    base_url: str,
    model: str,
    api_key_env: str | None,
    *,
    allow_insecure_http: bool = False,
    timeout_s: float = 15.0,
    no_key: bool = False,
    self_hosted: str | None = None,
    tokens: Any = None,
    prepared: str | None = None,
) -> EndpointReport:
    """Check ``base_url`` for a run of ``model`` with the key in ``api_key_env`` (or none:
    ``no_key``, a server you own); ``tokens``, a prepared folder: count its longest request's
    prompt through the server's tokenize route too (``run.tokenize``).

    Bad input (no URL, no variable, no key) raises NeedlepointError; everything the endpoint
    does is a check that passes or fails.
    """
    from needlepoint.run.clock import RealClock
    from needlepoint.run.transport import Transport

    transport = _transport_check(base_url, allow_insecure_http or no_key)
    if not transport.ok:
        return EndpointReport(base_url, (transport,))
    check_self_hosted(self_hosted, base_url)
    check_no_key(no_key, api_key_env, base_url, self_hosted)
    if no_key:
        key = ""
        checks = [transport, Check("key", True, "none sent (--no-key: a server you own)")]
    else:
        check_key_env_name(api_key_env)
        key = read_key(str(api_key_env), test_key_ok=own_server(base_url, self_hosted))
        warned = short_key_warning(key, str(api_key_env), urlsplit(base_url).hostname)
        said = f"{api_key_env} is set ({len(key)} characters)"
        checks = [transport, Check("key", True, said if warned is None else f"{said}; {warned}")]
    scrub = Scrubber(key or None)  # every spelling of the key a server may echo, as `run` redacts
    client = Transport(
        base_url,
        api_key=key,
        timeout_s=timeout_s,
        deadline_s=2 * timeout_s,
        clock=RealClock(),
        max_body_bytes=MAX_MODELS_BYTES,
        path=MODELS_PATH,
    )
    try:
        exchange = client.send(client.build_get())
    finally:
        client.close()
    took = f"{exchange.latency_s:.2f} s"
    if exchange.error is not None:
        # The client's error may quote a header line the server sent (with the key in it).
        detail = scrub(exchange.error_detail or "")[:200]
        hint = " (is the host and port right?)" if exchange.error == "connect_error" else ""
        checks.append(Check(f"GET {MODELS_PATH}", False, f"{exchange.error}{hint}: {detail}"))
        return EndpointReport(base_url, tuple(checks))
    status = exchange.http_status
    checks.append(Check(f"GET {MODELS_PATH}", True, f"HTTP {status} in {took}"))
    if status in (401, 403):
        whose = "no key (--no-key) is" if no_key else f"the key in {api_key_env} is"
        checks.append(Check("auth", False, f"HTTP {status}: {whose} refused"))
        return EndpointReport(base_url, tuple(checks))
    if status != 200:
        checks.append(
            Check(
                "model list",
                False,
                f"HTTP {status}: no model list at {base_url.rstrip('/')}{MODELS_PATH} (the base "
                "URL is where /chat/completions lives, often ending in /v1)",
            )
        )
        return EndpointReport(base_url, tuple(checks))
    checks.append(Check("auth", True, "the key was accepted (or is not required)"))
    ids = _listed(exchange.body or b"")
    if ids is None:
        checks.append(Check("model list", False, "the answer is not a JSON model list (data)"))
    elif model in ids:
        checks.append(Check("model", True, f"{model} is listed ({len(ids)} models listed)"))
    else:
        shown = ", ".join(scrub(i)[:60] for i in ids[:SHOWN_MODELS]) or "none"
        more = f" and {len(ids) - SHOWN_MODELS} more" if len(ids) > SHOWN_MODELS else ""
        fix = _prepare_hint(prepared, [scrub(i) for i in ids])
        checks.append(Check("model", False, f"{model} is not listed; listed: {shown}{more}{fix}"))
    if tokens is not None and all(c.ok for c in checks):
        from needlepoint.run.tokenize import token_check

        fits, said = token_check(base_url, key or None, tokens, model, timeout_s, exchange.body)
        checks.append(Check("tokens", fits, said))
    return EndpointReport(base_url, tuple(checks))


def _prepare_hint(prepared: str | None, ids: list[str]) -> str:
    """The prepare command that freezes the design for a listed model (the only one listed,
    else the first), when the check was given the prepared folder; nothing otherwise."""
    from needlepoint.design.freeze import prepare_command

    if prepared is None or not ids or len(ids[0]) > 200 or not ids[0].isprintable():
        return ""
    which = "" if len(ids) == 1 else " (or another listed model)"
    return f"; to run the listed model{which}: {prepare_command(prepared, ids[0])}"
