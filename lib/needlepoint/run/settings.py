"""Everything the runner checks before it may spend anything; each refusal is one line.

A user's request is one ``RunOptions`` (built once by the CLI, the run notebook or a
benchmark); ``check_settings`` turns it into the checked ``Settings`` that the loop, the session
and the run folder read. A run starts only with an explicit positive allowance, a prepared
folder that passes verify and audit, and, for a live run, a base URL, the frozen model and a
key in the environment.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from needlepoint.design.prepared import frozen_model
from needlepoint.errors import NeedlepointError, looks_like_secret
from needlepoint.run import limits
from needlepoint.run.limits import MIN_KEY_LENGTH, is_loopback
from needlepoint.run.progress import PROGRESS_MODES

if TYPE_CHECKING:
    from needlepoint.design.prepared import Prepared
    from needlepoint.run.declaration import Declared
    from needlepoint.run.simulate import PositionParams

DEFAULT_TIMEOUT_S = 120.0
__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MIN_KEY_LENGTH",
    "CheckedOptions",
    "RunOptions",
    "Settings",
    "check_options",
    "check_prepared",
    "check_settings",
    "is_loopback",
]


@dataclass(frozen=True)
class RunOptions:
    """What a user asks of one run, unchecked: the `needlepoint run` flags as one record.

    ``None`` means "the default": the protocol's gap, twice the timeout as the deadline, no
    rates and no cap. ``run_meta`` is free-form JSON kept in run.json under ``extra`` (for
    example a local server's facts).
    """

    allow: int
    simulate: str | None = None
    sim_params: dict[str, float] | None = None
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    min_gap_s: float | None = None
    override_reason: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    deadline_s: float | None = None
    input_rate: float | None = None
    output_rate: float | None = None
    cost_cap: float | None = None
    progress: str = "auto"
    fsync: bool = True
    run_meta: dict[str, Any] | None = None
    allow_insecure_http: bool = False
    # A declaration file (`needlepoint declare`): its SHA-256 goes into run.json and the
    # journal's first record, before the first request.
    declaration: str | None = None


@dataclass(frozen=True)
class Settings:
    """A checked run configuration. The key is kept out of repr so it cannot leak into logs."""

    prepared: Prepared = field(repr=False)
    allow: int
    simulate: str | None
    sim_params: PositionParams | None
    base_url: str | None
    model: str
    api_key_env: str | None
    api_key: str | None = field(repr=False)
    min_gap_s: float
    protocol_min_gap_s: float
    override_reason: str | None
    timeout_s: float
    deadline_s: float
    input_rate: float | None
    output_rate: float | None
    cost_cap: float | None
    stop_statuses: frozenset[int]
    max_consecutive_failures: int
    progress: str
    fsync: bool
    run_meta: dict[str, Any] = field(default_factory=dict)
    allow_insecure_http: bool = False
    declaration: Declared | None = None

    @property
    def simulation(self) -> bool:
        return self.simulate is not None


def check_prepared(prepared_dir: str | Path) -> Prepared:
    """Verify and audit the prepared folder, then load it."""
    from needlepoint.design.audit import audit_prepared
    from needlepoint.design.prepared import load_prepared
    from needlepoint.design.verify import verify_prepared

    report = verify_prepared(prepared_dir)
    if not report.ok:
        raise NeedlepointError(f"{prepared_dir} fails verify: {report.problems[0]}")
    audit = audit_prepared(prepared_dir)
    if not audit.ok:
        failed = next(c for c in audit.checks if not c.ok)
        first = failed.failures[0] if failed.failures else "failed"
        raise NeedlepointError(f"{prepared_dir} fails audit: {failed.name}: {first}")
    return load_prepared(prepared_dir)


@dataclass(frozen=True)
class CheckedOptions:
    """The options that need no prepared folder, checked: numbers in range, endpoint, key."""

    allow: int
    timeout_s: float
    deadline_s: float
    input_rate: float | None
    output_rate: float | None
    cost_cap: float | None
    min_gap_s: float | None
    api_key: str | None


def check_options(options: RunOptions, *, read_key_now: bool = True) -> CheckedOptions:
    """Every check that needs no prepared folder; a pilot runs them before it creates one.

    ``read_key_now=False``: the key is read later (``run`` checks its folder first).
    """
    from needlepoint.run.simulate import SIM_MODES, PositionParams

    o = options
    if o.progress not in PROGRESS_MODES:
        raise NeedlepointError(f"progress must be one of {', '.join(PROGRESS_MODES)}")
    allow = limits.check_allow(o.allow)
    timeout = limits.number(
        "--timeout-s", o.timeout_s, low=limits.MIN_TIMEOUT_S, high=limits.MAX_SECONDS, positive=True
    )
    deadline = limits.number("deadline_s", o.deadline_s, high=2 * limits.MAX_SECONDS, positive=True)
    in_rate = limits.number("--input-rate", o.input_rate, high=limits.MAX_RATE)
    out_rate = limits.number("--output-rate", o.output_rate, high=limits.MAX_RATE)
    cap = limits.number("--cost-cap", o.cost_cap, high=limits.MAX_COST_CAP)
    gap = limits.number("--min-gap-s", o.min_gap_s, high=limits.MAX_SECONDS)
    if timeout is None:
        raise NeedlepointError("--timeout-s must be a finite number")
    if cap is not None and (in_rate is None or out_rate is None):
        raise NeedlepointError("--cost-cap needs --input-rate and --output-rate")
    if (in_rate is None) != (out_rate is None):
        raise NeedlepointError("give both --input-rate and --output-rate, or neither")
    key = None
    if o.sim_params and o.simulate != "position":
        raise NeedlepointError("simulation parameters apply only to --simulate position")
    if o.simulate is not None:
        if o.simulate not in SIM_MODES:
            raise NeedlepointError(f"--simulate must be one of {', '.join(SIM_MODES)}")
        if o.base_url or o.api_key_env:
            raise NeedlepointError("--simulate sends nothing: drop --base-url and --api-key-env")
        if o.simulate == "position":
            PositionParams.from_dict(o.sim_params)  # every parameter in its range, before any file
    else:
        if not o.base_url:
            raise NeedlepointError("a live run needs --base-url (or --simulate MODE)")
        limits.check_base_url(o.base_url, o.allow_insecure_http)
        if not o.model:
            raise NeedlepointError("a live run needs --model, equal to the frozen model")
        check_key_env_name(o.api_key_env)
        if read_key_now:
            key = read_key(o.api_key_env)
    return CheckedOptions(allow, timeout, deadline or 2 * timeout, in_rate, out_rate, cap, gap, key)


def check_settings(prepared_dir: str | Path, options: RunOptions) -> Settings:
    """Check every option and the prepared folder; raise NeedlepointError on the first problem."""
    from needlepoint.run.simulate import PositionParams

    o = options
    c = check_options(o, read_key_now=False)
    declared = None
    if o.declaration is not None:
        from needlepoint.run.declaration import read_declaration

        declared = read_declaration(o.declaration)
        if declared.record.simulation and o.simulate is None:
            raise NeedlepointError(
                f"{o.declaration}: made on a simulated clock, so it proves no order in time; "
                "a live run needs a declaration made with `needlepoint declare`"
            )
    # The prepared folder before the key: a wrong folder is the first thing to hear about.
    prepared = check_prepared(prepared_dir)
    key = read_key(o.api_key_env) if o.simulate is None and o.api_key_env else None
    frozen = frozen_model(prepared)
    if o.model is not None and o.model != frozen:
        raise NeedlepointError(
            f"--model {o.model!r} differs from the frozen model {frozen!r}; "
            "a run for another model needs its own prepared folder"
        )
    runner = prepared.protocol["runner"]
    protocol_gap = float(runner["min_gap_s"])
    gap = protocol_gap if c.min_gap_s is None else c.min_gap_s
    reason = (o.override_reason or "").strip() or None
    if gap < protocol_gap and reason is None:
        raise NeedlepointError(
            f"--min-gap-s {gap:g} is below the protocol's {protocol_gap:g} s: "
            "give --override-reason to record why"
        )
    return Settings(
        prepared=prepared,
        allow=c.allow,
        simulate=o.simulate,
        sim_params=PositionParams.from_dict(o.sim_params) if o.simulate == "position" else None,
        base_url=o.base_url,
        model=frozen,
        api_key_env=o.api_key_env,
        api_key=key,
        min_gap_s=gap,
        protocol_min_gap_s=protocol_gap,
        override_reason=reason if gap < protocol_gap else None,
        timeout_s=c.timeout_s,
        deadline_s=c.deadline_s,
        input_rate=c.input_rate,
        output_rate=c.output_rate,
        cost_cap=c.cost_cap,
        stop_statuses=frozenset(int(s) for s in runner["stop_statuses"]),
        max_consecutive_failures=int(runner["max_consecutive_failures"]),
        progress=o.progress,
        fsync=o.fsync,
        run_meta=dict(o.run_meta or {}),
        allow_insecure_http=bool(o.allow_insecure_http) and o.simulate is None,
        declaration=declared,
    )


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_key_env_name(name: str | None) -> None:
    """``--api-key-env`` is the NAME of a variable; a value that is not a name is never echoed.

    Someone who passes the key itself (``--api-key-env sk-...``) must not see it printed back
    (into a terminal's scrollback or a CI log), so the refusal does not quote what was given.
    """
    if not name:
        raise NeedlepointError("a live run needs --api-key-env NAME (the key stays in env)")
    if not _ENV_NAME.fullmatch(name) or looks_like_secret(name):
        raise NeedlepointError(
            "--api-key-env takes the NAME of the environment variable that holds the key "
            "(letters, digits and _, e.g. OPENAI_API_KEY), not the key itself; the value given "
            "is not shown"
        )


def read_key(name: str) -> str:
    """The key from the environment variable ``name`` (checked by ``check_key_env_name``)."""
    key = os.environ.get(name, "")
    if not key:
        raise NeedlepointError(f"environment variable {name} is not set or empty")
    limits.check_key(key, name)
    return key
