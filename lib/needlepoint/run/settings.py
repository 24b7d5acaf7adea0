"""Everything the runner checks before it may spend anything; each refusal is one line.

A user's request is one ``RunOptions`` (built once by the CLI, the run notebook or a
benchmark); ``check_settings`` turns it into the checked ``Settings`` that the loop, the session
and the run folder read. A run starts only with an explicit positive allowance, a prepared
folder that passes verify and audit, and, for a live run, a base URL, the frozen model and a
key in the environment.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from needlepoint.design.prepared import frozen_model
from needlepoint.errors import NeedlepointError, looks_like_secret
from needlepoint.run.progress import PROGRESS_MODES

if TYPE_CHECKING:
    from needlepoint.design.prepared import Prepared
    from needlepoint.run.simulate import PositionParams

DEFAULT_TIMEOUT_S = 120.0
MIN_KEY_LENGTH = 8


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

    @property
    def simulation(self) -> bool:
        return self.simulate is not None


def _number(name: str, value: float | None, *, positive: bool = False) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise NeedlepointError(f"{name} must be a finite number")
    if value < 0 or (positive and value == 0):
        raise NeedlepointError(f"{name} must be {'positive' if positive else 'non-negative'}")
    return float(value)


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


def check_settings(prepared_dir: str | Path, options: RunOptions) -> Settings:
    """Check every option and the prepared folder; raise NeedlepointError on the first problem."""
    from needlepoint.run.simulate import SIM_MODES, PositionParams

    o = options
    if o.progress not in PROGRESS_MODES:
        raise NeedlepointError(f"progress must be one of {', '.join(PROGRESS_MODES)}")
    allow, simulate, sim_params = o.allow, o.simulate, o.sim_params
    base_url, model, api_key_env = o.base_url, o.model, o.api_key_env
    if isinstance(allow, bool) or not isinstance(allow, int) or allow <= 0:
        raise NeedlepointError("--allow must be a positive integer: the most requests to send")
    timeout = _number("--timeout-s", o.timeout_s, positive=True)
    deadline = _number("deadline_s", o.deadline_s, positive=True) or 2 * timeout
    in_rate = _number("--input-rate", o.input_rate)
    out_rate = _number("--output-rate", o.output_rate)
    cap = _number("--cost-cap", o.cost_cap)
    if cap is not None and (in_rate is None or out_rate is None):
        raise NeedlepointError("--cost-cap needs --input-rate and --output-rate")
    if (in_rate is None) != (out_rate is None):
        raise NeedlepointError("give both --input-rate and --output-rate, or neither")
    key = None
    if sim_params and simulate != "position":
        raise NeedlepointError("simulation parameters apply only to --simulate position")
    if simulate is not None:
        if simulate not in SIM_MODES:
            raise NeedlepointError(f"--simulate must be one of {', '.join(SIM_MODES)}")
        if base_url or api_key_env:
            raise NeedlepointError("--simulate sends nothing: drop --base-url and --api-key-env")
    else:
        if not base_url:
            raise NeedlepointError("a live run needs --base-url (or --simulate MODE)")
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise NeedlepointError(f"--base-url {base_url!r} is not an http(s) URL")
        if parts.scheme == "http" and not is_loopback(parts.hostname) and not o.allow_insecure_http:
            raise NeedlepointError(
                f"--base-url {base_url!r}: the key would travel unencrypted to "
                f"{parts.hostname}; use https, a loopback host (127.0.0.0/8, ::1, localhost), "
                "or --allow-insecure-http"
            )
        if not model:
            raise NeedlepointError("a live run needs --model, equal to the frozen model")
        check_key_env_name(api_key_env)
    # The prepared folder before the key: a wrong folder is the first thing to hear about.
    prepared = check_prepared(prepared_dir)
    if simulate is None and api_key_env is not None:
        key = read_key(api_key_env)
    frozen = frozen_model(prepared)
    if model is not None and model != frozen:
        raise NeedlepointError(
            f"--model {model!r} differs from the frozen model {frozen!r}; "
            "a run for another model needs its own prepared folder"
        )
    runner = prepared.protocol["runner"]
    protocol_gap = float(runner["min_gap_s"])
    gap = protocol_gap if o.min_gap_s is None else _number("--min-gap-s", o.min_gap_s)
    reason = (o.override_reason or "").strip() or None
    if gap < protocol_gap and reason is None:
        raise NeedlepointError(
            f"--min-gap-s {gap:g} is below the protocol's {protocol_gap:g} s: "
            "give --override-reason to record why"
        )
    return Settings(
        prepared=prepared,
        allow=allow,
        simulate=simulate,
        sim_params=PositionParams.from_dict(sim_params) if simulate == "position" else None,
        base_url=base_url,
        model=frozen,
        api_key_env=api_key_env,
        api_key=key,
        min_gap_s=gap,
        protocol_min_gap_s=protocol_gap,
        override_reason=reason if gap < protocol_gap else None,
        timeout_s=timeout,
        deadline_s=deadline,
        input_rate=in_rate,
        output_rate=out_rate,
        cost_cap=cap,
        stop_statuses=frozenset(int(s) for s in runner["stop_statuses"]),
        max_consecutive_failures=int(runner["max_consecutive_failures"]),
        progress=o.progress,
        fsync=o.fsync,
        run_meta=dict(o.run_meta or {}),
        allow_insecure_http=bool(o.allow_insecure_http) and simulate is None,
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
    if len(key) < MIN_KEY_LENGTH:
        raise NeedlepointError(
            f"the key in {name} is shorter than {MIN_KEY_LENGTH} characters, too short "
            "to be kept out of the records reliably"
        )
    return key


def is_loopback(host: str | None) -> bool:
    """Whether a URL's host is this machine: ``localhost``, 127.0.0.0/8 or ::1."""
    if host is None:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
