"""Everything the runner checks before it may spend anything; each refusal is one line.

A user's request is one ``RunOptions`` (built once by the CLI, the run notebook, a sweep file or
a benchmark); ``check_settings`` turns it into the checked ``Settings`` that the runner and the
run folder read. A run starts only with an explicit positive allowance, a prepared folder that
passes verify and audit, and, for a live run, a base URL, the frozen model and a key in the
environment.

Each number lies in a stated range, the base URL has a safe shape, and the key is printable
ASCII; each is checked before anything is written or sent, and each refusal names the option
and the rule, never a secret: a key is described by its length and the position and kind of the
offending character, never shown.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, urlsplit

from needlepoint.design.freeze import prepare_command
from needlepoint.design.prepared import frozen_model
from needlepoint.errors import NeedlepointError, looks_like_secret
from needlepoint.run.records import Limits

if TYPE_CHECKING:
    from needlepoint.design.prepared import Prepared
    from needlepoint.run.declaration import Declared
    from needlepoint.run.simulate import PositionParams

# How the progress is shown (runner.Progress): ``auto`` and ``terminal`` are live bars.
PROGRESS_MODES = ("auto", "terminal", "deterministic", "off")
LIVE_MODES = ("auto", "terminal")
MIN_KEY_LENGTH = 8
# A test key for a server you own (``sk-test``, ``EMPTY``): accepted with a warning when the
# endpoint is loopback or named with --self-hosted. Shorter still, the redaction of the key
# would rewrite ordinary words in an answer, so such a key is refused: use --no-key.
MIN_TEST_KEY_LENGTH = 4
# Requests in flight at once (--concurrency): a server you own, never a shared API's quota.
MAX_CONCURRENCY = 64
# A day: longer than any request or pause a run needs, short enough that a clock, a sleep and a
# timestamp computed from it stay exact (1e308 seconds overflowed them).
MAX_SECONDS = 86_400.0
MIN_TIMEOUT_S = 0.001
# Money per million tokens, and a cap: with counts below 2^53 every cost stays a finite double.
MAX_RATE = 1e6
MAX_COST_CAP = 1e12
# More attempts than any plan holds (a protocol plans at most 100,000 requests).
MAX_ALLOW = 1_000_000


def number(
    name: str,
    value: float | None,
    *,
    low: float = 0.0,
    high: float,
    positive: bool = False,
) -> float | None:
    """``value`` as a float within ``[low, high]`` (``(0, high]`` when ``positive``), or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise NeedlepointError(f"{name} must be a finite number")
    if value < 0 or (positive and value == 0):
        raise NeedlepointError(f"{name} must be {'positive' if positive else 'non-negative'}")
    if value < low or value > high:
        raise NeedlepointError(f"{name} {value:g} is outside the allowed range {low:g} to {high:g}")
    return float(value)


def check_allow(allow: object) -> int:
    """A positive whole number of attempts, at most MAX_ALLOW."""
    if isinstance(allow, bool) or not isinstance(allow, int) or allow <= 0:
        raise NeedlepointError("--allow must be a positive integer: the most requests to send")
    if allow > MAX_ALLOW:
        raise NeedlepointError(f"--allow {allow} is more than {MAX_ALLOW:,}, more than any plan")
    return allow


def check_key(key: str, env: str, *, test_key_ok: bool = False) -> None:
    """A key of printable ASCII without whitespace: anything else cannot be sent in a header.

    A key read from a file with Windows line ends carries a CR; sending it made httpx refuse
    the header after the attempt was journalled, burning the request. ``test_key_ok`` (a server
    you own): a key of MIN_TEST_KEY_LENGTH to MIN_KEY_LENGTH - 1 characters is accepted (the
    caller warns, ``short_key_warning``).
    """
    floor = MIN_TEST_KEY_LENGTH if test_key_ok else MIN_KEY_LENGTH
    if len(key) < floor:
        if test_key_ok:
            raise NeedlepointError(
                f"the key in {env} is shorter than {MIN_TEST_KEY_LENGTH} characters: its "
                "redaction would rewrite ordinary text in the answers; a server that needs no "
                "key takes --no-key instead"
            )
        raise NeedlepointError(
            f"the key in {env} is shorter than {MIN_KEY_LENGTH} characters, too short to be "
            "kept out of the records reliably (a test key for a loopback server, or one named "
            "with --self-hosted HOST, may be shorter; a server without a key takes --no-key)"
        )
    for at, c in enumerate(key, start=1):
        if "!" <= c <= "~":
            continue
        if c in "\r\n":
            what = "a line break (CR or LF; read from a file with Windows line ends?)"
        elif c in " \t" or c.isspace():
            what = "whitespace"
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            what = "a control character"
        else:
            what = "a character that is not ASCII"
        raise NeedlepointError(
            f"the key in {env} holds {what} at character {at} of {len(key)}; a key is printable "
            "ASCII without spaces (the key itself is not shown)"
        )


def parse_base_url(base_url: str) -> SplitResult:
    """``base_url`` parsed as the HTTP client will parse it, or one line saying why not.

    Called before any folder is written: a URL the client cannot use (a port that is not a
    number, an unclosed ``[``, a control character such as DEL) once left a run.json bound to
    it, so the corrected command into that folder was refused.
    """
    import httpx

    bad = next((c for c in base_url if ord(c) < 0x21 or 0x7F <= ord(c) <= 0x9F), None)
    if bad is not None:
        raise NeedlepointError(
            f"--base-url holds a space or control character ({bad!r}) at character "
            f"{base_url.index(bad) + 1}; a URL has none"
        )
    try:
        parts = urlsplit(base_url)
        _ = parts.hostname, parts.port
        httpx.URL(base_url.rstrip("/") + "/chat/completions")
    except (ValueError, httpx.InvalidURL) as exc:
        raise NeedlepointError(f"--base-url is not a valid URL ({str(exc)[:200]})") from None
    if parts.scheme not in ("http", "https") or not parts.netloc or not parts.hostname:
        raise NeedlepointError(f"--base-url {base_url[:200]!r} is not an http(s) URL")
    return parts


def check_base_url(base_url: str, allow_insecure_http: bool) -> None:
    """An http(s) URL without credentials, query or fragment; plain http only to loopback."""
    parts = parse_base_url(base_url)
    host = parts.hostname
    if parts.username is not None or parts.password is not None:
        # Not echoed: it holds a credential. httpx would send it as Basic auth instead of the key.
        raise NeedlepointError(
            "--base-url holds a user name or password (user:pass@host); the URL is recorded in "
            "run.json, so credentials never go in it: the key goes in --api-key-env"
        )
    if parts.query or parts.fragment or base_url.rstrip().endswith(("?", "#")):
        raise NeedlepointError(
            "--base-url has a query or fragment ('?' or '#'); the endpoint path is appended to "
            "the base URL, which a query or fragment would swallow"
        )
    if parts.scheme == "http" and not is_loopback(host) and not allow_insecure_http:
        raise NeedlepointError(
            f"--base-url {base_url!r}: the key would travel unencrypted to "
            f"{host}; use https, a loopback host (127.0.0.0/8, ::1, localhost), "
            "or --allow-insecure-http"
        )


def short_key_warning(key: str, env: str, host: str | None) -> str | None:
    """The one-line warning for a short test key accepted for a server you own, or None."""
    if len(key) >= MIN_KEY_LENGTH:
        return None
    return (
        f"warning: the key in {env} is {len(key)} characters, shorter than {MIN_KEY_LENGTH}: "
        f"accepted as a test key for the self-hosted server {host}; it is still redacted "
        "wherever it appears in a record"
    )


def own_server(base_url: str, self_hosted: str | None) -> bool:
    """Whether ``base_url`` is a server the user owns: a loopback host, or the host named by
    ``--self-hosted HOST`` (checked by ``check_self_hosted``)."""
    host = urlsplit(base_url).hostname
    return is_loopback(host) or (self_hosted is not None and host == self_hosted.lower())


def check_self_hosted(self_hosted: str | None, base_url: str) -> None:
    """``--self-hosted HOST`` names the base URL's host exactly, so a flag copied into another
    command cannot vouch for a different endpoint."""
    if self_hosted is None:
        return
    host = urlsplit(base_url).hostname
    if self_hosted.lower() != host:
        raise NeedlepointError(
            f"--self-hosted {self_hosted[:100]!r} does not name the host of --base-url "
            f"({host}); it vouches for exactly that host"
        )


def check_no_key(
    no_key: bool, api_key_env: str | None, base_url: str, self_hosted: str | None
) -> None:
    """``--no-key``: only for a server you own, and never beside ``--api-key-env``."""
    if not no_key:
        return
    if api_key_env:
        raise NeedlepointError("give --no-key or --api-key-env, not both")
    if not own_server(base_url, self_hosted):
        host = urlsplit(base_url).hostname
        raise NeedlepointError(
            f"--no-key: {host} is not a loopback host; a server without a key must be this "
            f"machine (127.0.0.0/8, ::1, localhost) or be named with --self-hosted {host}"
        )


def check_concurrency(
    concurrency: object, override_reason: str | None, simulate: str | None
) -> int:
    """``--concurrency N``: 1 to MAX_CONCURRENCY; above 1 only under a recorded spacing override
    (a server you own), and never simulated (a simulated clock is one sequence of events)."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise NeedlepointError("--concurrency must be a positive integer")
    if concurrency > MAX_CONCURRENCY:
        raise NeedlepointError(f"--concurrency {concurrency} is more than {MAX_CONCURRENCY}")
    if concurrency > 1 and simulate is not None:
        raise NeedlepointError(
            "--concurrency applies to a live server you own; a simulated run has one clock "
            "and never waits, so it runs one request at a time"
        )
    if concurrency > 1 and override_reason is None:
        raise NeedlepointError(
            f"--concurrency {concurrency} needs the spacing override: --min-gap-s below the "
            "protocol's with --override-reason saying whose server this is"
        )
    return concurrency


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


DEFAULT_TIMEOUT_S = 120.0


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
    # A server you own: no key at all (loopback, or the host named by self_hosted), and the
    # host vouched for as self-hosted (--self-hosted HOST).
    no_key: bool = False
    self_hosted: str | None = None
    # Requests in flight at once; above 1 only with the spacing override (run/concurrent.py).
    concurrency: int = 1


@dataclass(frozen=True, kw_only=True)
class Settings(Limits):
    """A checked run configuration: the session's ``Limits`` and everything else the runner
    reads. The key is kept out of repr so it cannot leak into logs."""

    prepared: Prepared = field(repr=False)
    simulate: str | None
    sim_params: PositionParams | None
    base_url: str | None
    model: str
    api_key_env: str | None
    api_key: str | None = field(repr=False)
    protocol_min_gap_s: float
    stop_statuses: frozenset[int]
    max_consecutive_failures: int
    progress: str
    fsync: bool
    run_meta: dict[str, Any] = field(default_factory=dict)
    allow_insecure_http: bool = False
    declaration: Declared | None = None
    no_key: bool = False
    self_hosted: str | None = None
    concurrency: int = 1
    # Lines to show before anything is sent (a short test key accepted for a server you own).
    warnings: tuple[str, ...] = ()

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


def check_options(options: RunOptions, *, read_key_now: bool = True) -> RunOptions:
    """Every check that needs no prepared folder; a pilot runs them before it creates one.

    Returns the options with every number as checked (and the deadline filled in);
    ``read_key_now=False``: the key is read later (``check_settings`` checks the folder first).
    """
    from needlepoint.run.simulate import SIM_MODES, PositionParams

    o = options
    if o.progress not in PROGRESS_MODES:
        raise NeedlepointError(f"progress must be one of {', '.join(PROGRESS_MODES)}")
    allow = check_allow(o.allow)
    timeout = number("--timeout-s", o.timeout_s, low=MIN_TIMEOUT_S, high=MAX_SECONDS, positive=True)
    deadline = number("deadline_s", o.deadline_s, high=2 * MAX_SECONDS, positive=True)
    in_rate = number("--input-rate", o.input_rate, high=MAX_RATE)
    out_rate = number("--output-rate", o.output_rate, high=MAX_RATE)
    cap = number("--cost-cap", o.cost_cap, high=MAX_COST_CAP)
    gap = number("--min-gap-s", o.min_gap_s, high=MAX_SECONDS)
    if timeout is None:
        raise NeedlepointError("--timeout-s must be a finite number")
    if cap is not None and (in_rate is None or out_rate is None):
        raise NeedlepointError("--cost-cap needs --input-rate and --output-rate")
    if (in_rate is None) != (out_rate is None):
        raise NeedlepointError("give both --input-rate and --output-rate, or neither")
    if o.sim_params and o.simulate != "position":
        raise NeedlepointError("simulation parameters apply only to --simulate position")
    if o.simulate is not None:
        if o.simulate not in SIM_MODES:
            raise NeedlepointError(f"--simulate must be one of {', '.join(SIM_MODES)}")
        if o.base_url or o.api_key_env or o.no_key or o.self_hosted:
            raise NeedlepointError(
                "--simulate sends nothing: drop --base-url, --api-key-env, --no-key and "
                "--self-hosted"
            )
        if o.simulate == "position":
            PositionParams.from_dict(o.sim_params)  # every parameter in its range, before any file
    else:
        if not o.base_url:
            raise NeedlepointError("a live run needs --base-url (or --simulate MODE)")
        # Without a key nothing secret travels, so plain http to a named self-hosted host is fine.
        check_base_url(o.base_url, o.allow_insecure_http or o.no_key)
        check_self_hosted(o.self_hosted, o.base_url)
        if not o.model:
            raise NeedlepointError("a live run needs --model, equal to the frozen model")
        check_no_key(o.no_key, o.api_key_env, o.base_url, o.self_hosted)
        if not o.no_key:
            check_key_env_name(o.api_key_env)
            if read_key_now:
                read_key(o.api_key_env, test_key_ok=own_server(o.base_url, o.self_hosted))
    return dataclasses.replace(
        o,
        allow=allow,
        timeout_s=timeout,
        deadline_s=deadline or 2 * timeout,
        input_rate=in_rate,
        output_rate=out_rate,
        cost_cap=cap,
        min_gap_s=gap,
    )


def check_settings(prepared_dir: str | Path, options: RunOptions) -> Settings:
    """Check every option and the prepared folder; raise NeedlepointError on the first problem."""
    from needlepoint.run.simulate import PositionParams

    o = options
    c = check_options(o, read_key_now=False)
    if o.declaration is not None:
        from needlepoint.run.declaration import read_for_run

        declared = read_for_run(o.declaration, live=o.simulate is None)
    else:
        declared = None
    # The prepared folder before the key: a wrong folder is the first thing to hear about.
    prepared = check_prepared(prepared_dir)
    own = o.simulate is None and own_server(o.base_url or "", o.self_hosted)
    key = read_key(o.api_key_env, test_key_ok=own) if o.simulate is None and o.api_key_env else None
    host = urlsplit(o.base_url or "").hostname
    warned = None if key is None else short_key_warning(key, str(o.api_key_env), host)
    warnings = () if warned is None else (warned,)
    frozen = frozen_model(prepared)
    if o.model is not None and o.model != frozen:
        raise NeedlepointError(
            f"--model {o.model!r} differs from the frozen model {frozen!r}; a run for another "
            f"model needs its own prepared folder: {prepare_command(prepared_dir, o.model)} "
            f"(in a pipeline, -p model {shlex.quote(o.model)} freezes it in 02-freeze)"
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
    override = reason if gap < protocol_gap else None
    concurrency = check_concurrency(o.concurrency, override, o.simulate)
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
        override_reason=override,
        timeout_s=c.timeout_s,
        deadline_s=c.deadline_s,  # type: ignore[arg-type]  # filled in by check_options
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
        no_key=bool(o.no_key) and o.simulate is None,
        self_hosted=None if o.self_hosted is None else o.self_hosted.lower(),
        concurrency=concurrency,
        warnings=warnings,
    )


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_key_env_name(name: str | None) -> None:
    """``--api-key-env`` is the NAME of a variable; a value that is not a name is never echoed.

    Someone who passes the key itself (``--api-key-env sk-...``) must not see it printed back
    (into a terminal's scrollback or a CI log), so the refusal does not quote what was given.
    """
    if not name:
        raise NeedlepointError(
            "a live run needs --api-key-env NAME (the key stays in env), or --no-key for a "
            "server you own that needs none"
        )
    if not _ENV_NAME.fullmatch(name) or looks_like_secret(name):
        raise NeedlepointError(
            "--api-key-env takes the NAME of the environment variable that holds the key "
            "(letters, digits and _, e.g. OPENAI_API_KEY), not the key itself; the value given "
            "is not shown"
        )


def read_key(name: str, *, test_key_ok: bool = False) -> str:
    """The key from the environment variable ``name`` (checked by ``check_key_env_name``);
    ``test_key_ok``: a server you own, where a short test key is accepted."""
    key = os.environ.get(name, "")
    if not key:
        raise NeedlepointError(f"environment variable {name} is not set or empty")
    check_key(key, name, test_key_ok=test_key_ok)
    return key
