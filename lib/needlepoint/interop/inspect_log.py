"""An inspect_ai log read with inspect's own reader, reduced to the plain facts the import checks.

The log (``.eval`` zip or ``.json``) is read by ``inspect_ai.log.read_eval_log`` (the header)
and ``read_eval_log_samples(resolve_attachments=True)`` (one sample at a time, long texts
restored from their ``attachment://`` references). Nothing of inspect's object model leaves this
module: each sample becomes a ``LoggedSample`` of plain values, each model call a ``LoggedCall``
holding the request and response exactly as the log recorded them (``ModelEvent.call``).

inspect_ai is an optional dependency (the ``inspect`` extra); without it the import says how to
install it, in one line. A log inspect cannot read, for whatever reason, is one line too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError

# A log bigger than this is refused before inspect reads it. inspect's reader parses a .json log
# whole (about six times its size in memory), an .eval zip one sample at a time.
MAX_LOG_BYTES = 1 << 30
MAX_JSON_LOG_BYTES = 32 << 20
# One member of an .eval zip (a sample, the header), unpacked.
MAX_MEMBER_BYTES = 256 << 20
INSTALL_HINT = "install the inspect extra: pip install -c constraints.txt -e '.[inspect]'"


@dataclass(frozen=True)
class LoggedCall:
    """One model event: the raw call as logged, when it started and ended, retries, cache."""

    request: Any  # the provider request as inspect logged it (a JSON object), or None
    response: Any  # the provider response as inspect logged it, or None
    started: float | None  # epoch seconds
    completed: float | None
    retries: int
    cache: str | None
    error: str | None
    config_max_retries: int | None  # the effective GenerateConfig.max_retries of this call
    config_unset: bool  # the event carries no config at all


@dataclass(frozen=True)
class LoggedSample:
    """One sample: its id and epoch, its model calls in log order, its error and retries."""

    id: str
    epoch: int
    calls: tuple[LoggedCall, ...]
    error: str | None
    error_retries: int
    output_model: str | None
    output_usage: dict[str, Any] | None  # inspect's own ModelUsage of the sample's output


@dataclass(frozen=True)
class LoggedEval:
    """The log's header: what ran, with which settings, and how it ended."""

    inspect_version: str
    status: str
    task: str
    model: str
    model_base_url: str | None
    model_args: dict[str, Any]
    metadata: dict[str, Any]
    epochs: int | None
    task_max_retries: int | None
    max_connections: int | None
    max_samples: int | None


def _epoch(value: Any) -> float | None:
    if isinstance(value, datetime):
        return value.timestamp()
    return None


def _require() -> Any:
    try:
        import inspect_ai.log as log_module
    except ImportError:
        raise NeedlepointError(f"reading an inspect log needs inspect_ai: {INSTALL_HINT}") from None
    return log_module


def _check_file(path: Path) -> None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise NeedlepointError(f"{path}: file not found") from None
    except OSError as exc:
        raise NeedlepointError(f"{path}: cannot read ({exc.strerror})") from None
    if not path.is_file():
        raise NeedlepointError(f"{path}: not a regular file")
    if st.st_size > MAX_LOG_BYTES:
        raise NeedlepointError(
            f"{path}: {st.st_size} bytes, more than an inspect log may hold here"
        )
    if path.suffix not in (".eval", ".json"):
        raise NeedlepointError(f"{path}: an inspect log ends in .eval or .json")
    if path.suffix == ".eval":
        _check_members(path)
    if path.suffix == ".json" and st.st_size > MAX_JSON_LOG_BYTES:
        raise NeedlepointError(
            f"{path}: a .json log of {st.st_size} bytes is read whole by inspect; past "
            f"{MAX_JSON_LOG_BYTES >> 20} MiB write the log as .eval (inspect's default), which "
            "is read one sample at a time"
        )


def _check_members(path: Path) -> None:
    """Refuse an .eval zip whose members would unpack past MAX_MEMBER_BYTES each (a zip bomb):
    inspect unpacks one sample at a time, but each whole. A zip that cannot be opened is left
    to inspect's reader, which says why."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            big = [i for i in z.infolist() if i.file_size > MAX_MEMBER_BYTES]
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return
    if big:
        raise NeedlepointError(
            f"{path}: member {big[0].filename[:80]!r} unpacks to {big[0].file_size} bytes, more "
            f"than {MAX_MEMBER_BYTES >> 20} MiB (not read)"
        )


def _unreadable(path: Path, exc: BaseException) -> NeedlepointError:
    detail = str(exc).splitlines()[0][:160] if str(exc) else ""
    return NeedlepointError(
        f"{path}: inspect_ai cannot read this log ({type(exc).__name__}{': ' if detail else ''}"
        f"{detail})"
    )


def read_header(path: str | Path) -> LoggedEval:
    """The log's header, read by inspect's ``read_eval_log(header_only=True)``."""
    p = Path(path)
    _check_file(p)
    log_module = _require()
    try:
        log = log_module.read_eval_log(str(p), header_only=True)
        spec = log.eval
        config = spec.config
        task_config = log.plan.config if log.plan is not None else None
        generate = spec.model_generate_config
        max_retries = generate.max_retries if generate is not None else None
        if max_retries is None and task_config is not None:
            max_retries = task_config.max_retries
        connections = generate.max_connections if generate is not None else None
        return LoggedEval(
            inspect_version=str(spec.packages.get("inspect_ai", "unknown")),
            status=str(log.status),
            task=str(spec.task),
            model=str(spec.model),
            model_base_url=spec.model_base_url,
            model_args=dict(spec.model_args or {}),
            metadata=dict(spec.metadata or {}),
            epochs=config.epochs,
            task_max_retries=max_retries,
            max_connections=connections,
            max_samples=config.max_samples,
        )
    except NeedlepointError:
        raise
    except Exception as exc:  # inspect's reader: zip, JSON and pydantic errors alike
        raise _unreadable(p, exc) from None


def _call(event: Any) -> LoggedCall:
    call = event.call
    config = event.config
    return LoggedCall(
        request=call.request if call is not None else None,
        response=call.response if call is not None else None,
        started=_epoch(event.timestamp),
        completed=_epoch(event.completed),
        retries=int(event.retries or 0),
        cache=event.cache,
        error=event.error,
        config_max_retries=config.max_retries if config is not None else None,
        config_unset=config is None,
    )


def _usage(output: Any) -> dict[str, Any] | None:
    usage = getattr(output, "usage", None)
    if usage is None:
        return None
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}


def read_samples(path: str | Path) -> Iterator[LoggedSample]:
    """Each sample of the log, one at a time, with attachments resolved."""
    p = Path(path)
    log_module = _require()
    try:
        for sample in log_module.read_eval_log_samples(
            str(p), all_samples_required=False, resolve_attachments=True
        ):
            calls = tuple(_call(e) for e in sample.events if getattr(e, "event", "") == "model")
            output = sample.output
            yield LoggedSample(
                id=str(sample.id),
                epoch=int(sample.epoch),
                calls=calls,
                error=sample.error.message if sample.error is not None else None,
                error_retries=len(sample.error_retries or ()),
                output_model=getattr(output, "model", None),
                output_usage=_usage(output),
            )
    except NeedlepointError:
        raise
    except Exception as exc:
        raise _unreadable(p, exc) from None


def read_agent_turns(path: str | Path) -> list[tuple[str, frozenset[str], str]]:
    """An inspect agent log as contamination turns: per sample, its user input text, the ids of
    its ``ToolEvent``s, and where it is (``--transcripts inspect:LOG``)."""
    p = Path(path)
    _check_file(p)
    log_module = _require()
    out = []
    try:
        for sample in log_module.read_eval_log_samples(
            str(p), all_samples_required=False, resolve_attachments=True
        ):
            messages = sample.input if isinstance(sample.input, list) else None
            if messages is None:
                question = str(sample.input)
            else:
                question = "\n".join(m.text for m in messages if m.role == "user")
            calls = frozenset(str(e.id) for e in sample.events if getattr(e, "event", "") == "tool")
            out.append((question, calls, f"{p.name} sample {sample.id} epoch {sample.epoch}"))
    except NeedlepointError:
        raise
    except Exception as exc:
        raise _unreadable(p, exc) from None
    return out
