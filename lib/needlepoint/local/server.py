"""Serve a packaged model offline with llama-cpp-python's OpenAI-compatible server.

The server is a child process on 127.0.0.1, stopped by its own process id, never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
