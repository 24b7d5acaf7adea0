"""The run notebook's one entry point: a `transport` switch between simulation and a live API.

The notebook's parameters cell holds literals only, so the choice between a simulated and a live
run is made here, where a test can reach it, rather than in a notebook cell.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError

TRANSPORTS = ("simulate", "live")


def run_step(
    prepared_dir: str | Path,
    run_dir: str | Path,
    *,
    transport: str,
    allow: int,
    simulate: str = "position",
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = None,
    min_gap_s: float | None = None,
    override_reason: str | None = None,
    progress: str = "deterministic",
    run_meta: dict[str, Any] | None = None,
    **extra: Any,
) -> Any:
    """Run (or resume) the protocol: simulated offline, or live against an OpenAI-compatible API.

    Live runs read the key from the environment variable ``api_key_env`` only; the runner
    refuses to start without it, a base URL and the frozen model name. ``run_meta`` (for example
    a local server's facts) is stored in run.json; options left at ``None`` keep their defaults.
    """
    from needlepoint.run.loop import run_protocol

    if transport not in TRANSPORTS:
        raise NeedlepointError(
            f"transport must be one of {', '.join(TRANSPORTS)}, not {transport!r}"
        )
    options: dict[str, Any] = {"min_gap_s": min_gap_s, "override_reason": override_reason}
    options.update({k: v for k, v in extra.items() if v is not None})
    if transport == "simulate":
        options["simulate"] = simulate
    else:
        options.update(base_url=base_url, model=model, api_key_env=api_key_env)
    return run_protocol(
        prepared_dir, run_dir, allow=allow, progress=progress, run_meta=run_meta, **options
    )
