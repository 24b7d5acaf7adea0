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
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from needlepoint.design.profiles import body_profile, budget_field
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

if TYPE_CHECKING:
    from needlepoint.design.prepared import Prepared
    from needlepoint.run.transport import Exchange

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
    prompt through the server's tokenize route too (``token_check``, below).

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


# `check-endpoint DIR --tokens`: whether the longest frozen request fits the served window.
#
# A request whose prompt and completion budget exceed the server's context is answered with a 400
# (or cut) mid-run, after requests were spent. Before a run, the longest request of the prepared
# folder (by body bytes) is counted by the server itself, through its tokenize route, so the count
# is the served model's tokenizer and chat template, not an estimate:
#
# - **vLLM**: ``POST {root}/tokenize`` with the frozen ``messages`` (chat template applied, as a
#   chat completion would) or ``prompt``; it answers ``count`` and ``max_model_len``, the window.
# - **llama.cpp** (``llama-server``): ``POST {root}/apply-template`` renders the messages,
#   ``POST {root}/tokenize`` counts the text (special tokens added and parsed, as the server does
#   for a completion), and ``GET {root}/props`` reports ``n_ctx`` (its window).
#
# ``root`` is the base URL without its ``/v1``. No completion is sent, and nothing is written. A
# server with neither route fails the check with one line saying so; the prompt is never guessed.

TOKENIZE_PATH = "/tokenize"
TEMPLATE_PATH = "/apply-template"
PROPS_PATH = "/props"
# A tokenize answer lists every token id: a 100,000-token prompt is under 1 MiB of JSON.
MAX_ANSWER_BYTES = 16 * 1024 * 1024


def server_root(base_url: str) -> str:
    """The server's root: the base URL without a trailing ``/v1`` (where tokenize routes live)."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def longest_request(prepared: Prepared) -> tuple[int, bytes]:
    """The seq and frozen body of the longest request (most bytes; lowest seq on a tie)."""
    seq = min(prepared.bodies, key=lambda s: (-len(prepared.bodies[s]), s))
    return seq, prepared.bodies[seq]


class _Client:
    """One exchange at a time with the server's root, through the runner's transport (no
    retries, no proxies, the same timeouts and deadline, a bounded body)."""

    def __init__(self, root: str, key: str | None, timeout_s: float) -> None:
        from needlepoint.run.transport import Scrubber

        self.root, self.key, self.timeout_s = root, key, timeout_s
        self.scrub = Scrubber(key)

    def _send(self, path: str, payload: dict[str, Any] | None) -> Exchange:
        from needlepoint.run.clock import RealClock
        from needlepoint.run.transport import Transport

        client = Transport(
            self.root,
            api_key=self.key,
            timeout_s=self.timeout_s,
            deadline_s=2 * self.timeout_s,
            clock=RealClock(),
            max_body_bytes=MAX_ANSWER_BYTES,
            path=path,
        )
        try:
            if payload is None:
                return client.send(client.build_get())
            return client.send(client.build(json.dumps(payload, ensure_ascii=False).encode()))
        finally:
            client.close()

    def json(self, path: str, payload: dict[str, Any] | None = None) -> tuple[Any, str]:
        """The parsed JSON of a 200 answer (or None) and what happened, for the report line."""
        ex = self._send(path, payload)
        if ex.error is not None:
            return None, f"{path}: {ex.error}: {self.scrub(ex.error_detail)[:120]}"
        if ex.http_status != 200:
            return None, f"{path}: HTTP {ex.http_status}"
        try:
            return json.loads(ex.body or b""), f"{path}: HTTP 200"
        except (ValueError, RecursionError):
            return None, f"{path}: not JSON"


# A count or window past this is not one (a hostile server's 4,000-digit integer).
MAX_COUNT = 2**53


def _whole(value: Any) -> int | None:
    """A positive whole number a server reported, or None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_COUNT:
        return value
    return None


def _vllm(c: _Client, model: str, body: dict[str, Any], chat: bool) -> tuple[Any, str]:
    if chat:
        payload = {"model": model, "messages": body.get("messages"), "add_generation_prompt": True}
    else:
        payload = {"model": model, "prompt": body.get("prompt")}
    return c.json(TOKENIZE_PATH, payload)


def _llama_cpp(c: _Client, body: dict[str, Any], chat: bool) -> tuple[int | None, int | None, str]:
    """(count, window, what happened) through llama.cpp's routes."""
    text = body.get("prompt")
    if chat:
        rendered, said = c.json(TEMPLATE_PATH, {"messages": body.get("messages")})
        text = rendered.get("prompt") if isinstance(rendered, dict) else None
        if not isinstance(text, str):
            return None, None, f"{said} (no chat template applied, so the prompt is not counted)"
    answer, said = c.json(TOKENIZE_PATH, {"content": text, "add_special": True})
    tokens = answer.get("tokens") if isinstance(answer, dict) else None
    if not isinstance(tokens, list):
        return None, None, said
    props, _ = c.json(PROPS_PATH)
    settings = props.get("default_generation_settings") if isinstance(props, dict) else None
    window = _whole(settings.get("n_ctx")) if isinstance(settings, dict) else None
    if window is None and isinstance(props, dict):
        window = _whole(props.get("n_ctx"))
    return len(tokens), window, "llama.cpp"


def _listed_window(models_body: bytes | None, model: str) -> int | None:
    """``max_model_len`` of ``model`` in a vLLM ``/models`` answer, or None."""
    try:
        data = json.loads(models_body or b"").get("data")
    except (ValueError, RecursionError, AttributeError):
        return None
    for entry in data if isinstance(data, list) else []:
        if isinstance(entry, dict) and entry.get("id") == model:
            return _whole(entry.get("max_model_len"))
    return None


def token_check(
    base_url: str,
    key: str | None,
    prepared: Prepared | str | Path,
    model: str,
    timeout_s: float,
    models_body: bytes | None = None,
) -> tuple[bool, str]:
    """Count the longest request's prompt tokens with the server and compare the prompt plus
    its completion budget with the window the server reports: whether it fits, and one line."""
    if not hasattr(prepared, "bodies"):
        from needlepoint.design.prepared import load_prepared

        prepared = load_prepared(prepared)
    assert not isinstance(prepared, str | Path)
    protocol = prepared.protocol
    chat = body_profile(protocol) != "completion"
    seq, frozen = longest_request(prepared)
    body = json.loads(frozen)
    field = budget_field(protocol)
    budget = _whole(body.get(field)) or 0
    root = server_root(base_url)
    c = _Client(root, key, timeout_s)
    answer, said = _vllm(c, model, body, chat)
    count = window = None
    if isinstance(answer, dict) and _whole(answer.get("count")) is not None:
        count, window, source = answer["count"], _whole(answer.get("max_model_len")), "vLLM"
    elif said.endswith(("HTTP 404", "HTTP 405")) or "connect_error" in said:
        source = said  # no tokenize route at all: llama.cpp's is the same path
    else:  # a /tokenize that does not speak vLLM's shape: llama.cpp's
        count, window, llama = _llama_cpp(c, body, chat)
        source = llama if count is not None else f"{said}; {llama}"
    if count is None:
        return (
            False,
            f"no tokenize route answered at {root} ({source}); vLLM and llama.cpp serve POST "
            f"{TOKENIZE_PATH}: the prompt was not counted (no completion was sent)",
        )
    window = window or _listed_window(models_body, model)
    need = count + budget
    head = (
        f"seq {seq}, the longest request: {count} prompt tokens ({source} {TOKENIZE_PATH}) + "
        f"{budget} {field} = {need}"
    )
    if window is None:
        return False, f"{head}; the server reports no context window to compare"
    if need <= window:
        return True, f"{head}, fits the {window}-token window (no completion sent)"
    return (
        False,
        f"{head}, does NOT fit the {window}-token window: start the server with a larger "
        "context, or prepare shorter lengths (no completion was sent)",
    )
