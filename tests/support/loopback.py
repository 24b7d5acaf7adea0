"""A small OpenAI-compatible server on 127.0.0.1 that misbehaves on request.

It answers ``POST /v1/chat/completions`` (``message.content``) and ``POST /v1/completions``
(``text``, for the completion body profile), and ``GET /v1/models`` with its model list (401
when it was given a ``key`` and the request carries another); any other path gets 404, as
llama.cpp answers.

Tests and the runner benchmark talk to it over a real socket, so the runner's transport,
timeouts and deadline are exercised as they will be against a provider. Each request consumes
the next *mode* from a script (``normal`` when the script is empty); the server counts every
request it received, which is how the tests prove that nothing was retried.

Modes: ``normal``, ``content:TEXT``, ``length``, ``wrong_model``, ``empty``, ``no_usage``,
``broken_json``, ``status:CODE``, ``hang:S``, ``slow:S``, ``trickle:S`` (body one byte every S
seconds), ``trickle_headers:S``, ``drop`` (close without answering), ``drop_mid`` (close
halfway through the body); for reasoning models: ``think:TEXT`` (a leading
``<think>TEXT</think>`` before the answer), ``reasoning:TEXT`` (``message.reasoning_content``
beside the answer) and ``length_empty`` (``finish_reason: length``, empty content: the budget
went into reasoning). The last three report ``completion_tokens_details.reasoning_tokens``.
``serve:NAME`` sends a hostile body registered with ``serve()``: exact bytes and headers, for
example a gzip bomb or a lone surrogate.

``tokenizer="vllm"`` or ``"llama.cpp"`` adds that server's tokenize routes at the root
(``check-endpoint --tokens``), with a stand-in tokenizer (``fake_tokens``: one token per word,
plus a fixed template cost) and ``window`` as the reported context; ``"raw"`` answers every
tokenize route with the bytes of ``tokenize_raw`` (a hostile server). They consume no scripted
mode and are counted with mode ``tokenize``.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    """One request as the server saw it."""

    number: int
    mode: str
    sha256: str
    authorization: str
    received: float
    path: str = "/v1/chat/completions"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, fmt: str, *args: Any) -> None:  # silence the default stderr log
        pass

    def do_GET(self) -> None:
        owner = self.server.owner
        auth = self.headers.get("Authorization", "")
        number = owner._record_get(auth, self.path)
        if owner.tokenizer == "llama.cpp" and self.path == "/props":
            props = {"default_generation_settings": {"n_ctx": owner.window}, "total_slots": 1}
            self._send(200, json.dumps(props).encode(), number)
        elif self.path != "/v1/models":
            self._send(404, b'{"detail": "Not Found"}', number)
        elif owner.key is not None and auth != f"Bearer {owner.key}":
            self._send(401, b'{"error": {"message": "invalid api key"}}', number)
        else:
            data = [{"id": m, "object": "model", "owned_by": "loopback"} for m in owner.models]
            if owner.tokenizer == "vllm":
                data = [dict(d, max_model_len=owner.window) for d in data]
            self._send(200, json.dumps({"object": "list", "data": data}).encode(), number)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        owner = self.server.owner
        if owner.tokenizer and self.path in ("/tokenize", "/apply-template"):
            self._tokenize(body, owner)
            return
        number, mode = owner._record(body, self.headers.get("Authorization", ""), self.path)
        if self.path not in ("/v1/chat/completions", "/v1/completions"):
            self._send(404, b'{"detail": "Not Found"}', number)
            return
        completion = self.path == "/v1/completions"
        name, _, arg = mode.partition(":")
        try:
            payload = json.loads(body)
        except ValueError:
            payload = {}
        content = owner.answer(body, payload) if name != "content" else arg
        stop = owner._stop
        if name == "drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if name in ("hang", "slow"):
            stop.wait(float(arg or 30))
        elif owner.delay_s:
            stop.wait(owner.delay_s)  # a server that takes time to answer, like a model
        if name == "status":
            code = int(arg)
            self._send(code, json.dumps({"error": {"message": f"status {code}"}}).encode(), number)
            return
        if name == "broken_json":
            self._send(200, b'{"choices": [{"message": ', number)
            return
        if name == "serve":
            out, extra, code = owner.served[arg]
            self._send(code, out(payload) if callable(out) else out, number, extra)
            return
        if name in ("empty", "length_empty"):
            content = ""
        elif name == "think":
            content = f"<think>{arg}</think>\n{content}"
        choice: dict[str, Any] = {
            "index": 0,
            "finish_reason": "length" if name in ("length", "length_empty") else "stop",
        }
        if completion:
            choice["text"] = content
        else:
            choice["message"] = {"role": "assistant", "content": content}
            if name == "reasoning":
                choice["message"]["reasoning_content"] = arg
        data = {
            "id": f"{'cmpl' if completion else 'chatcmpl'}-loop-{number}",
            "object": "text_completion" if completion else "chat.completion",
            "created": 0,
            "model": "other-model" if name == "wrong_model" else payload.get("model"),
            "choices": [choice],
        }
        if name != "no_usage":
            prompt = len(body) // 4
            data["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": 3,
                "total_tokens": prompt + 3,
            }
            if name in ("think", "reasoning", "length_empty"):
                spent = {"length_empty": 3}.get(name, 2)
                data["usage"]["completion_tokens_details"] = {"reasoning_tokens": spent}
        out = json.dumps(data).encode()
        if name == "trickle_headers":
            self._trickle_headers(out, float(arg or 0.05), stop)
        elif name == "trickle":
            self._send_headers(200, len(out), number)
            for i in range(len(out)):
                if stop.wait(float(arg or 0.05)):
                    return
                self.wfile.write(out[i : i + 1])
                self.wfile.flush()
        elif name == "drop_mid":
            self._send_headers(200, len(out), number)
            self.wfile.write(out[: len(out) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        else:
            self._send(200, out, number)

    def _tokenize(self, body: bytes, owner: LoopbackServer) -> None:
        """vLLM's or llama.cpp's tokenize routes, with the stand-in tokenizer."""
        number = owner._record_get(self.headers.get("Authorization", ""), self.path, "tokenize")
        if owner.tokenizer == "raw":  # a hostile server: these exact bytes on every route
            self._send(200, owner.tokenize_raw, number)
            return
        payload = json.loads(body)
        if owner.tokenizer == "vllm":
            if self.path != "/tokenize":
                self._send(404, b'{"detail": "Not Found"}', number)
                return
            if "messages" in payload:
                count = fake_tokens(render_template(payload["messages"]))
            else:
                count = fake_tokens(payload["prompt"])
            out = {"count": count, "max_model_len": owner.window, "tokens": list(range(count))}
        elif self.path == "/apply-template":
            out = {"prompt": render_template(payload["messages"])}
        else:  # llama.cpp answers a body without content with no tokens
            content = payload.get("content")
            out = {"tokens": list(range(fake_tokens(content))) if content else []}
        self._send(200, json.dumps(out).encode(), number)

    def _send_headers(
        self, code: int, length: int, number: int, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(length))
        self.send_header("x-request-id", f"loop-{number}")
        self.send_header("Connection", "close")
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()

    def _send(
        self, code: int, out: bytes, number: int, extra: dict[str, str] | None = None
    ) -> None:
        self._send_headers(code, len(out), number, extra)
        self.wfile.write(out)

    def _trickle_headers(self, out: bytes, interval: float, stop: threading.Event) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        head += f"Content-Length: {len(out)}\r\nConnection: close\r\n".encode()
        head += b"X-Padding: " + b"x" * 400 + b"\r\n\r\n"
        for i in range(len(head)):
            if stop.wait(interval):
                return
            self.wfile.write(head[i : i + 1])
            self.wfile.flush()
        self.wfile.write(out)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver listens with a backlog of 5; a run with 8 requests in flight on a loaded
    # machine can find the accept queue full, and that request never reaches the count.
    request_queue_size = 64
    owner: LoopbackServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (deadline, timeout) breaks the pipe: expected, not news.
        pass


class LoopbackServer:
    """Start with ``with LoopbackServer() as server:``; ``server.base_url`` ends in ``/v1``."""

    def __init__(
        self,
        answer: Callable[[bytes, dict[str, Any]], str] | None = None,
        delay_s: float = 0.0,
        port: int = 0,
        models: Iterable[str] = ("agnes-3.0-flash",),
        key: str | None = None,
        tokenizer: str | None = None,
        window: int = 4096,
    ) -> None:
        self.answer = answer or (lambda body, payload: "UNKNOWN")
        self.tokenizer = tokenizer  # None, "vllm" or "llama.cpp": its tokenize routes
        self.window = window  # the context it reports
        self.tokenize_raw = b""  # tokenizer="raw": what every tokenize route answers
        self.delay_s = delay_s
        self.models = list(models)  # what GET /v1/models lists
        self.key = key  # when set, GET /v1/models answers 401 to any other key
        self.requests: list[Received] = []
        # serve:NAME bodies: bytes, or a function of the request payload, with extra headers
        # and a status.
        self.served: dict[str, tuple[Any, dict[str, str], int]] = {}
        self._script: deque[str] = deque()
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._httpd = _Server(("127.0.0.1", port), _Handler)  # 0: any free port
        self._httpd.owner = self
        # A short poll interval so that stop() returns promptly.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def serve(
        self, name: str, body: Any, headers: dict[str, str] | None = None, status: int = 200
    ) -> str:
        """Register a body (with its headers and status) for mode ``serve:NAME``; return it."""
        self.served[name] = (body, headers or {}, status)
        return f"serve:{name}"

    def script(self, modes: Iterable[str]) -> None:
        """Queue modes for the next requests, in arrival order."""
        with self._lock:
            self._script.extend(modes)

    def wait_for(self, count: int, timeout: float = 10.0) -> bool:
        """Block until at least ``count`` requests have arrived."""
        with self._lock:
            return self._lock.wait_for(lambda: len(self.requests) >= count, timeout)

    def _record(self, body: bytes, authorization: str, path: str) -> tuple[int, str]:
        with self._lock:
            mode = self._script.popleft() if self._script else "normal"
            number = len(self.requests) + 1
            sha = hashlib.sha256(body).hexdigest()
            self.requests.append(Received(number, mode, sha, authorization, time.monotonic(), path))
            self._lock.notify_all()
            return number, mode

    def _record_get(self, authorization: str, path: str, mode: str = "get") -> int:
        """A GET (or a tokenize route) is counted like any request but consumes no mode."""
        with self._lock:
            number = len(self.requests) + 1
            self.requests.append(Received(number, mode, "", authorization, time.monotonic(), path))
            self._lock.notify_all()
            return number

    def start(self) -> LoopbackServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # releases hanging and trickling handlers
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def render_template(messages: list[dict[str, str]]) -> str:
    """The stand-in chat template: each message as ``<|role|>`` and its text, then the cue."""
    turns = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages)
    return turns + "<|assistant|>\n"


def fake_tokens(text: str) -> int:
    """The stand-in tokenizer: one token per whitespace-separated word, plus one (BOS)."""
    return len(text.split()) + 1


def answers_from(answer_key: dict[int, dict[str, Any]], bodies: dict[int, bytes]) -> Callable:
    """An ``answer`` function that replies with the expected answer of each frozen body."""
    table = {hashlib.sha256(bodies[s]).hexdigest(): answer_key[s]["expected"] for s in bodies}
    return lambda body, payload: table.get(hashlib.sha256(body).hexdigest(), "UNKNOWN")


def main(argv: list[str] | None = None) -> int:
    """``python tests/support/loopback.py PREPARED_DIR [--delay S]``: serve correct answers
    (each after S seconds) until stdin closes.

    Prints the base URL on the first line, for benchmarks and manual tries in another process.
    """
    import argparse
    import sys

    from needlepoint.design.prepared import load_prepared

    parser = argparse.ArgumentParser(prog="loopback.py")
    parser.add_argument("prepared", help="prepared folder whose answers to serve")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    args = parser.parse_args(argv)
    p = load_prepared(args.prepared)
    with LoopbackServer(answers_from(p.answer_key, p.bodies), args.delay) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
