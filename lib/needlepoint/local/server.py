"""Serve a packaged model offline with llama-cpp-python's OpenAI-compatible server.

The server is a child process on 127.0.0.1, stopped by its own process id, never by name.

Count every prepared request's prompt tokens with the served model's tokenizer, before a run.

A request whose prompt plus ``max_tokens`` exceeds the server's context is a preparation error:
the server would otherwise cut ``max_tokens`` silently or answer 400 mid-run. The counts go into
``token_counts.json`` beside the prepared files, tied to the prepared fingerprint and the GGUF.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.design.profiles import body_profile, budget_field
from needlepoint.errors import NeedlepointError
from needlepoint.local.model import (
    SERVER_DISTRIBUTION,
    SMOLLM2,
    PackagedModel,
    declared_sha256,
    gguf_sha256,
    locate_model,
    locate_server,
    model_spec,
    version_of,
)
from needlepoint.safeio import open_append

FACTS_FORMAT = 1

READY_TIMEOUT_S = 180.0

STOP_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Server:
    """A running server: where it listens and what it was started with."""

    base_url: str
    port: int
    pid: int
    alias: str
    model: PackagedModel
    model_path: Path
    n_ctx: int
    log_path: Path
    argv: tuple[str, ...]


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago (the server binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no server log)"
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) if kept else "(server log empty)"


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    # If this process is killed outright, the kernel stops the server too (Linux only).
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop our own child: SIGTERM lets uvicorn shut down; SIGKILL only if it does not."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_ready(proc: subprocess.Popen[bytes], server: Server, timeout_s: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise NeedlepointError(
                f"llama_cpp.server exited with status {proc.returncode} before answering; "
                f"last log lines ({server.log_path}): {_tail(server.log_path)}"
            )
        try:
            answer = httpx.get(server.base_url + "/v1/models", timeout=2.0)
            if answer.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise NeedlepointError(
                f"llama_cpp.server did not answer /v1/models within {timeout_s:.0f} s; "
                f"last log lines ({server.log_path}): {_tail(server.log_path)}"
            )
        time.sleep(0.25)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def _interrupt_on_sigterm() -> Iterator[None]:
    """Turn SIGTERM/SIGHUP into KeyboardInterrupt so `finally` blocks stop the server."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, _raise_interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def served_model(
    model: PackagedModel | str = SMOLLM2,
    *,
    n_ctx: int | None = None,
    port: int | None = None,
    log_path: str | os.PathLike[str] | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
    extra_args: Sequence[str] = (),
) -> Iterator[Server]:
    """Start the server on 127.0.0.1, yield once ``/v1/models`` answers, always stop it after."""
    spec = model_spec(model) if isinstance(model, str) else model
    locate_server()
    model_path = locate_model(spec)
    n_ctx = spec.window if n_ctx is None else n_ctx
    if n_ctx < 1 or n_ctx > spec.window:
        raise NeedlepointError(f"n_ctx {n_ctx} must be between 1 and {spec.window} for {spec.key}")
    port = free_port() if port is None else port
    if log_path is None:
        fd, name = tempfile.mkstemp(prefix="needlepoint-llama-server-", suffix=".log")
        os.close(fd)
        log_path = name
    log = Path(log_path)
    argv = (
        sys.executable, "-m", "llama_cpp.server", "--model", str(model_path),
        "--host", "127.0.0.1", "--port", str(port), "--model_alias", spec.alias,
        "--n_ctx", str(n_ctx), *extra_args,
    )  # fmt: skip
    with _interrupt_on_sigterm(), open_append(log) as log_fh:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log_fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches us; we stop the server ourselves
            preexec_fn=_die_with_parent,  # safe: this process starts no threads of its own
        )
        try:
            server = Server(
                base_url=f"http://127.0.0.1:{port}",
                port=port,
                pid=proc.pid,
                alias=spec.alias,
                model=spec,
                model_path=model_path,
                n_ctx=n_ctx,
                log_path=log,
                argv=argv,
            )
            _wait_ready(proc, server, ready_timeout_s)
            yield server
        finally:
            _stop(proc)


def server_facts(server: Server) -> dict[str, Any]:
    """What the run record must hold about the served model (issue 7), read live and from disk."""
    import httpx

    answer = httpx.get(server.base_url + "/v1/models", timeout=10.0)
    answer.raise_for_status()
    sha = gguf_sha256(server.model_path)
    recorded = declared_sha256(server.model)
    return {
        "format": FACTS_FORMAT,
        "models_response": answer.json(),
        "model_alias": server.alias,
        "n_ctx": server.n_ctx,
        "gguf": {
            "file": server.model_path.name,
            "sha256": sha,
            "bytes": server.model_path.stat().st_size,
            "package": server.model.distribution,
            "package_version": version_of(server.model.distribution),
            # The wheel's RECORD, for a GGUF assembled from chunk wheels their SHA256SUMS, or
            # the project's pinned SHA-256 where the chunk packages state none.
            "matches_wheel_record": None if recorded is None else recorded == sha,
            **({"pinned_sha256": True} if server.model.pinned_sha256 else {}),
            **_assembled_from(server.model),
        },
        "server": {
            "package": SERVER_DISTRIBUTION,
            "version": version_of(SERVER_DISTRIBUTION),
            # Machine-specific paths are cut to file names so two machines' records compare.
            "argv": ["python", *server.argv[1:4], server.model_path.name, *server.argv[5:]],
        },
    }


def _assembled_from(model: PackagedModel) -> dict[str, Any]:
    """The chunk packages of an assembled GGUF, with versions (nothing for a whole one)."""
    if not model.chunks:
        return {}
    return {
        "assembled_from": [
            {"package": c.distribution, "package_version": version_of(c.distribution)}
            for c in model.chunks
        ]
    }


TOKEN_COUNTS_FILE = "token_counts.json"
TOKEN_COUNTS_FORMAT = 1
TOKENIZE_ENDPOINT = "/extras/tokenize/count"

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class TokenReport:
    """The counts written to ``token_counts.json`` and the figures derived from them."""

    path: Path
    counts: dict[int, int]  # seq -> prompt tokens as the server will evaluate them
    n_ctx: int
    max_tokens: int
    by_length: dict[int, dict[str, int]]
    tokens_per_record: float | None

    def summary_line(self) -> str:
        """One line for the CLI: worst case against the context, per length."""
        spans = ", ".join(
            f"{n} records: {v['min']}-{v['max']} tokens" for n, v in sorted(self.by_length.items())
        )
        worst = max(self.counts.values()) + self.max_tokens
        per = "n/a" if self.tokens_per_record is None else f"{self.tokens_per_record:.1f}"
        return (
            f"{len(self.counts)} requests fit n_ctx {self.n_ctx} (worst prompt+max_tokens "
            f"{worst}); {spans}; {per} tokens per record; wrote {self.path}"
        )


@contextlib.contextmanager
def _quiet_stderr_fd() -> Iterator[None]:
    """Silence C-level writes to fd 2: llama.cpp warns about n_ctx on a vocabulary-only load."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def prompt_renderer(model_path: Path) -> tuple[str, Callable[[Messages], str]]:
    """Render chat messages into the prompt text exactly as the server's chat handler does.

    Loads only the GGUF's vocabulary (no weights) and uses llama-cpp-python's own Jinja
    formatter with the template stored in the GGUF, as ``Llama.__init__`` does for the server.
    """
    import llama_cpp
    from llama_cpp import llama_chat_format

    with _quiet_stderr_fd():  # failures still raise ValueError from Llama itself
        llm = llama_cpp.Llama(model_path=str(model_path), vocab_only=True, verbose=False)
    if llm.chat_format != "chat_template.default":
        raise NeedlepointError(
            f"{model_path.name}: server would use chat format {llm.chat_format!r}; only the "
            "GGUF's own template (chat_template.default) can be rendered for token counts"
        )
    eos, bos = llm.token_eos(), llm.token_bos()
    formatter = llama_chat_format.Jinja2ChatFormatter(
        template=llm.metadata["tokenizer.chat_template"],
        eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
        bos_token=llm._model.token_get_text(bos) if bos != -1 else "",
        stop_token_ids=[eos],
    )
    template = llm.metadata["tokenizer.chat_template"]
    return template, lambda messages: formatter(messages=messages).prompt


def count_tokens(server: Server, text: str) -> int:
    """Token count of ``text`` from the server's tokenize endpoint (special tokens parsed)."""
    import httpx

    answer = httpx.post(
        server.base_url + TOKENIZE_ENDPOINT, json={"input": text, "model": server.alias}, timeout=60
    )
    if answer.status_code != 200:
        raise NeedlepointError(f"{TOKENIZE_ENDPOINT} answered HTTP {answer.status_code}")
    count = answer.json().get("count")
    if not isinstance(count, int) or count < 1:
        raise NeedlepointError(f"{TOKENIZE_ENDPOINT} answered no usable count: {answer.text}")
    return count


def calibrate(
    server: Server, render: Callable[[dict[str, Any]], str], probe: dict[str, Any]
) -> int:
    """Check rendering + tokenize against a real completion's ``usage.prompt_tokens``.

    One tiny completion (max_tokens 1) of the ``probe`` body (``messages`` for chat,
    ``prompt`` for completions) proves that the counts below are the tokens the server
    evaluates, not an approximation; any difference is an error, never a correction.
    """
    import httpx

    counted = count_tokens(server, render(probe))
    body = {"model": server.alias, **probe, "max_tokens": 1, "temperature": 0}
    path = "/v1/completions" if "prompt" in probe else "/v1/chat/completions"
    answer = httpx.post(server.base_url + path, json=body, timeout=300)
    usage = answer.json().get("usage") or {} if answer.status_code == 200 else {}
    served = usage.get("prompt_tokens")
    if served != counted:
        raise NeedlepointError(
            f"token count check is not calibrated: tokenize says {counted}, a real completion "
            f"reports prompt_tokens {served!r} (HTTP {answer.status_code})"
        )
    return counted


def _slope(points: list[tuple[int, int]]) -> float | None:
    xs = {x for x, _ in points}
    if len(xs) < 2:
        return None
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    num = sum((x - mx) * (y - my) for x, y in points)
    return num / sum((x - mx) ** 2 for x, _ in points)


def check_token_counts(prepared_dir: str | Path, server: Server) -> TokenReport:
    """Count all prompts, refuse any that would not fit, then write ``token_counts.json``."""
    from needlepoint.design.prepared import load_prepared
    from needlepoint.jsonio import canonical_bytes, sha256_hex, write_bytes_atomic

    prepared = load_prepared(prepared_dir)
    where = prepared.root / "protocol.json"
    if prepared.protocol["model"] != server.alias:
        raise NeedlepointError(
            f"{where}: model {prepared.protocol['model']!r} is not the served {server.alias!r}"
        )
    template, render, probe = _renderer(prepared, server)
    calibrated = calibrate(server, render, probe)
    budget = budget_field(prepared.protocol)
    rows: list[dict[str, Any]] = []
    too_long: list[str] = []
    for row in prepared.plan:
        body = json.loads(prepared.bodies[row.seq])
        tokens = count_tokens(server, render(body))
        rows.append({"seq": row.seq, "length": row.length, "prompt_tokens": tokens})
        if tokens + body[budget] > server.n_ctx:
            too_long.append(f"seq {row.seq} needs {tokens}+{body[budget]}")
    if too_long:
        raise NeedlepointError(
            f"{prepared.root}: {len(too_long)} of {len(rows)} requests do not fit n_ctx "
            f"{server.n_ctx} (prompt+{budget}): {'; '.join(too_long[:3])}"
        )
    max_tokens = max(json.loads(b)[budget] for b in prepared.bodies.values())
    by_length: dict[int, dict[str, int]] = {}
    for r in rows:
        span = by_length.setdefault(r["length"], {"min": r["prompt_tokens"], "max": 0})
        span["min"] = min(span["min"], r["prompt_tokens"])
        span["max"] = max(span["max"], r["prompt_tokens"])
    per_record = _slope([(r["length"], r["prompt_tokens"]) for r in rows])
    record = {
        "format": TOKEN_COUNTS_FORMAT,
        "prepared_fingerprint": prepared.fingerprint,
        "model": server.alias,
        "n_ctx": server.n_ctx,
        "max_tokens": max_tokens,
        "fits": True,
        "tokenizer": {
            "endpoint": TOKENIZE_ENDPOINT,
            "gguf_file": server.model_path.name,
            "gguf_sha256": gguf_sha256(server.model_path),
            # None for the completion profile: the prompt is sent as it is, with no template.
            "chat_template_sha256": None if template is None else sha256_hex(template.encode()),
            "server_package": SERVER_DISTRIBUTION,
            "server_version": version_of(SERVER_DISTRIBUTION),
            "calibration_prompt_tokens": calibrated,
        },
        "by_length": {str(n): v for n, v in sorted(by_length.items())},
        "tokens_per_record": None if per_record is None else round(per_record, 3),
        "requests": rows,
    }
    path = prepared.root / TOKEN_COUNTS_FILE
    write_bytes_atomic(path, canonical_bytes(record) + b"\n")
    return TokenReport(
        path=path,
        counts={r["seq"]: r["prompt_tokens"] for r in rows},
        n_ctx=server.n_ctx,
        max_tokens=max_tokens,
        by_length=by_length,
        tokens_per_record=per_record,
    )


def _renderer(
    prepared: Any, server: Server
) -> tuple[str | None, Callable[[dict[str, Any]], str], dict[str, Any]]:
    """(chat template or None, body -> prompt text, a short probe body) for the frozen profile.

    A completion body's prompt is evaluated as it is; chat messages go through the GGUF's
    chat template, which a GGUF without one (a base model) cannot provide.
    """
    first = json.loads(prepared.bodies[prepared.plan[0].seq])
    if body_profile(prepared.protocol) == "completion":
        return None, lambda body: body["prompt"], {"prompt": first["prompt"][:200]}
    template, render_messages = prompt_renderer(server.model_path)
    messages = first["messages"]
    probe = [messages[0], {"role": "user", "content": messages[-1]["content"][:200]}]
    return template, lambda body: render_messages(body["messages"]), {"messages": probe}


# A local request's timeout: this many times the measured time of the longest prompt, and never
# under the floor the command was given. Why a multiple: the same prompt takes 2-4 times longer
# when other work shares the two cores (docs/local-model.md), and a timeout is indeterminate,
# never wrong, so a too-tight one loses answers rather than flattering the model.
TIMEOUT_FACTOR = 4


def time_longest_prompt(
    prepared_dir: str | Path, server: Server, report: TokenReport
) -> dict[str, Any]:
    """Send the longest frozen prompt once with a budget of one token and time it.

    Outside the run (it is not journalled): it only measures how long the server takes to read
    the longest prompt on this machine now, so that the run's timeout fits it.
    """
    import time

    import httpx

    from needlepoint.design.prepared import load_prepared

    prepared = load_prepared(prepared_dir)
    seq = max(report.counts, key=lambda s: (report.counts[s], -s))
    body = json.loads(prepared.bodies[seq]) | {budget_field(prepared.protocol): 1}
    body["model"] = server.alias
    path = "/v1/completions" if "prompt" in body else "/v1/chat/completions"
    start = time.perf_counter()
    answer = httpx.post(server.base_url + path, json=body, timeout=1800)
    seconds = time.perf_counter() - start
    if answer.status_code != 200:
        raise NeedlepointError(f"timing the longest prompt (seq {seq}): HTTP {answer.status_code}")
    return {"seq": seq, "prompt_tokens": report.counts[seq], "seconds": round(seconds, 3)}


def local_timeout(floor_s: float, measured: dict[str, Any]) -> dict[str, Any]:
    """The request timeout a local run uses, and how it was set (recorded in run.json)."""
    import math

    timeout = max(float(floor_s), float(math.ceil(TIMEOUT_FACTOR * measured["seconds"])))
    return {
        "timeout_s": timeout,
        "rule": f"max(--timeout-s {floor_s:g}, {TIMEOUT_FACTOR} x the longest prompt's time)",
        "longest_prompt": measured,
    }
