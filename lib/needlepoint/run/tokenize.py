"""`check-endpoint DIR --tokens`: whether the longest frozen request fits the served window.

A request whose prompt and completion budget exceed the server's context is answered with a 400
(or cut) mid-run, after requests were spent. Before a run, the longest request of the prepared
folder (by body bytes) is counted by the server itself, through its tokenize route, so the count
is the served model's tokenizer and chat template, not an estimate:

- **vLLM**: ``POST {root}/tokenize`` with the frozen ``messages`` (chat template applied, as a
  chat completion would) or ``prompt``; it answers ``count`` and ``max_model_len``, the window.
- **llama.cpp** (``llama-server``): ``POST {root}/apply-template`` renders the messages,
  ``POST {root}/tokenize`` counts the text (special tokens added and parsed, as the server does
  for a completion), and ``GET {root}/props`` reports ``n_ctx`` (its window).

``root`` is the base URL without its ``/v1``. No completion is sent, and nothing is written. A
server with neither route fails the check with one line saying so; the prompt is never guessed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from needlepoint.design.profiles import body_profile, budget_field

if TYPE_CHECKING:
    from needlepoint.design.prepared import Prepared
    from needlepoint.run.transport import Exchange

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
