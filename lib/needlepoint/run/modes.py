"""The run notebook's one entry point: a `transport` switch between simulation and a live API.

The notebook's parameters cell holds literals only, so the choice between a simulated and a live
run is made here, where a test can reach it, rather than in a notebook cell.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.run.options import DEFAULT_TIMEOUT_S, RunOptions

TRANSPORTS = ("simulate", "live")


def run_step(
    prepared_dir: str | Path,
    run_dir: str | Path,
    *,
    transport: str,
    allow: int,
    simulate: str = "position",
    sim_params: dict[str, float] | None = None,
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = None,
    min_gap_s: float | None = None,
    override_reason: str | None = None,
    timeout_s: float | None = None,
    deadline_s: float | None = None,
    input_rate: float | None = None,
    output_rate: float | None = None,
    cost_cap: float | None = None,
    progress: str = "terminal",
    fsync: bool = True,
    run_meta: dict[str, Any] | None = None,
    declaration: str | Path | None = None,
) -> Any:
    """Run (or resume) the protocol: simulated offline, or live against an OpenAI-compatible API.

    The keywords are the run notebook's parameters; they become one ``RunOptions`` here. Live
    runs read the key from the environment variable ``api_key_env`` only; the runner refuses to
    start without it, a base URL and the frozen model name. ``run_meta`` (for example a local
    server's facts) is stored in run.json; options left at ``None`` keep their defaults.
    ``declaration``: the declaration file the run is started under.
    """
    from needlepoint.run.runner import run_protocol

    if transport not in TRANSPORTS:
        raise NeedlepointError(
            f"transport must be one of {', '.join(TRANSPORTS)}, not {transport!r}"
        )
    live = transport == "live"
    options = RunOptions(
        allow=allow,
        simulate=None if live else simulate,
        sim_params=sim_params,
        base_url=base_url if live else None,
        model=model if live else None,
        api_key_env=api_key_env if live else None,
        min_gap_s=min_gap_s,
        override_reason=override_reason,
        timeout_s=DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s,
        deadline_s=deadline_s,
        input_rate=input_rate,
        output_rate=output_rate,
        cost_cap=cost_cap,
        progress=progress,
        fsync=fsync,
        run_meta=run_meta,
        declaration=None if declaration is None else str(declaration),
    )
    return run_protocol(prepared_dir, run_dir, options, print)
